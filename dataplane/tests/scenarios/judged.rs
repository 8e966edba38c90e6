//! Judged expectations (`expect.judge.rubric`): the real binary asks a judge model through
//! the real Bedrock client — here the simulator, scripted as a judge that passes a turn in
//! which the balance was given and fails any other — and marks what it judged; without
//! `--judge-model` they are not checked, and the report says so.

use switchboard_sim::{Script, SimConfig, Simulator};

use crate::{scenario_dir, switchboard_test, switchboard_test_with, text};

/// The judge: PASS when the latest turn holds the balance, FAIL otherwise (its system
/// prompt tells it from the agents' model calls, which the banking script answers).
const JUDGE: &str = r"
rules:
  - name: balance-given
    when:
      system: strict judge
      userText: '(?s)The latest turn:.*1234\.56.*Rubric:'
    reply: { text: 'PASS The agent gave the balance.' }
    timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
  - name: no-balance
    when: { system: strict judge }
    reply: { text: 'FAIL No balance was given in this turn.' }
    timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
";

const GIVEN: &str = "\
name: The balance, judged
steps:
  - say: I'd like to check my balance
    expect: { agent: idv }
  - say: My name is Ada Lovelace, account 12345678, sort code 12-34-56
  - say: My balance please
    expect:
      agent: banking
      judge: { rubric: The agent tells the caller the balance of their account. }
";

const NOT_YET: &str = "\
name: A balance judged too early
steps:
  - say: I'd like to check my balance
    expect:
      agent: idv
      judge: { rubric: The agent tells the caller the balance of their account. }
";

#[test]
fn a_judge_model_checks_rubrics_and_its_verdicts_are_marked_as_judged() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let script = Script::parse(JUDGE).expect("the judge's script");
    let judge = runtime.block_on(Simulator::start(SimConfig::new(script))).expect("the judge model");
    let dir = scenario_dir(&[("a-given.yaml", GIVEN), ("b-not-yet.yaml", NOT_YET)]);
    let ca = judge.ca_cert_path().expect("the simulator's CA").to_str().expect("utf-8").to_owned();
    let with_judge = [
        dir.to_str().expect("utf-8"),
        "--agents",
        "examples/banking",
        "--judge-model",
        "amazon.nova-pro-v1:0",
        "--judge-endpoint-url",
        judge.endpoint_url(),
        "--judge-ca-file",
        &ca,
    ];
    // The judge's Bedrock client signs its requests (the simulator does not check them)
    // with credentials from a folder of files, as an AgentTest's Job mounts its Secret:
    // without them it could not sign, and no verdict would come.
    let keys = scenario_dir(&[("AWS_ACCESS_KEY_ID", "AKIDTEST"), ("AWS_SECRET_ACCESS_KEY", "not-a-secret")]);
    let out = switchboard_test_with(&with_judge, &[("SWITCHBOARD_CREDENTIALS_DIR", keys.to_str().expect("utf-8"))]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "the early one fails:\n{stdout}\n{stderr}");
    for phrase in [
        "Judged expectations are checked by amazon.nova-pro-v1:0 (a model's verdict, not a match)",
        "— The balance, judged (3 steps, 1 judged by a model,",
        "FAIL ",
        "  judge (first divergence)\n    expected: (judged by amazon.nova-pro-v1:0) The agent tells the caller the \
         balance of their account.\n    got:      the judge says FAIL: No balance was given in this turn.",
        "FAILED: 2 scenario(s), 1 passed, 1 failed",
    ] {
        assert!(stdout.contains(phrase), "the report says {phrase:?}:\n{stdout}");
    }
    let place = format!("{}:6: A balance judged too early", dir.join("b-not-yet.yaml").display());
    assert!(stdout.contains(&place), "the judge expectation's line: {stdout}");
    // The judge read the conversation: one verdict per judged step.
    assert_eq!(judge.stats().model_calls, 2, "{stdout}");

    // Without a judge model: not checked, and said so.
    let out = switchboard_test(&[dir.join("a-given.yaml").to_str().expect("utf-8"), "--agents", "examples/banking"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("(3 steps, 1 judged expectation(s) not checked (no --judge-model),"), "{stdout}");
    assert!(stdout.contains("1 judged expectation(s) were not checked: give --judge-model"), "{stdout}");

    // An empty rubric is refused before anything runs.
    let empty =
        scenario_dir(&[("empty.yaml", "name: x\nsteps:\n  - say: Hi\n    expect: { judge: { rubric: ' ' } }\n")]);
    let out = switchboard_test(&[empty.to_str().expect("utf-8"), "--agents", "examples/banking", "--check"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success() && stderr.contains("judge.rubric"), "{stderr}");
    for dir in [dir, empty, keys] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
