//! Rollouts held until an Agent's tests pass (`AgentTest.spec.gateRollout`).
//!
//! The Agent reconcile asks [`gate`] before it applies the live children. The rollout is
//! held when the Agent's live Deployment runs another pod config hash than the one it
//! wants, and some AgentTest in its namespace with `gateRollout: true` lists the Agent
//! without listing that wanted hash in `status.passedConfigs`. Held, the live ConfigMap and
//! Deployment stay as they are (live sessions keep the last promoted spec), the wanted spec
//! runs on one candidate pod ([`crate::build::candidate`]) that only test sessions reach,
//! and the Agent's `RolloutHeld` condition says which AgentTest it waits for and how that
//! test's last run went. Once every gating AgentTest has passed the candidate's hash, the
//! live children are applied (the promotion) and the candidate is scaled to zero.
//!
//! All of it is read back from the API server on each reconcile, so an operator restart
//! picks up where it was: a held Agent is held again, a passed one promoted. A second
//! edit while a test runs replaces the candidate (a new hash: a new run, the old one
//! removed by the AgentTest). An AgentTest deleted, or its `gateRollout` cleared, releases
//! the rollout at the Agent's next reconcile (its resync at the latest). An Agent's first
//! rollout (no live Deployment yet) is never held: no live session can be hurt.
//!
//! [`decide`] is the pure rule; [`gate`] fetches what it needs — only when the live
//! Deployment may differ from what is wanted (the operator did not write this very object
//! last) or the Agent was held, so a steady Agent costs no extra request.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use switchboard_crds::common::{CONDITION_ROLLOUT_HELD, find_condition};
use switchboard_crds::{Agent, AgentStatus, AgentTest};

use super::apply::unchanged;
use super::status::{Replicas, Verdict, condition};
use super::{Context, Error, policy};
use crate::build::{CONFIG_HASH_ANNOTATION, Desired};

/// `RolloutHeld` reason while held.
pub const REASON_HELD: &str = "TestsPending";
/// `RolloutHeld` reason once every gating AgentTest passed the candidate.
pub const REASON_PROMOTED: &str = "Promoted";
/// `RolloutHeld` reason once nothing holds the rollout any more (the change was undone,
/// or no AgentTest gates the Agent now).
pub const REASON_RELEASED: &str = "Released";

/// What one gating AgentTest says of an Agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateTest {
    /// The AgentTest.
    pub name: String,
    /// The config hash of the Agent its last passing run tested.
    pub passed: Option<String>,
    /// How its current or last run went (`Waiting`, `Running`, `Failed`, ...).
    pub result: Option<String>,
    /// The first divergence of its last finished run.
    pub divergence: Option<String>,
}

/// The rule's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Apply the live children. `promoted`: every gating AgentTest passed the wanted spec,
    /// which the live pods did not run yet.
    Open {
        /// Whether this is a promotion.
        promoted: bool,
    },
    /// Keep the live children; run the wanted spec on the candidate. Why, for a person.
    Held(String),
}

/// The pod config hash a Deployment's template carries.
pub fn template_hash(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(CONFIG_HASH_ANNOTATION)
        .map(String::as_str)
}

/// The rule: `live` is the live Deployment's hash (`None`: no live Deployment yet),
/// `wanted` the hash the Agent's spec asks for, `gates` the AgentTests gating it.
pub fn decide(live: Option<&str>, wanted: &str, gates: &[GateTest]) -> Decision {
    let Some(live) = live else { return Decision::Open { promoted: false } };
    if gates.is_empty() {
        return Decision::Open { promoted: false };
    }
    if live == wanted {
        // Already live: promoted if every gate passed it (a reconcile that started from a
        // cache older than its own promotion says so again, never `Released`).
        let passed = gates.iter().all(|g| g.passed.as_deref() == Some(wanted));
        return Decision::Open { promoted: passed };
    }
    let pending: Vec<String> = gates
        .iter()
        .filter(|g| g.passed.as_deref() != Some(wanted))
        .map(|g| {
            let last = match (g.result.as_deref(), g.divergence.as_deref()) {
                (Some(r @ ("Failed" | "Error")), Some(d)) => format!("{r}: {d}"),
                (Some(r), _) => r.to_owned(),
                (None, _) => "no run yet".to_owned(),
            };
            format!("AgentTest {} (its last run: {last})", g.name)
        })
        .collect();
    if pending.is_empty() {
        return Decision::Open { promoted: true };
    }
    Decision::Held(format!(
        "config {} runs on the candidate pod for test sessions only; the live pods keep config {} until {} \
         passes on it",
        short(wanted),
        short(live),
        pending.join(" and ")
    ))
}

