//! Pure status computation: the `Accepted` and `Ready` conditions, the Agent status, and
//! whether a write is needed at all (an unchanged status is never written, and a condition
//! keeps its `lastTransitionTime` until its status flips).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use switchboard_crds::common::{CONDITION_ACCEPTED, CONDITION_READY, find_condition};
use switchboard_crds::{AgentStatus, Problem, ResourceStatus};

use crate::lean::LeanDeployment;

/// The `Accepted` reason of a valid spec.
pub const REASON_VALID: &str = "Valid";
/// The `Ready` reason when at least one pod is available.
pub const REASON_AVAILABLE: &str = "ReplicasAvailable";
/// The `Ready` reason when no pod is available.
pub const REASON_UNAVAILABLE: &str = "NoReplicasAvailable";
/// The `Ready` reason when the Agent has no Deployment (never accepted).
pub const REASON_NO_DEPLOYMENT: &str = "NoDeployment";

/// One condition's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// True or False.
    pub ok: bool,
    /// The reason (PascalCase).
    pub reason: String,
    /// What a person should know or do.
    pub message: String,
}

/// `Accepted` from the validator's problems: the first problem's reason and every problem.
pub fn accepted(problems: &[Problem]) -> Verdict {
    match problems.first() {
        None => Verdict {
            ok: true,
            reason: REASON_VALID.into(),
            message: "the spec is valid and every reference resolved".into(),
        },
        Some(first) => Verdict {
            ok: false,
            reason: first.reason.as_str().into(),
            message: problems
                .iter()
                .map(|p| format!("{}: {} (at {})", p.reason, p.message, p.field))
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}

/// The replica counts of an Agent's Deployment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replicas {
    /// Available pods.
    pub available: i32,
    /// Wanted pods.
    pub wanted: i32,
}

/// The replica counts of `d`.
pub fn replicas(d: &LeanDeployment) -> Replicas {
    Replicas {
        available: d.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0),
        wanted: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
    }
}

/// `Ready` from the Deployment's available replicas (`None`: the Agent has no Deployment).
pub fn ready(deployment: Option<Replicas>) -> Verdict {
    let Some(Replicas { available, wanted }) = deployment else {
        return Verdict {
            ok: false,
            reason: REASON_NO_DEPLOYMENT.into(),
            message: "the agent has no runtime pods because its spec was never accepted".into(),
        };
    };
    let message = format!("{available}/{wanted} replicas available");
    if available > 0 {
        Verdict { ok: true, reason: REASON_AVAILABLE.into(), message }
    } else {
        Verdict { ok: false, reason: REASON_UNAVAILABLE.into(), message }
    }
}

/// The condition `type_` for `verdict`, keeping the previous transition time when the
/// status did not flip.
pub fn condition(
    type_: &str,
    verdict: &Verdict,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    let status = if verdict.ok { "True" } else { "False" };
    let last_transition_time = find_condition(previous, type_)
        .filter(|c| c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: verdict.reason.clone(),
        message: verdict.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// The status of an Agent.
pub fn agent_status(
    generation: Option<i64>,
    previous: Option<&AgentStatus>,
    accepted: &Verdict,
    deployment: Option<Replicas>,
    endpoint: Option<String>,
    now: Timestamp,
) -> AgentStatus {
    let prev = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    AgentStatus {
        observed_generation: generation,
        conditions: vec![
            condition(CONDITION_ACCEPTED, accepted, generation, prev, now),
            condition(CONDITION_READY, &ready(deployment), generation, prev, now),
        ],
        endpoint,
        ready_replicas: deployment.map(|r| r.available),
        replicas: deployment.map(|r| r.wanted),
    }
}

/// The status of a Persona or Workflow.
pub fn resource_status(
    generation: Option<i64>,
    previous: Option<&ResourceStatus>,
    accepted: &Verdict,
    now: Timestamp,
) -> ResourceStatus {
    let prev = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    ResourceStatus {
        observed_generation: generation,
        conditions: vec![condition(CONDITION_ACCEPTED, accepted, generation, prev, now)],
    }
}

#[cfg(test)]
mod tests {
    use switchboard_crds::Reason;

    use super::*;

    #[test]
    fn accepted_lists_every_problem_with_the_first_reason() {
        let v = accepted(&[
            Problem::new(Reason::PersonaNotFound, "spec.personaRef", "persona \"x\" does not exist in namespace \"y\""),
            Problem::new(Reason::UnknownTool, "spec.workflow", "tool t"),
        ]);
        assert!(!v.ok);
        assert_eq!(v.reason, "PersonaNotFound");
        assert!(
            v.message.starts_with("PersonaNotFound: persona \"x\" does not exist in namespace \"y\""),
            "{}",
            v.message
        );
        assert!(v.message.contains("UnknownTool: tool t"), "{}", v.message);
        assert!(accepted(&[]).ok);
    }

    #[test]
    fn transition_time_survives_until_the_status_flips() {
        let t0 = Timestamp::from_second(1_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let t1 = Timestamp::from_second(2_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let yes = Verdict { ok: true, reason: "A".into(), message: "m".into() };
        let first = condition("Ready", &yes, Some(1), &[], t0);
        let again = condition("Ready", &yes, Some(2), std::slice::from_ref(&first), t1);
        assert_eq!(again.last_transition_time, Time(t0));
        let no = Verdict { ok: false, ..yes };
        let flipped = condition("Ready", &no, Some(2), &[again], t1);
        assert_eq!((flipped.status.as_str(), flipped.last_transition_time), ("False", Time(t1)));
    }

    #[test]
    fn ready_counts_available_replicas() {
        let mut d: LeanDeployment = serde_json::from_value(serde_json::json!({
            "spec": {"replicas": 3, "selector": {}, "template": {}},
            "status": {"availableReplicas": 2}
        }))
        .unwrap_or_default();
        let v = ready(Some(replicas(&d)));
        assert!(v.ok);
        assert_eq!(v.message, "2/3 replicas available");
        d.status = None;
        assert_eq!(
            ready(Some(replicas(&d))),
            Verdict { ok: false, reason: REASON_UNAVAILABLE.into(), message: "0/3 replicas available".into() }
        );
        assert_eq!(ready(None).reason, REASON_NO_DEPLOYMENT);
    }
}
