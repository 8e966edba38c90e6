//! `switchboard test`, run as a user runs it: the real binary, on the Example Bank's
//! scenarios (examples/banking/tests, which must all pass, offline, well within a minute),
//! on scenarios that must fail (the report and the JUnit file must name the divergence),
//! on bad scenario files (refused with file and line before anything runs), on steps that
//! press keys or speak (`inputs`), and against a gateway URL (`switchboard local` in
//! another process, `gateway_url`; and the real gateway and runtime processes of the
//! gateway tests' fleet, where `speech:` steps are rendered by Amazon Polly, `speech`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

#[path = "../gateway/fleet.rs"]
#[allow(dead_code)]
mod fleet;
mod gateway_url;
mod inputs;
mod judged;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;
mod speech;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `switchboard test <args>` from the repository root.
fn switchboard_test(args: &[&str]) -> Output {
    switchboard_test_with(args, &[])
}

/// [`switchboard_test`] with the variables `env` set.
fn switchboard_test_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("test")
        .args(args)
        .current_dir(root())
        .env_remove("RUST_LOG")
        .env_remove("SWITCHBOARD_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("switchboard runs")
}

/// The summary `--summary-file` wrote, read as the operator reads a termination message.
fn read_summary(path: &Path) -> switchboard_crds::agent_test_summary::TestSummary {
    let text = std::fs::read_to_string(path).expect("the summary is written");
    switchboard_crds::agent_test_summary::TestSummary::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh folder with `files` (name, YAML) in it.
fn scenario_dir(files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-scenarios-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    for (name, yaml) in files {
        std::fs::write(dir.join(name), yaml).expect("the scenario is written");
    }
    dir
}

/// What a JUnit file says: the `failures` and `tests` of `<testsuites>`, the `<testcase>`
/// and `<failure>` elements. Fails when it is not well-formed XML.
#[derive(Debug, Default)]
struct Junit {
    tests: Option<String>,
    failures: Option<String>,
    cases: usize,
    failure_elements: usize,
    failure_messages: Vec<String>,
}

fn parse_junit(path: &Path) -> Junit {
    let xml = std::fs::read_to_string(path).expect("the JUnit file is written");
    let mut junit = Junit::default();
    let mut element = String::new();
    let mut depth = 0i32;
    for token in xmlparser::Tokenizer::from(xml.as_str()) {
        match token.unwrap_or_else(|e| panic!("the JUnit file is not well-formed XML: {e}\n{xml}")) {
            xmlparser::Token::ElementStart { local, .. } => {
                element = local.as_str().to_owned();
                depth += 1;
                match element.as_str() {
                    "testcase" => junit.cases += 1,
                    "failure" => junit.failure_elements += 1,
                    _ => {}
                }
            }
            xmlparser::Token::Attribute { local, value, .. } => match (element.as_str(), local.as_str()) {
                ("testsuites", "tests") => junit.tests = Some(value.as_str().to_owned()),
                ("testsuites", "failures") => junit.failures = Some(value.as_str().to_owned()),
                ("failure", "message") => junit.failure_messages.push(value.as_str().to_owned()),
                _ => {}
            },
            xmlparser::Token::ElementEnd { end, .. } if !matches!(end, xmlparser::ElementEnd::Open) => depth -= 1,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "every element is closed: {xml}");
    junit
}

#[test]
fn the_example_bank_scenarios_pass_offline_within_a_minute() {
    let junit = std::env::temp_dir().join(format!("switchboard-junit-{}.xml", uuid::Uuid::new_v4()));
    let started = Instant::now();
    let out = switchboard_test(&["examples/banking", "--jobs", "8", "--junit", junit.to_str().expect("utf-8")]);
    let elapsed = started.elapsed();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "the examples pass:\n{stdout}\n{stderr}");
    for name in [
        "balance",
        "dispute",
        "dispute-declined",
        "failed-verification",
        "fees",
        "keypad-verification",
        "return-to-triage",
        "unknown-request",
        "voice-balance",
    ] {
        assert!(stdout.contains(&format!("PASS  examples/banking/tests/{name}.yaml")), "{name}: {stdout}");
    }
    assert!(stdout.contains("ok: 9 scenario(s), 9 passed, 0 failed"), "{stdout}");
    assert!(elapsed < Duration::from_secs(60), "the suite took {elapsed:?}");
    let report = parse_junit(&junit);
    assert_eq!((report.tests.as_deref(), report.failures.as_deref()), (Some("9"), Some("0")), "{report:?}");
    assert_eq!((report.cases, report.failure_elements), (9, 0));
    let _ = std::fs::remove_file(&junit);
}

const WRONG_ARGUMENT: &str = "\
name: A wrong expected tool argument
steps:
  - say: I'd like to check my balance
    expect:
      agent: idv
  - say: My name is Ada Lovelace, account 12345678, sort code 12-34-56
    expect:
      tools:
        - name: perform_idv_check
          args: { accountNumber: \"87654321\" }
";

const MISSING_HANDOFF: &str = "\
name: A handoff that does not happen
steps:
  - say: Hello
    expect:
      agent: triage
      handoffs: [{ to: idv }]
";

const TOO_SLOW: &str = "\
name: A latency budget of 1 ms
steps:
  - say: Hello
    expect:
      latency: { turnMs: 1 }
";

const MISSING_PHRASE: &str = "\
name: A phrase the agent never says
steps:
  - say: Hello
    expect:
      transcript: { contains: Goodbye forever }
";

#[test]
fn scenarios_that_must_fail_fail_and_the_report_names_each_divergence() {
    let dir = scenario_dir(&[
        ("a-wrong-argument.yaml", WRONG_ARGUMENT),
        ("b-missing-handoff.yaml", MISSING_HANDOFF),
        ("c-too-slow.yaml", TOO_SLOW),
        ("d-missing-phrase.yaml", MISSING_PHRASE),
    ]);
    let junit = dir.join("junit.xml");
    let summary = dir.join("summary.json");
    let out = switchboard_test(&[
        dir.to_str().expect("utf-8"),
        "--agents",
        "examples/banking",
        "--junit",
        junit.to_str().expect("utf-8"),
        "--summary-file",
        summary.to_str().expect("utf-8"),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "failing scenarios fail the run:\n{stdout}\n{stderr}");
    assert!(stderr.contains("4 of 4 scenario(s) did not pass"), "{stderr}");
    let wrong = dir.join("a-wrong-argument.yaml");
    let expected = [
        // The file and the line of the expectation, the step, both sides of each divergence.
        format!("{}:9: A wrong expected tool argument — step 2 of 2", wrong.display()),
        "  tools[0] (first divergence)\n    expected: a call of perform_idv_check with arguments including \
         {\"accountNumber\":\"87654321\"}\n    got:      tool calls: perform_idv_check \
         {\"accountNumber\":\"12345678\",\"name\":\"Ada Lovelace\",\"sortCode\":\"12-34-56\"} (ok)"
            .to_owned(),
        "  handoffs[0] (first divergence)\n    expected: a handoff to idv\n    got:      no handoff".to_owned(),
        "  latency.turnMs (first divergence)\n    expected: the end of the turn within 1 ms\n    got:      the end of the turn after"
            .to_owned(),
        "  transcript.contains (first divergence)\n    expected: text containing \"Goodbye forever\"\n    got:      \"Hello!"
            .to_owned(),
        // The transcript of the failing turn.
        "ms  > My name is Ada Lovelace, account 12345678, sort code 12-34-56".to_owned(),
        "ms  [memory verifiedUser = ".to_owned(),
        "FAILED: 4 scenario(s), 0 passed, 4 failed".to_owned(),
    ];
    for phrase in expected {
        assert!(stdout.contains(&phrase), "the report says {phrase:?}:\n{stdout}");
    }
    let report = parse_junit(&junit);
    assert_eq!((report.tests.as_deref(), report.failures.as_deref()), (Some("4"), Some("4")), "{report:?}");
    assert_eq!((report.cases, report.failure_elements), (4, 4));
    assert!(report.failure_messages[0].contains("tools[0]: expected a call of perform_idv_check"), "{report:?}");
    // The summary an AgentTest's Job leaves in its termination message.
    let summary = read_summary(&summary);
    assert_eq!((summary.passed, summary.failed, summary.total, summary.error), (0, 4, 4, None));
    let first = summary.first_divergence.expect("the first divergence");
    assert!(
        first.starts_with("A wrong expected tool argument, step 2 of 2 (say: ")
            && first.contains("tools[0]: expected a call of perform_idv_check with arguments including"),
        "{first}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const BAD: &str = "\
name: Expectations that could never match
steps:
  - say: Hello
    expect:
      handoffs: [{ to: mortgages }]
      tools:
        - name: transfer_money
      transcript:
        matches: \"(unclosed\"
  - audio: hello.wav
";

const TYPO: &str = "\
name: A typo
steps:
  - say: Hello
    expect:
      handoff: [{ to: idv }]
";

#[test]
fn bad_scenario_files_are_refused_with_file_and_line_before_anything_runs() {
    let dir = scenario_dir(&[("bad.yaml", BAD), ("typo.yaml", TYPO)]);
    let summary_file = std::env::temp_dir().join(format!("switchboard-summary-{}.json", uuid::Uuid::new_v4()));
    let summary_arg = summary_file.to_str().expect("utf-8");
    let out = switchboard_test(&[
        dir.to_str().expect("utf-8"),
        "--agents",
        "examples/banking",
        "--summary-file",
        summary_arg,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("Running"), "nothing runs: {stdout}");
    let (bad, typo) = (dir.join("bad.yaml").display().to_string(), dir.join("typo.yaml").display().to_string());
    for phrase in [
        "5 problem(s) in the scenario files; nothing was run".to_owned(),
        format!("{bad}:5: steps[0].expect.handoffs[0].to: no agent of the folder hands off to \"mortgages\""),
        format!("{bad}:7: steps[0].expect.tools[0].name: no agent of the folder has a tool \"transfer_money\""),
        format!("{bad}:9: steps[0].expect.transcript.matches: the regular expression \"(unclosed\" does not compile"),
        format!("{bad}:10: steps[1].audio: {}: cannot read it", dir.join("hello.wav").display()),
        format!("{typo}:5: steps[0].expect: unknown field `handoff`, expected one of"),
    ] {
        assert!(stderr.contains(&phrase), "the refusal says {phrase:?}:\n{stderr}");
    }
    // Refused, the summary says why and counts nothing.
    let summary = read_summary(&summary_file);
    assert_eq!((summary.passed, summary.failed, summary.total), (0, 0, 0));
    assert!(summary.error.is_some_and(|e| e.contains("nothing was run") && e.contains("bad.yaml:5")));
    let _ = std::fs::remove_file(&summary_file);
    // --check reads and checks the same way without running anything.
    let out = switchboard_test(&["examples/banking", "--check"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("9 scenario file(s) checked: no problems"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Agent whose Persona and Workflow do not exist.
const LOST_AGENT: &str = "\
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: {name: lost}
spec:
  mode: text
  personaRef: {name: nobody}
  workflowRef: {name: nowhere}
";

#[test]
fn only_a_tests_folder_has_its_parent_read_as_its_agents() {
    // A folder holding an invalid Agent, as `/tmp` may hold another program's.
    let parent = scenario_dir(&[("lost.yaml", LOST_AGENT)]);
    let scenario =
        std::fs::read_to_string(root().join("examples/banking/tests/unknown-request.yaml")).expect("scenario");
    for folder in ["scenarios", "tests"] {
        std::fs::create_dir_all(parent.join(folder)).expect("a folder");
        std::fs::write(parent.join(folder).join("unknown.yaml"), &scenario).expect("the scenario is written");
    }
    // A folder of another name is not taken for part of its parent's agents.
    let out = switchboard_test(&[parent.join("scenarios").to_str().expect("utf-8"), "--check"]);
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    // A `tests` folder (or a file in one) is: its agents are read and an invalid one refused.
    for path in [parent.join("tests"), parent.join("tests/unknown.yaml")] {
        let out = switchboard_test(&[path.to_str().expect("utf-8"), "--check"]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success() && stderr.contains("PersonaNotFound"), "{}: {stderr}", path.display());
    }
    let _ = std::fs::remove_dir_all(&parent);
}