fn short(hash: &str) -> &str {
    hash.get(..10).unwrap_or(hash)
}

/// Whether the Agent's status says its rollout is held.
pub fn is_held(status: Option<&AgentStatus>) -> bool {
    status.and_then(|s| find_condition(&s.conditions, CONDITION_ROLLOUT_HELD)).is_some_and(|c| c.status == "True")
}

/// The `RolloutHeld` condition after `decision` (`None`: the Agent was never held, and is
/// not now).
pub fn held_condition(
    decision: &Decision,
    previous: Option<&AgentStatus>,
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let prev = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let verdict = match decision {
        Decision::Held(message) => Verdict { ok: true, reason: REASON_HELD.into(), message: message.clone() },
        Decision::Open { .. } if find_condition(prev, CONDITION_ROLLOUT_HELD).is_none() => return None,
        Decision::Open { promoted: true } => Verdict {
            ok: false,
            reason: REASON_PROMOTED.into(),
            message: "every gating AgentTest passed the spec the live pods now run".into(),
        },
        Decision::Open { promoted: false } => match find_condition(prev, CONDITION_ROLLOUT_HELD) {
            Some(c) if c.status == "False" => {
                Verdict { ok: false, reason: c.reason.clone(), message: c.message.clone() }
            }
            _ => Verdict {
                ok: false,
                reason: REASON_RELEASED.into(),
                message: "nothing holds the rollout: the live pods run what the spec asks for, or no AgentTest \
                          gates this Agent now"
                    .into(),
            },
        },
    };
    Some(condition(CONDITION_ROLLOUT_HELD, &verdict, generation, prev, now))
}

/// What [`gate`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gated {
    /// The decision.
    pub decision: Decision,
    /// The live Deployment's replica counts, when it was read.
    pub live: Option<Replicas>,
}

/// Decides whether `agent`'s `desired` children may go live now (see the module docs).
pub async fn gate(ctx: &Context, agent: &Agent, desired: &Desired) -> Result<Gated, Error> {
    let open = Gated { decision: Decision::Open { promoted: false }, live: None };
    if unchanged(ctx, &desired.deployment) && !is_held(agent.status.as_ref()) {
        return Ok(open);
    }
    let Some(wanted) = template_hash(&desired.deployment) else { return Ok(open) };
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let live = deployments
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading Deployment {namespace}/{name}"), e))?
        .filter(|d| policy::may_write(Some(&d.metadata), agent.metadata.uid.as_deref()));
    let live_hash = live.as_ref().and_then(template_hash);
    if live_hash.is_none_or(|h| h == wanted) && !is_held(agent.status.as_ref()) {
        return Ok(open);
    }
    let gates = gates_of(ctx, &namespace, &name).await?;
    let replicas = live.as_ref().map(|d| Replicas {
        available: d.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0),
        wanted: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
    });
    Ok(Gated { decision: decide(live_hash, wanted, &gates), live: replicas })
}

