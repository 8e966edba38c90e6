//! The switch of an Agent's outage mode (`spec.outage.active`, or its namespace's switch)
//! as the operator reports it: the `OutageMode` condition (`True` while either is on — reason
//! `SwitchedOn` for the Agent's own, `NamespaceSwitchedOn` for its namespace's: every new
//! session goes to the Agent's fallback) and an Event on the Agent at every flip — `OutageSwitchedOn` (Warning) and
//! `OutageSwitchedOff` (Normal). The switch itself reaches the gateways through the routing
//! table (`RoutingTable::outages`, `crate::routes`); the breaker's automatic trips are the
//! gateways' own Events. Pure: the reconcile writes what these return. The switch of a
//! whole namespace is [`namespace`]'s.

pub mod namespace;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use switchboard_crds::common::find_condition;
use switchboard_crds::routing::OUTAGE_SWITCH_CONFIG_MAP;
use switchboard_crds::{AgentSpec, AgentStatus};

use super::status::{Verdict, condition as make_condition};

/// The condition type that says whether an Agent's outage mode is switched on.
pub const CONDITION_OUTAGE: &str = "OutageMode";
/// Its reason while the Agent's own switch is on.
pub const REASON_ON: &str = "SwitchedOn";
/// Its reason while its namespace's switch is on (and the Agent's own is not).
pub const REASON_NAMESPACE_ON: &str = "NamespaceSwitchedOn";
/// Its reason while off (the breaker may still trip it in the gateways).
pub const REASON_OFF: &str = "SwitchedOff";

/// The Agent's namespace's switch, as the operator knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceSwitch {
    /// On, with the namespace's message for Agents without a fallback of their own.
    On(switchboard_crds::routing::NamespaceOutage),
    /// Off (no ConfigMap, `"false"`, or a value that cannot be read).
    Off,
    /// Not known yet (the operator has not listed the switch ConfigMaps since it started):
    /// what the condition said of it stays.
    Unknown,
}

/// The `OutageMode` condition of an Agent with `spec` in a namespace whose switch is
/// `namespace`: none for an Agent that never had outage mode nor its namespace's switch.
pub fn condition(
    spec: &AgentSpec,
    namespace: &NamespaceSwitch,
    previous: Option<&AgentStatus>,
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let prev = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let before = find_condition(prev, CONDITION_OUTAGE);
    let own = spec.outage.as_ref().filter(|outage| outage.active);
    let verdict = match (own, namespace) {
        (Some(outage), _) => Verdict {
            ok: true,
            reason: REASON_ON.into(),
            message: format!(
                "spec.outage.active is true: every new session goes to the fallback ({}); set it to false to serve \
                 sessions again",
                fallback(spec, outage.fallback.person.as_deref(), None)
            ),
        },
        (None, NamespaceSwitch::On(switched)) => Verdict {
            ok: true,
            reason: REASON_NAMESPACE_ON.into(),
            message: format!(
                "the namespace's outage switch is on (ConfigMap {OUTAGE_SWITCH_CONFIG_MAP}, data.active \"true\"): every \
                 new session goes to the fallback ({}); set it to \"false\" or delete the ConfigMap to serve sessions \
                 again",
                fallback(
                    spec,
                    spec.outage.as_ref().and_then(|o| o.fallback.person.as_deref()),
                    switched.message.as_deref()
                )
            ),
        },
        // Not known yet: what it said of the namespace's switch stays.
        (None, NamespaceSwitch::Unknown) if before.is_some_and(|c| c.reason == REASON_NAMESPACE_ON) => {
            return before.cloned();
        }
        (None, _) if spec.outage.is_none() && before.is_none() => return None,
        (None, _) => Verdict {
            ok: false,
            reason: REASON_OFF.into(),
            message: "new sessions are served (the gateways' breaker may still send them to the fallback while the \
                      model service fails)"
                .into(),
        },
    };
    Some(make_condition(CONDITION_OUTAGE, &verdict, generation, prev, now))
}

