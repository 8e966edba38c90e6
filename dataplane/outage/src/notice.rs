//! What a session under way is told when its Agent goes into outage mode or out of it
//! (`bidi_session_outage`) — an operator's switch flipping, or the gateway's breaker
//! tripping and recovering — and what the gateway follows to know when that is: the set of
//! switched-on Agents in the routing table ([`switched`]) and the Agents whose breaker is
//! tripped here ([`Switches::breaker`]). A leaf: the session machine and the gateway's
//! follower task ([`Switches::follow`]) both use it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use switchboard_crds::routing::{RouteOutage, RoutingTable};
use switchboard_protocol::{FallbackPerson, ServerMessage};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the client is told when the Agent names no message.
pub const DEFAULT_MESSAGE: &str = "The assistant is unavailable at the moment.";

/// The switched-on outage mode of `namespace/name` (its own switch or its namespace's), if
/// it is on.
pub fn switched_on(table: &RoutingTable, namespace: &str, name: &str) -> Option<RouteOutage> {
    table.outage_in_effect(namespace, name).filter(|outage| outage.active)
}

/// The outage mode sessions under way of `namespace/name` are told of, with its cause: a
/// switch (`switch`, [`switched_on`]) before the breaker (`breaker`: this gateway's breaker
/// for the Agent is tripped or ramping back, and the Agent's breaker is on).
pub fn in_effect(
    table: &RoutingTable,
    switches: &Switches,
    namespace: &str,
    name: &str,
) -> Option<(RouteOutage, &'static str)> {
    let outage = table.outage_in_effect(namespace, name)?;
    if outage.active {
        return Some((outage, "switch"));
    }
    let tripped = outage.breaker.enabled && switches.tripped(&format!("{namespace}/{name}"));
    tripped.then_some((outage, "breaker"))
}

/// Every routed Agent (`namespace/name`) switched on, with what its sessions are told: a
/// change of this set (an Agent switched on or off, or its fallback changed) is what the
/// sessions under way hear of.
pub fn switched(table: &RoutingTable) -> BTreeMap<String, RouteOutage> {
    table.outages_in_effect().into_iter().filter(|(_, outage)| outage.active).collect()
}

/// The `bidi_session_outage` for a session of `agent` (`namespace/name`): on with
/// `outage`'s fallback, or off (`None`), for `cause` (`switch` or `breaker`); `text_only`
/// when the session is served in text because of an outage.
pub fn told(agent: &str, outage: Option<&RouteOutage>, cause: &str, text_only: bool) -> ServerMessage {
    ServerMessage::BidiSessionOutage {
        agent: agent.to_owned(),
        active: outage.is_some(),
        cause: cause.to_owned(),
        message: outage.map(|o| o.message.clone().unwrap_or_else(|| DEFAULT_MESSAGE.to_owned())).unwrap_or_default(),
        person: outage
            .and_then(|o| o.person.as_ref())
            .map(|p| FallbackPerson { name: p.name.clone(), address: p.address.clone() }),
        text_only,
    }
}

/// The gateway's view of which Agents are in outage mode for the sessions under way: one
/// task follows the routing directory ([`Switches::follow`]) and bumps a generation when
/// [`switched`] changes; the breakers bump it when one trips or recovers
/// ([`Switches::breaker`]); each live session waits on it ([`Switches::subscribe`]), so a
/// directory change that flips no switch (a pod ready, a route added) wakes no session.
#[derive(Debug)]
pub struct Switches {
    generation: watch::Sender<u64>,
    /// The Agents (`namespace/name`) whose breaker is tripped here, from the trip (or a
    /// trip learned from another replica) to the recovery; ramping back counts as tripped.
    tripped: Mutex<BTreeSet<String>>,
}

impl Default for Switches {
    fn default() -> Self {
        Self { generation: watch::Sender::new(0), tripped: Mutex::default() }
    }
}

impl Switches {
    /// Changes from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Whether `agent`'s breaker is tripped (or ramping back) here.
    pub fn tripped(&self, agent: &str) -> bool {
        self.tripped.lock().unwrap_or_else(PoisonError::into_inner).contains(agent)
    }

    /// `agent`'s breaker tripped (`true`) or recovered (`false`): the sessions under way
    /// hear of it when that changes whether it is tripped (a breaker that opens again while
    /// ramping back, or learns a trip while open, tells nobody again).
    pub fn breaker(&self, agent: &str, tripped: bool) {
        let changed = {
            let mut set = self.tripped.lock().unwrap_or_else(PoisonError::into_inner);
            if tripped { set.insert(agent.to_owned()) } else { set.remove(agent) }
        };
        if changed {
            tracing::info!(%agent, tripped, "the breaker changed: telling the sessions under way");
            self.generation.send_modify(|generation| *generation += 1);
        }
    }