/// The AgentTests in `namespace` that gate Agent `agent`'s rollouts (none when the
/// AgentTest CRD is not installed).
async fn gates_of(ctx: &Context, namespace: &str, agent: &str) -> Result<Vec<GateTest>, Error> {
    let api: Api<AgentTest> = Api::namespaced(ctx.client.clone(), namespace);
    let tests = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(Error::kube(format!("listing the AgentTests of namespace {namespace}"), e)),
    };
    Ok(tests
        .into_iter()
        .filter(|t| t.spec.gate_rollout && t.metadata.deletion_timestamp.is_none())
        .filter(|t| t.spec.agents.iter().any(|a| a.name == agent))
        .map(|t| {
            let status = t.status.clone().unwrap_or_default();
            GateTest {
                name: t.name_any(),
                passed: status.passed_configs.get(agent).cloned(),
                result: status.result.map(|r| r.as_str().to_owned()),
                divergence: status.first_divergence,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, passed: Option<&str>, result: Option<&str>, divergence: Option<&str>) -> GateTest {
        GateTest {
            name: name.into(),
            passed: passed.map(Into::into),
            result: result.map(Into::into),
            divergence: divergence.map(Into::into),
        }
    }

    #[test]
    fn a_change_is_held_until_every_gating_test_passed_it() {
        let (old, new) = ("a".repeat(64), "b".repeat(64));
        assert_eq!(decide(None, &new, &[gate("t", None, None, None)]), Decision::Open { promoted: false });
        assert_eq!(decide(Some(&new), &new, &[gate("t", None, None, None)]), Decision::Open { promoted: false });
        let passed_new = gate("t", Some(&new), Some("Passed"), None);
        assert_eq!(decide(Some(&new), &new, &[passed_new]), Decision::Open { promoted: true }, "already promoted");
        assert_eq!(decide(Some(&old), &new, &[]), Decision::Open { promoted: false });
        let failed = gate("smoke", Some(&old), Some("Failed"), Some("Greets, step 1: agent: expected bank, got x"));
        let Decision::Held(why) = decide(Some(&old), &new, &[failed, gate("more", Some(&new), Some("Passed"), None)])
        else {
            panic!("held")
        };
        assert!(why.starts_with("config bbbbbbbbbb runs on the candidate pod"), "{why}");
        assert!(why.contains("live pods keep config aaaaaaaaaa"), "{why}");
        assert!(why.contains("AgentTest smoke (its last run: Failed: Greets, step 1: agent: expected bank"), "{why}");
        assert!(!why.contains("more"), "a test that passed the candidate is not waited for: {why}");
        let running = gate("smoke", None, Some("Running"), None);
        assert!(
            matches!(decide(Some(&old), &new, &[running]), Decision::Held(w) if w.contains("(its last run: Running)"))
        );
        let passed = [gate("smoke", Some(&new), Some("Passed"), None), gate("more", Some(&new), Some("Passed"), None)];
        assert_eq!(decide(Some(&old), &new, &passed), Decision::Open { promoted: true });
    }

    #[test]
    fn the_condition_appears_when_held_and_stays_to_say_how_it_ended() {
        let now = Timestamp::UNIX_EPOCH;
        let open = Decision::Open { promoted: false };
        assert_eq!(held_condition(&open, None, Some(1), now), None, "never held: no condition");
        let held = held_condition(&Decision::Held("why".into()), None, Some(2), now).expect("held");
        assert_eq!((held.status.as_str(), held.reason.as_str(), held.message.as_str()), ("True", REASON_HELD, "why"));
        let status = AgentStatus { conditions: vec![held], ..Default::default() };
        assert!(is_held(Some(&status)));
        let promoted = held_condition(&Decision::Open { promoted: true }, Some(&status), Some(2), now).expect("c");
        assert_eq!((promoted.status.as_str(), promoted.reason.as_str()), ("False", REASON_PROMOTED));
        let after = AgentStatus { conditions: vec![promoted], ..Default::default() };
        assert!(!is_held(Some(&after)));
        let kept = held_condition(&open, Some(&after), Some(3), now).expect("kept");
        assert_eq!(kept.reason, REASON_PROMOTED, "the last outcome stays");
        let released = held_condition(&open, Some(&status), Some(3), now).expect("released");
        assert_eq!((released.status.as_str(), released.reason.as_str()), ("False", REASON_RELEASED));
    }
}
