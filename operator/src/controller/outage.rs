//! The switch of an Agent's outage mode (`spec.outage.active`) as the operator reports it:
//! the `OutageMode` condition (`True` while switched on: every new session goes to the
//! Agent's fallback) and an Event at every flip — `OutageSwitchedOn` (Warning) and
//! `OutageSwitchedOff` (Normal). The switch itself reaches the gateways through the routing
//! table (`RoutingTable::outages`, `crate::routes`); the breaker's automatic trips are the
//! gateways' own Events. Pure: the reconcile writes what these return. The switch of a
//! whole namespace is [`namespace`]'s.

pub mod namespace;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use switchboard_crds::common::find_condition;
use switchboard_crds::{AgentSpec, AgentStatus};

use super::status::{Verdict, condition as make_condition};

/// The condition type that says whether an Agent's outage mode is switched on.
pub const CONDITION_OUTAGE: &str = "OutageMode";
/// Its reason while switched on.
pub const REASON_ON: &str = "SwitchedOn";
/// Its reason while off (the breaker may still trip it in the gateways).
pub const REASON_OFF: &str = "SwitchedOff";

/// The `OutageMode` condition of an Agent with `spec`: none for an Agent that never had
/// outage mode.
pub fn condition(
    spec: &AgentSpec,
    previous: Option<&AgentStatus>,
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let prev = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let verdict = match &spec.outage {
        None if find_condition(prev, CONDITION_OUTAGE).is_none() => return None,
        Some(outage) if outage.active => {
            let to = match (&outage.fallback.person, &outage.fallback.message) {
                (Some(person), _) => format!("the person {person:?}"),
                (None, _) => "its message".to_owned(),
            };
            Verdict {
                ok: true,
                reason: REASON_ON.into(),
                message: format!(
                    "spec.outage.active is true: every new session goes to the fallback ({to}); set it to false to \
                     serve sessions again"
                ),
            }
        }
        _ => Verdict {
            ok: false,
            reason: REASON_OFF.into(),
            message: "new sessions are served (the gateways' breaker may still send them to the fallback while the \
                      model service fails)"
                .into(),
        },
    };
    Some(make_condition(CONDITION_OUTAGE, &verdict, generation, prev, now))
}

/// The Event of a flip from `previous` to `now`: `(type, reason, note)`, or none when the
/// switch did not move.
pub fn flip(previous: Option<&AgentStatus>, now: Option<&Condition>) -> Option<(EventType, &'static str, String)> {
    let was_on =
        previous.and_then(|s| find_condition(&s.conditions, CONDITION_OUTAGE)).is_some_and(|c| c.status == "True");
    let is_on = now.is_some_and(|c| c.status == "True");
    match (was_on, is_on) {
        (false, true) => {
            Some((EventType::Warning, "OutageSwitchedOn", now.map(|c| c.message.clone()).unwrap_or_default()))
        }
        (true, false) => Some((
            EventType::Normal,
            "OutageSwitchedOff",
            "spec.outage.active is off: new sessions are served again".to_owned(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(outage: &str) -> AgentSpec {
        let yaml = format!("mode: voice\npersonaRef: {{ name: p }}\nworkflowRef: {{ name: w }}\n{outage}");
        serde_yaml::from_str(&yaml).expect("an agent spec")
    }

    fn status(conditions: Vec<Condition>) -> AgentStatus {
        AgentStatus { conditions, ..AgentStatus::default() }
    }

    #[test]
    fn flipping_the_switch_is_a_condition_and_one_event_each_way() {
        let now = Timestamp::now();
        assert_eq!(condition(&spec(""), None, Some(1), now), None, "no outage mode, no condition");
        let on = spec("outage: { active: true, fallback: { person: advisor } }\n");
        let c = condition(&on, None, Some(2), now).expect("a condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", REASON_ON));
        assert!(c.message.contains("advisor"), "{}", c.message);
        let (kind, reason, _) = flip(None, Some(&c)).expect("switched on");
        assert_eq!((kind, reason), (EventType::Warning, "OutageSwitchedOn"));
        let was = status(vec![c.clone()]);
        assert_eq!(flip(Some(&was), Some(&c)), None, "no Event while it stays on");

        let off = spec("outage: { fallback: { message: Sorry } }\n");
        let c = condition(&off, Some(&was), Some(3), now).expect("a condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", REASON_OFF));
        assert_eq!(flip(Some(&was), Some(&c)).map(|(k, r, _)| (k, r)), Some((EventType::Normal, "OutageSwitchedOff")));
        // Outage mode removed while on: off too.
        let gone = condition(&spec(""), Some(&was), Some(4), now).expect("kept, as off");
        assert_eq!(gone.status, "False");
    }
}
