//! Phone numbers are one Agent's each among the Agents this operator watches: a call to a
//! number must reach one Agent, whatever namespace claims it. The first claim wins: of the
//! Agents that list a number, the one created first (then by `namespace/name`) keeps it,
//! and every later one is not accepted (`NumberTaken`) until the earlier claim goes. The
//! order does not depend on which Agent is accepted, so two claims never take turns. A
//! change to any Agent's numbers re-queues the Agents it may free or block (see
//! [`claimants`]).
//!
//! **Where a number must be unique: one routing table.** The SIP edge finds the Agent of
//! a dialled number in its gateway's routing table, which this operator publishes for the
//! namespaces it watches; a number is looked up there and nowhere else. So uniqueness is
//! checked over what this operator sees, no wider and no narrower:
//!
//! - a cluster-wide operator (the default; the chart without `operator.watchNamespace`)
//!   sees every namespace: a number is one Agent's in the whole cluster, and two teams'
//!   namespaces cannot both claim it (the later is told which Agent has it);
//! - a namespaced operator (`--namespace`, the chart's `operator.watchNamespace`) sees one
//!   namespace and publishes its own routing table, for its own gateway and SIP edge:
//!   another install in another namespace may claim the same number, and which of the two
//!   answers is decided by where the carrier's trunk sends the call, as for any two PBXs.
//!
//! What a platform team should expect follows: applying the same folder of Agents (the
//! Example Bank, with its number) into two namespaces under one cluster-wide operator is
//! two claims on one number, and the copy created later waits with `NumberTaken` until it
//! is given a number of its own. The project's tests that load the example more than once
//! into one operator's view give their copy its own number and say why
//! (`tests/tests/chart_install.rs`, `tests/cluster/e2e-smoke.sh`); the ones that run their
//! own namespaced operator over the example keep its number and do not run beside the
//! chart's cluster-wide one (`switchboard_tests::helm::cluster_wide_operator_turn`).

use std::sync::Arc;

use kube::ResourceExt;
use switchboard_crds::Agent;

use super::status::Verdict;

/// `Accepted` reason: another Agent claimed one of this Agent's numbers first.
pub const REASON_NUMBER_TAKEN: &str = "NumberTaken";

/// Whether `agent` is the later claim on any of its numbers, among `all` (every Agent the
/// operator sees; `agent` itself among them or not).
pub fn taken(agent: &Agent, all: &[Arc<Agent>]) -> Option<Verdict> {
    let numbers = &agent.spec.telephony.numbers;
    if numbers.is_empty() {
        return None;
    }
    let me = order_key(agent);
    let mut clashes: Vec<String> = Vec::new();
    for number in numbers {
        let first = all
            .iter()
            .filter(|other| other.spec.telephony.numbers.contains(number))
            .map(|other| order_key(other))
            .filter(|key| key.1 != me.1)
            .filter(|key| key < &me)
            .min();
        if let Some((_, owner)) = first {
            clashes.push(format!("{number} is claimed by Agent {owner}, created earlier"));
        }
    }
    if clashes.is_empty() {
        return None;
    }
    Some(Verdict {
        ok: false,
        reason: REASON_NUMBER_TAKEN.into(),
        message: format!(
            "{}: a call to a number reaches one Agent; remove the number from spec.telephony.numbers here or from \
             the other Agent",
            clashes.join("; ")
        ),
    })
}

/// The Agents whose verdict a change to `changed` (new, edited or deleted) may alter: those
/// sharing a number with it, and those refused for a number (the change may free it).
pub fn claimants(changed: &Agent, all: &[Arc<Agent>]) -> Vec<Arc<Agent>> {
    let key = order_key(changed).1;
    all.iter()
        .filter(|other| order_key(other).1 != key)
        .filter(|other| {
            let shares = other.spec.telephony.numbers.iter().any(|n| changed.spec.telephony.numbers.contains(n));
            shares || refused_for_a_number(other)
        })
        .cloned()
        .collect()
}

fn refused_for_a_number(agent: &Agent) -> bool {
    let conditions = agent.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    switchboard_crds::common::find_condition(conditions, switchboard_crds::common::CONDITION_ACCEPTED)
        .is_some_and(|c| c.reason == REASON_NUMBER_TAKEN)
}

/// Creation time (an Agent not yet stored sorts last), then `namespace/name`.
fn order_key(agent: &Agent) -> ((bool, i64, i32), String) {
    let created = agent.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second());
    let nanos = agent.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.subsec_nanosecond());
    let time = (created.is_none(), created.unwrap_or(0), nanos);
    (time, format!("{}/{}", agent.namespace().unwrap_or_default(), agent.name_any()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(ns: &str, name: &str, created: &str, numbers: &[&str]) -> Arc<Agent> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
                "spec": {"mode": "voice", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"},
                         "telephony": {"numbers": numbers}}
            }))
            .expect("agent"),
        )
    }

    #[test]
    fn the_earlier_claim_keeps_a_number_and_the_later_is_told_who_has_it() {
        let first = agent("bank", "triage", "2026-01-01T00:00:00Z", &["+442079460000"]);
        let later = agent("shop", "sales", "2026-01-02T00:00:00Z", &["+15551234567", "+442079460000"]);
        let other = agent("shop", "support", "2026-01-03T00:00:00Z", &["+15550000000"]);
        let all = vec![first.clone(), later.clone(), other.clone()];
        assert_eq!(taken(&first, &all), None);
        assert_eq!(taken(&other, &all), None);
        let verdict = taken(&later, &all).expect("refused");
        assert_eq!(verdict.reason, "NumberTaken");
        assert!(verdict.message.contains("+442079460000 is claimed by Agent bank/triage"), "{}", verdict.message);
        assert!(!verdict.message.contains("+15551234567"), "{}", verdict.message);
        // The first claim going frees the number.
        assert_eq!(taken(&later, &[later.clone(), other.clone()]), None);
    }

    #[test]
    fn same_creation_second_orders_by_name_and_changes_requeue_the_agents_they_touch() {
        let a = agent("a", "x", "2026-01-01T00:00:00Z", &["+442079460000"]);
        let b = agent("b", "x", "2026-01-01T00:00:00Z", &["+442079460000"]);
        let c = agent("c", "x", "2026-01-01T00:00:00Z", &["+15550000000"]);
        let all = vec![b.clone(), a.clone(), c.clone()];
        assert_eq!(taken(&a, &all), None);
        assert!(taken(&b, &all).is_some());
        let names: Vec<String> = claimants(&a, &all).iter().map(|x| x.namespace().unwrap_or_default()).collect();
        assert_eq!(names, ["b"], "shares a number; c does not and is not refused");
    }
}
