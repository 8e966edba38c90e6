//! Unit tests of the checks before running, against the Example Bank's agents.

use std::path::{Path, PathBuf};

use super::*;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking")
}

fn banking() -> Facts {
    Facts::load(&examples()).expect("the examples load").expect("the examples have agents")
}

fn problems(yaml: &str, facts: Option<&Facts>) -> Vec<String> {
    let file = ScenarioFile::parse(Path::new("s.yaml"), yaml.to_owned()).expect("parses");
    check(&file, facts).iter().map(ToString::to_string).collect()
}

#[test]
fn the_example_scenarios_pass_the_checks() {
    let facts = banking();
    let dir = examples().join("tests");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/banking/tests") {
        let path = entry.expect("an entry").path();
        let file = ScenarioFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check(&file, Some(&facts)), [], "{}", path.display());
        files += 1;
    }
    assert!(files >= 5, "a scenario for every path of the example");
}

#[test]
fn expectations_that_could_never_match_are_refused_at_their_line() {
    let yaml = "\
name: n
agent: disputes
steps:
  - say: hi
    expect:
      agent: loans
      handoffs: [{ to: mortgages }]
      tools:
        - name: check_balance
        - name: transfer_money
          args: {}
          argsExact: {}
      consent:
        - tool: check_balance
          answer: allow
      memory:
        - key: favouriteColour
      workflow: nowhere
      transcript:
        matches: ['ok', '(unclosed']
  - { say: hi, speech: hello there }
  - say: ''
  - audio: nowhere.wav
";
    let found = problems(yaml, Some(&banking()));
    let expected = [
        "s.yaml:2: agent: a session cannot start at \"disputes\" (gateway.expose: false; the gateway refuses it with 4403): \
         start at one of triage and reach it by handoff",
        "s.yaml:6: steps[0].expect.agent: no agent \"loans\" in the folder; its agents: banking, disputes, idv, triage",
        "s.yaml:7: steps[0].expect.handoffs[0].to: no agent of the folder hands off to \"mortgages\"; handoffs can go to: \
         banking, disputes, idv, triage",
        "s.yaml:10: steps[0].expect.tools[1].name: no agent of the folder has a tool \"transfer_money\"; the tools: \
         check_balance, get_transactions, open_dispute, perform_idv_check, return_to_idv, return_to_triage, \
         save_preferences, show_card, transfer_to_banking, transfer_to_disputes, transfer_to_idv, use_skill, \
         verify_by_keypad",
        "s.yaml:10: steps[0].expect.tools[1]: give `args` (partial) or `argsExact`, not both",
        "s.yaml:14: steps[0].expect.consent[0].tool: \"check_balance\" never asks for consent (no tool of the folder named \
         so has `consent: required`); tools that ask: open_dispute",
        "s.yaml:17: steps[0].expect.memory[0].key: no tool of the folder remembers \"favouriteColour\" (`remember.key`); \
         keys tools set: callerPreferences, verifiedUser",
        "s.yaml:18: steps[0].expect.workflow: no node \"nowhere\" in any agent's workflow; its nodes: answer, choose, \
         collect, done, file, find, give_up, goodbye, greet, route, serve, to_banking, to_disputes, verify",
        "s.yaml:20: steps[0].expect.transcript.matches[1]: the regular expression \"(unclosed\" does not compile: \
         unclosed group",
        "s.yaml:21: steps[1]: give one of `say:`, `speech:` and `audio:` per step",
        "s.yaml:22: steps[2]: the step says nothing: add `say:` with what the caller types (or `keys:` with what it presses)",
        "s.yaml:23: steps[3].audio: nowhere.wav: cannot read it: No such file or directory (os error 2)",
    ];
    assert_eq!(found, expected);
}

#[test]
fn a_node_is_looked_up_in_the_expected_agents_workflow() {
    let yaml = "name: n\nsteps:\n  - say: hi\n    expect:\n      agent: idv\n      workflow: serve\n";
    let found = problems(yaml, Some(&banking()));
    assert_eq!(
        found,
        [
            "s.yaml:6: steps[0].expect.workflow: no node \"serve\" in idv's workflow; its nodes: choose, collect, give_up, to_banking, to_disputes, verify"
        ]
    );
}

#[test]
fn without_agents_only_the_checks_that_need_none_are_made() {
    let yaml =
        "name: n\nsteps:\n  - say: hi\n    expect:\n      handoffs: [{to: anyone}]\n      transcript: {matches: '['}\n";
    let found = problems(yaml, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("s.yaml:6: steps[0].expect.transcript.matches: the regular expression \"[\""),
        "{found:?}"
    );
    assert_eq!(
        problems("name: n\nsteps: []\n", None),
        ["s.yaml:2: steps: no steps: add at least one `- say: ...` with what the caller types"]
    );
}

#[test]
fn keys_a_keypad_cannot_press_are_refused_with_their_line() {
    let yaml = "name: n\nsteps:\n  - keys: \"12 3\"\n  - keys: \"\"\n  - keys: \"1x\"\n  - keys: \"123456789012345678901234567890123\"\n  - keys: \"0123456789*#ABCD\"\n  - keys: \"1\"\n    say: one\n";
    let found = problems(yaml, None);
    assert_eq!(
        found,
        [
            "s.yaml:3: steps[0].keys: \"12 3\" holds ' ', which is no key on a phone's keypad: press 0-9, *, # or A-D (no spaces)",
            "s.yaml:4: steps[1].keys: no keys: give the keys the caller presses, e.g. keys: \"1234#\"",
            "s.yaml:5: steps[2].keys: \"1x\" holds 'x', which is no key on a phone's keypad: press 0-9, *, # or A-D (no spaces)",
            "s.yaml:6: steps[3].keys: 33 keys in one step, more than 32: split them over steps",
        ],
        "keys alone, or with what the caller says (pressed when the agent starts a tool), are taken"
    );
}

#[test]
fn keys_with_what_is_said_are_taken_and_an_empty_say_without_them_is_not() {
    assert!(problems("name: n\nsteps:\n  - say: I'll type it\n    keys: \"1234#\"\n", None).is_empty());
    assert_eq!(
        problems("name: n\nsteps:\n  - say: \"\"\n", None),
        [
            "s.yaml:3: steps[0]: the step says nothing: add `say:` with what the caller types (or `keys:` with what it presses)"
        ]
    );
}
