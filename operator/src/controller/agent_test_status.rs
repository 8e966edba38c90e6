//! Pure status computation of an AgentTest: whether its Agents' pods have rolled out what
//! their specs say (a run tests what serves, never a rollout half way), what a finished Job
//! says (its conditions and the summary in its pod's termination message, which comes from
//! outside the operator and is parsed strictly), and the status with its `Accepted` and
//! `Passed` conditions (each keeps its `lastTransitionTime` until its status flips).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use switchboard_crds::agent_test::{AgentTestStatus, CONDITION_PASSED, TestResult};
use switchboard_crds::agent_test_summary::TestSummary;
use switchboard_crds::common::{CONDITION_ACCEPTED, find_condition};
use switchboard_crds::{Agent, AgentStatus};

use super::status::{Verdict, condition};
use crate::build::CONFIG_HASH_ANNOTATION;

/// What `agent`'s pods run, once they have rolled out its accepted spec: their config
/// hash; else why the run waits.
pub fn rolled_out(agent: &Agent, deployment: Option<&Deployment>) -> Result<String, String> {
    let name = agent.metadata.name.as_deref().unwrap_or_default();
    let status: Option<&AgentStatus> = agent.status.as_ref();
    let accepted = status.and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED));
    let current = status.and_then(|s| s.observed_generation) == agent.metadata.generation;
    match accepted {
        Some(c) if c.status == "True" && current => {}
        Some(c) if c.status == "False" => return Err(format!("Agent {name} is not accepted: {}", c.message)),
        _ => return Err(format!("Agent {name}: the operator has not accepted its current spec yet")),
    }
    let Some(d) = deployment else { return Err(format!("Agent {name} has no Deployment yet")) };
    let hash = d
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
        .ok_or_else(|| format!("Agent {name}'s Deployment has no {CONFIG_HASH_ANNOTATION} annotation"))?;
    let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let s = d.status.clone().unwrap_or_default();
    let (updated, available, all) =
        (s.updated_replicas.unwrap_or(0), s.available_replicas.unwrap_or(0), s.replicas.unwrap_or(0));
    if wanted == 0 {
        return Err(format!("Agent {name} is scaled to zero pods: nothing would answer"));
    }
    if s.observed_generation < d.metadata.generation || updated < wanted || all > updated || available < updated {
        return Err(format!(
            "Agent {name}'s pods are rolling out: {updated}/{wanted} updated, {available} available, {all} in all"
        ));
    }
    Ok(hash.clone())
}

/// How a finished run went.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Passed, Failed or Error.
    pub result: TestResult,
    /// Scenarios passed, when the summary says.
    pub passed: Option<u32>,
    /// Scenarios failed, when the summary says.
    pub failed: Option<u32>,
    /// When the Job finished.
    pub finished: Option<Time>,
    /// The first divergence, or why the run could not judge the scenarios.
    pub message: Option<String>,
}

/// What a Job says once it has finished (`None` while it runs); `termination` is its test
/// container's termination message, when it has one.
pub fn outcome(job: &Job, termination: Option<&str>) -> Option<Outcome> {
    let status = job.status.as_ref()?;
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let ended = |t: &str| conditions.iter().find(|c| c.type_ == t && c.status == "True");
    let (complete, failed) = (ended("Complete"), ended("Failed"));
    let end = complete.or(failed)?;
    let finished = status.completion_time.clone().or_else(|| end.last_transition_time.clone());
    let why_failed = failed.map(|c| {
        format!("the Job failed ({}): {}", c.reason.as_deref().unwrap_or("?"), c.message.as_deref().unwrap_or(""))
    });
    let error = |message: String| Outcome {
        result: TestResult::Error,
        passed: None,
        failed: None,
        finished: finished.clone(),
        message: Some(message),
    };
    let summary = match termination.filter(|t| !t.trim().is_empty()).map(TestSummary::parse) {
        None => {
            let why = why_failed.unwrap_or_else(|| "the Job completed".to_owned());
            return Some(error(format!("{why}, without a summary in its termination message")));
        }
        Some(Err(e)) => {
            let why = why_failed.map(|w| format!("{w}; ")).unwrap_or_default();
            return Some(error(format!("{why}its termination message is no test summary: {e}")));
        }
        Some(Ok(summary)) => summary,
    };
    let result = match (&summary.error, summary.ok(), failed.is_some()) {
        (Some(_), _, _) => TestResult::Error,
        (None, true, false) => TestResult::Passed,
        (None, true, true) => {
            let why = why_failed.unwrap_or_default();
            return Some(error(format!("{why}, although its summary says every scenario passed")));
        }
        (None, false, _) => TestResult::Failed,
    };
    Some(Outcome {
        result,
        passed: Some(summary.passed),
        failed: Some(summary.failed),
        finished,
        message: summary.error.or(summary.first_divergence),
    })
}

/// Where the AgentTest's run stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Run {
    /// No run: the spec is not accepted.
    None,
    /// Waiting for the Agents' pods, and why.
    Waiting(String),
    /// The Job `job` runs.
    Running {
        /// The Job.
        job: String,
        /// The hash it tests.
        hash: String,
    },
    /// The Job `job` finished.
    Finished {
        /// The Job.
        job: String,
        /// The hash it tested.
        hash: String,
        /// How it went.
        outcome: Outcome,
    },
}

/// The status of an AgentTest: `accepted`, and where its run stands. The counts, last run
/// and divergence are the last finished run's until another finishes.
pub fn test_status(
    generation: Option<i64>,
    previous: Option<&AgentTestStatus>,
    accepted: &Verdict,
    run: &Run,
    now: Timestamp,
) -> AgentTestStatus {
    let prev = previous.cloned().unwrap_or_default();
    let (result, status, reason, message) = match run {
        Run::None => (None, "Unknown", "NotAccepted", "the spec is not accepted (see Accepted)".to_owned()),
        Run::Waiting(why) => (Some(TestResult::Waiting), "Unknown", "Waiting", why.clone()),
        Run::Running { job, .. } => {
            (Some(TestResult::Running), "Unknown", "Running", format!("Job {job} runs the scenarios"))
        }
        Run::Finished { outcome, .. } => {
            let status = if outcome.result == TestResult::Passed { "True" } else { "False" };
            let message = match (outcome.result, outcome.passed) {
                (TestResult::Passed, Some(n)) => format!("{n} of {n} scenario(s) passed"),
                _ => outcome.message.clone().unwrap_or_default(),
            };
            (Some(outcome.result), status, outcome.result.as_str(), message)
        }
    };
    let since = find_condition(&prev.conditions, CONDITION_PASSED)
        .filter(|c| c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    let passed = Condition {
        type_: CONDITION_PASSED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    };
    let mut out = AgentTestStatus {
        observed_generation: generation,
        conditions: vec![condition(CONDITION_ACCEPTED, accepted, generation, &prev.conditions, now), passed],
        result,
        ..prev
    };
    match run {
        Run::None | Run::Waiting(_) => {}
        Run::Running { job, hash } => {
            out.job = Some(job.clone());
            out.tested_hash = Some(hash.clone());
        }
        Run::Finished { job, hash, outcome } => {
            out.job = Some(job.clone());
            out.tested_hash = Some(hash.clone());
            out.passed = outcome.passed;
            out.failed = outcome.failed;
            out.last_run = outcome.finished.clone();
            out.first_divergence = outcome.message.clone();
        }
    }
    out
}

#[cfg(test)]
#[path = "agent_test_status_tests.rs"]
mod tests;
