//! What a session under way is told when its Agent's outage switch flips
//! (`bidi_session_outage`), and what the gateway follows to know when that is: the set of
//! switched-on Agents in the routing table ([`switched`]). A leaf: the session machine and
//! the gateway's follower task ([`Switches::follow`]) both use it.

use std::collections::BTreeMap;

use switchboard_core::protocol::{FallbackPerson, ServerMessage};
use switchboard_crds::routing::{RouteOutage, RoutingTable};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::directory::Directory;

/// What the client is told when the Agent names no message.
pub const DEFAULT_MESSAGE: &str = "The assistant is unavailable at the moment.";

/// The switched-on outage mode of `namespace/name` (its own switch or its namespace's), if
/// it is on. The breaker's state is not here: only a switch is told to sessions under way.
pub fn switched_on(table: &RoutingTable, namespace: &str, name: &str) -> Option<RouteOutage> {
    table.outage_in_effect(namespace, name).filter(|outage| outage.active)
}

/// Every routed Agent (`namespace/name`) switched on, with what its sessions are told: a
/// change of this set (an Agent switched on or off, or its fallback changed) is what the
/// sessions under way hear of.
pub fn switched(table: &RoutingTable) -> BTreeMap<String, RouteOutage> {
    table.outages_in_effect().into_iter().filter(|(_, outage)| outage.active).collect()
}

/// The `bidi_session_outage` for a session of `agent` (`namespace/name`): on with
/// `outage`'s fallback, or off (`None`).
pub fn told(agent: &str, outage: Option<&RouteOutage>) -> ServerMessage {
    ServerMessage::BidiSessionOutage {
        agent: agent.to_owned(),
        active: outage.is_some(),
        cause: "switch".to_owned(),
        message: outage.map(|o| o.message.clone().unwrap_or_else(|| DEFAULT_MESSAGE.to_owned())).unwrap_or_default(),
        person: outage
            .and_then(|o| o.person.as_ref())
            .map(|p| FallbackPerson { name: p.name.clone(), address: p.address.clone() }),
    }
}

/// The gateway's view of which Agents are switched on: one task follows the routing
/// directory ([`Switches::follow`]) and bumps a generation when [`switched`] changes; each
/// live session waits on it ([`Switches::subscribe`]), so a directory change that flips no
/// switch (a pod ready, a route added) wakes no session.
#[derive(Debug)]
pub struct Switches {
    generation: watch::Sender<u64>,
}

impl Default for Switches {
    fn default() -> Self {
        Self { generation: watch::Sender::new(0) }
    }
}

impl Switches {
    /// Changes from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Follows `directory` until `stop` is cancelled or the directory's sender goes.
    pub async fn follow(&self, mut directory: watch::Receiver<Directory>, stop: CancellationToken) {
        let mut last = switched(directory.borrow_and_update().table());
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = directory.changed() => if changed.is_err() { return },
            }
            let now = switched(directory.borrow_and_update().table());
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
            }),
            message: None,
            breaker: switchboard_crds::agent::Breaker::default(),
        };
        let on = told("bank/triage", Some(&outage)).to_json();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&on).expect("json"),
            serde_json::json!({
                "type": "bidi_session_outage", "agent": "bank/triage", "active": true, "cause": "switch",
                "message": DEFAULT_MESSAGE, "person": {"name": "advisor", "address": "+442079460001"}
            })
        );
        let off = told("bank/triage", None).to_json();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&off).expect("json"),
            serde_json::json!({"type": "bidi_session_outage", "agent": "bank/triage", "active": false, "cause": "switch"})
        );
    }
}