    /// Follows the routing view `directory` (the gateway's: anything that holds the routing
    /// table) until `stop` is cancelled or the directory's sender goes.
    pub async fn follow<D: AsRef<RoutingTable>>(&self, mut directory: watch::Receiver<D>, stop: CancellationToken) {
        let mut last = switched(directory.borrow_and_update().as_ref());
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = directory.changed() => if changed.is_err() { return },
            }
            let now = switched(directory.borrow_and_update().as_ref());
            if now != last {
                tracing::info!(
                    switched_on = ?now.keys().collect::<Vec<_>>(),
                    "outage switches changed: telling the sessions under way"
                );
                last = now;
                self.generation.send_modify(|generation| *generation += 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use switchboard_crds::routing::NamespaceOutage;

    use super::*;

    fn route(namespace: &str, name: &str) -> switchboard_crds::routing::Route {
        // From JSON: only the fields this test needs are named.
        serde_json::from_value(serde_json::json!({
            "namespace": namespace, "name": name, "mode": "text", "service": format!("{name}.{namespace}.svc"),
            "port": 8080, "path": "/v1/session", "handoffs": [], "expose": true, "default": false,
            "ready": true, "readyReplicas": 1
        }))
        .expect("a route")
    }

    #[test]
    fn only_a_switch_is_switched_on_and_the_namespace_switch_covers_every_agent() {
        let mut table = RoutingTable::new(vec![route("bank", "triage"), route("bank", "idv"), route("retail", "shop")]);
        let breaker_only = RouteOutage {
            active: false,
            person: None,
            message: Some("m".into()),
            breaker: switchboard_crds::agent::Breaker::default(),
            text: false,
        };
        table.outages.insert("bank/triage".into(), breaker_only.clone());
        assert!(switched(&table).is_empty());
        assert_eq!(switched_on(&table, "bank", "triage"), None);

        table.outages.insert("bank/triage".into(), RouteOutage { active: true, ..breaker_only });
        assert_eq!(switched(&table).keys().collect::<Vec<_>>(), ["bank/triage"]);

        table.namespace_outages.insert("bank".into(), NamespaceOutage { message: Some("closed".into()) });
        assert_eq!(switched(&table).keys().collect::<Vec<_>>(), ["bank/idv", "bank/triage"]);
        let idv = switched_on(&table, "bank", "idv").expect("on through the namespace");
        assert_eq!(idv.message.as_deref(), Some("closed"));
        assert_eq!(switched_on(&table, "retail", "shop"), None);
    }

    #[test]
    fn on_carries_the_fallback_and_off_carries_nothing() {
        let outage = RouteOutage {
            active: true,
            person: Some(switchboard_crds::agent::Person {
                name: "advisor".into(),
                address: "+442079460001".into(),
                description: String::new(),
                transfer: Default::default(),
            }),
            message: None,
            breaker: switchboard_crds::agent::Breaker::default(),
            text: false,
        };
        let on = told("bank/triage", Some(&outage), "switch", false).to_json();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&on).expect("json"),
            serde_json::json!({
                "type": "bidi_session_outage", "agent": "bank/triage", "active": true, "cause": "switch",
                "message": DEFAULT_MESSAGE, "person": {"name": "advisor", "address": "+442079460001"}
            })
        );
        let off = told("bank/triage", None, "switch", false).to_json();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&off).expect("json"),
            serde_json::json!({"type": "bidi_session_outage", "agent": "bank/triage", "active": false, "cause": "switch"})
        );
    }

    #[test]
    fn a_tripped_breaker_is_in_effect_after_a_switch_and_only_while_the_breaker_is_on() {
        let mut table = RoutingTable::new(vec![route("bank", "triage")]);
        let outage = RouteOutage {
            active: false,
            person: None,
            message: Some("Sorry.".into()),
            breaker: switchboard_crds::agent::Breaker::default(),
            text: true,
        };
        table.outages.insert("bank/triage".into(), outage.clone());
        let switches = Switches::default();
        let mut changes = switches.subscribe();
        assert_eq!(in_effect(&table, &switches, "bank", "triage"), None);

        switches.breaker("bank/triage", true);
        assert!(changes.has_changed().expect("open"), "a trip wakes the sessions");
        changes.mark_unchanged();
        assert_eq!(in_effect(&table, &switches, "bank", "triage"), Some((outage.clone(), "breaker")));
        switches.breaker("bank/triage", true);
        assert!(!changes.has_changed().expect("open"), "tripped again while tripped: told once");

        // A switch wins over the breaker; a breaker turned off is not told.
        table.outages.insert("bank/triage".into(), RouteOutage { active: true, ..outage.clone() });
        assert_eq!(in_effect(&table, &switches, "bank", "triage").map(|(_, cause)| cause), Some("switch"));
        let mut off = outage.clone();
        off.breaker.enabled = false;
        table.outages.insert("bank/triage".into(), off);
        assert_eq!(in_effect(&table, &switches, "bank", "triage"), None);

        table.outages.insert("bank/triage".into(), outage);
        switches.breaker("bank/triage", false);
        assert!(changes.has_changed().expect("open"), "a recovery wakes the sessions");
        assert_eq!(in_effect(&table, &switches, "bank", "triage"), None);
        let told = told("bank/triage", None, "breaker", true).to_json();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&told).expect("json"),
            serde_json::json!({
                "type": "bidi_session_outage", "agent": "bank/triage", "active": false, "cause": "breaker",
                "text_only": true
            })
        );
    }
}