/// Where new sessions go, for the condition's message: the Agent's person, its own
/// message, or (an Agent without outage mode under its namespace's switch) the
/// namespace's message.
fn fallback(spec: &AgentSpec, person: Option<&str>, namespace_message: Option<&str>) -> String {
    let to = match (person, &spec.outage, namespace_message) {
        (Some(person), _, _) => format!("the person {person:?}"),
        (None, Some(_), _) => "its message".to_owned(),
        (None, None, Some(message)) => format!("the namespace's message {message:?}"),
        (None, None, None) => "the default message".to_owned(),
    };
    let text = spec.outage.as_ref().is_some_and(|o| o.fallback.text) && spec.mode.has_audio();
    if text { format!("{to}; clients that read text are served in text by the text model") } else { to }
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
            "outage mode is switched off (the Agent's switch and its namespace's): new sessions are served again"
                .to_owned(),
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
        assert_eq!(
            condition(&spec(""), &NamespaceSwitch::Off, None, Some(1), now),
            None,
            "no outage mode, no condition"
        );
        let on = spec("outage: { active: true, fallback: { person: advisor } }\n");
        let c = condition(&on, &NamespaceSwitch::Off, None, Some(2), now).expect("a condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", REASON_ON));
        assert!(c.message.contains("advisor"), "{}", c.message);
        assert!(!c.message.contains("served in text"), "{}", c.message);
        let text = spec("outage: { active: true, fallback: { person: advisor, text: true } }\n");
        let t = condition(&text, &NamespaceSwitch::Off, None, Some(2), now).expect("a condition");
        assert!(t.message.contains("\"advisor\"; clients that read text are served in text"), "{}", t.message);
        let (kind, reason, _) = flip(None, Some(&c)).expect("switched on");
        assert_eq!((kind, reason), (EventType::Warning, "OutageSwitchedOn"));
        let was = status(vec![c.clone()]);
        assert_eq!(flip(Some(&was), Some(&c)), None, "no Event while it stays on");

        let off = spec("outage: { fallback: { message: Sorry } }\n");
        let c = condition(&off, &NamespaceSwitch::Off, Some(&was), Some(3), now).expect("a condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", REASON_OFF));
        assert_eq!(flip(Some(&was), Some(&c)).map(|(k, r, _)| (k, r)), Some((EventType::Normal, "OutageSwitchedOff")));
        // Outage mode removed while on: off too.
        let gone = condition(&spec(""), &NamespaceSwitch::Off, Some(&was), Some(4), now).expect("kept, as off");
        assert_eq!(gone.status, "False");
    }

    #[test]
    fn the_namespace_switch_is_the_condition_too_and_unknown_keeps_what_it_said() {
        use switchboard_crds::routing::NamespaceOutage;
        let now = Timestamp::now();
        let on = NamespaceSwitch::On(NamespaceOutage { message: Some("Closed today.".into()) });
        // An Agent without outage mode of its own: on with its namespace.
        let c = condition(&spec(""), &on, None, Some(1), now).expect("a condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", REASON_NAMESPACE_ON));
        assert!(c.message.contains("Closed today.") && c.message.contains("switchboard-outage"), "{}", c.message);
        assert_eq!(flip(None, Some(&c)).map(|(k, r, _)| (k, r)), Some((EventType::Warning, "OutageSwitchedOn")));
        let was = status(vec![c.clone()]);
        // Not known (the operator restarted and has not listed the switches): it stays.
        assert_eq!(condition(&spec(""), &NamespaceSwitch::Unknown, Some(&was), Some(1), now).as_ref(), Some(&c));
        assert_eq!(condition(&spec(""), &NamespaceSwitch::Unknown, None, Some(1), now), None);
        // Off: off, one Normal Event.
        let off = condition(&spec(""), &NamespaceSwitch::Off, Some(&was), Some(1), now).expect("kept, as off");
        assert_eq!((off.status.as_str(), off.reason.as_str()), ("False", REASON_OFF));
        assert_eq!(
            flip(Some(&was), Some(&off)).map(|(k, r, _)| (k, r)),
            Some((EventType::Normal, "OutageSwitchedOff"))
        );

        // An Agent with its own fallback: the namespace sends it to its person.
        let own = spec("outage: { fallback: { person: advisor } }\n");
        let c = condition(&own, &on, None, Some(2), now).expect("a condition");
        assert_eq!(c.reason, REASON_NAMESPACE_ON);
        assert!(c.message.contains("advisor"), "{}", c.message);
        // Its own switch too: its own reason wins; both on to one on is no flip.
        let both = spec("outage: { active: true, fallback: { person: advisor } }\n");
        let mine = condition(&both, &on, Some(&status(vec![c.clone()])), Some(3), now).expect("a condition");
        assert_eq!(mine.reason, REASON_ON);
        assert_eq!(flip(Some(&status(vec![c])), Some(&mine)), None);
    }
}
