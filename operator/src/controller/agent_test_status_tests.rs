//! The pure status of an AgentTest: rollout gate, Job outcome, conditions.

use super::*;

fn agent(accepted: &str, observed: i64) -> Agent {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "triage", "generation": 2},
        "spec": {"mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}},
        "status": {"observedGeneration": observed, "conditions": [{
            "type": "Accepted", "status": accepted, "reason": "Valid", "message": "the spec is valid",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .expect("agent")
}

fn deployment(generation: i64, observed: i64, updated: i32, available: i32, all: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "triage", "generation": generation},
        "spec": {"replicas": 2, "selector": {}, "template": {"metadata": {"annotations": {CONFIG_HASH_ANNOTATION: "abc"}}}},
        "status": {"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available, "replicas": all}
    }))
    .expect("deployment")
}

#[test]
fn a_run_waits_for_an_accepted_agent_whose_pods_rolled_out() {
    assert_eq!(rolled_out(&agent("True", 2), Some(&deployment(3, 3, 2, 2, 2))), Ok("abc".to_owned()));
    let waits = |a: Agent, d: Option<Deployment>, expected: &str| {
        let why = rolled_out(&a, d.as_ref()).expect_err(expected);
        assert!(why.contains(expected), "{why}");
    };
    waits(agent("True", 1), Some(deployment(3, 3, 2, 2, 2)), "has not accepted its current spec");
    waits(agent("False", 2), Some(deployment(3, 3, 2, 2, 2)), "is not accepted: the spec is valid");
    waits(agent("True", 2), None, "has no Deployment");
    waits(agent("True", 2), Some(deployment(4, 3, 2, 2, 2)), "rolling out");
    waits(agent("True", 2), Some(deployment(3, 3, 1, 1, 3)), "1/2 updated, 1 available, 3 in all");
    waits(agent("True", 2), Some(deployment(3, 3, 2, 1, 2)), "2/2 updated, 1 available");
}

fn job(condition: Option<(&str, &str)>) -> Job {
    let conditions: Vec<_> = condition
        .iter()
        .map(|(t, reason)| {
            serde_json::json!({"type": t, "status": "True", "reason": reason, "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:05Z"})
        })
        .collect();
    serde_json::from_value(serde_json::json!({"metadata": {"name": "t-1"}, "status": {"conditions": conditions}}))
        .expect("job")
}

#[test]
fn a_finished_job_is_read_from_its_conditions_and_summary() {
    assert_eq!(outcome(&job(None), None), None, "still running");
    let ok = outcome(&job(Some(("Complete", ""))), Some(r#"{"passed":2,"failed":0,"total":2}"#)).expect("ended");
    assert_eq!((ok.result, ok.passed, ok.failed), (TestResult::Passed, Some(2), Some(0)));
    assert!(ok.finished.is_some());
    let failed = outcome(
        &job(Some(("Failed", "BackoffLimitExceeded"))),
        Some(
            r#"{"passed":1,"failed":1,"total":2,"firstDivergence":"Balance, step 1: expected agent idv, got triage"}"#,
        ),
    )
    .expect("ended");
    assert_eq!(failed.result, TestResult::Failed);
    assert_eq!(failed.message.as_deref(), Some("Balance, step 1: expected agent idv, got triage"));
    let refused = outcome(
        &job(Some(("Failed", "BackoffLimitExceeded"))),
        Some(r#"{"passed":0,"failed":0,"total":0,"error":"x.yaml:3: unknown field"}"#),
    )
    .expect("ended");
    assert_eq!((refused.result, refused.message.as_deref()), (TestResult::Error, Some("x.yaml:3: unknown field")));
    let deadline = outcome(&job(Some(("Failed", "DeadlineExceeded"))), None).expect("ended");
    assert_eq!(deadline.result, TestResult::Error);
    assert!(
        deadline.message.as_deref().is_some_and(|m| m.contains("DeadlineExceeded") && m.contains("without a summary"))
    );
    let garbage = outcome(&job(Some(("Failed", "BackoffLimitExceeded"))), Some("exec format error")).expect("ended");
    assert!(garbage.message.as_deref().is_some_and(|m| m.contains("no test summary")), "{garbage:?}");
    let liar = outcome(&job(Some(("Failed", "BackoffLimitExceeded"))), Some(r#"{"passed":1,"failed":0,"total":1}"#))
        .expect("ended");
    assert_eq!(liar.result, TestResult::Error, "a failed Job never passes");
}

#[test]
fn the_status_keeps_the_last_finished_run_while_the_next_runs() {
    let ok = Verdict { ok: true, reason: "Valid".into(), message: "valid".into() };
    let now = Timestamp::now();
    let finished = Run::Finished {
        job: "t-1".into(),
        hash: "h1".into(),
        outcome: Outcome {
            result: TestResult::Failed,
            passed: Some(1),
            failed: Some(1),
            finished: Some(Time(now)),
            message: Some("Balance, step 1: expected agent idv".into()),
        },
    };
    let first = test_status(Some(1), None, &ok, &finished, now);
    assert_eq!((first.result, first.passed, first.failed), (Some(TestResult::Failed), Some(1), Some(1)));
    let passed = find_condition(&first.conditions, CONDITION_PASSED).expect("Passed");
    assert_eq!((passed.status.as_str(), passed.reason.as_str()), ("False", "Failed"));
    assert_eq!(passed.message, "Balance, step 1: expected agent idv");
    let running = test_status(Some(1), Some(&first), &ok, &Run::Running { job: "t-2".into(), hash: "h2".into() }, now);
    assert_eq!((running.result, running.passed, running.failed), (Some(TestResult::Running), Some(1), Some(1)));
    assert_eq!((running.job.as_deref(), running.tested_hash.as_deref()), (Some("t-2"), Some("h2")));
    assert_eq!(running.first_divergence, first.first_divergence);
    let c = find_condition(&running.conditions, CONDITION_PASSED).expect("Passed");
    assert_eq!(c.status, "Unknown");
}
