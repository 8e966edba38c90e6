//! The switch of a whole namespace's outage mode: the ConfigMap
//! [`OUTAGE_SWITCH_CONFIG_MAP`] (`switchboard-outage`) in the namespace, `data.active:
//! "true"` (and an optional `data.message`). While it is on, every Agent of the namespace
//! sends its new sessions to its fallback — an Agent without `spec.outage` to the
//! ConfigMap's message — through the routing table (`RoutingTable::namespace_outages`); the
//! gateways apply it as they do an Agent's own switch, and no pod rolls.
//!
//! A ConfigMap, not an annotation on the Namespace: the operator may read no cluster-scoped
//! object (a namespaced install has no ClusterRole), and whoever may edit ConfigMaps in the
//! namespace — its team, or the platform team's on-call — may flip it
//! (`kubectl -n shop create configmap switchboard-outage --from-literal=active=true`).
//!
//! Watched by name across the operator's namespaces; each flip is an Event on the ConfigMap
//! (`OutageSwitchedOn` Warning, `OutageSwitchedOff` Normal), and a value the operator cannot
//! read is a Warning `OutageSwitchInvalid` saying what to fix (the switch then counts as
//! off). The initial list tells nothing: a restarted operator does not repeat old flips.
//!
//! Every Agent of the namespace reports the switch in its `OutageMode` condition (reason
//! `NamespaceSwitchedOn`, [`super::condition`]): a change wakes their reconciles, and the
//! first full list wakes those it switches on or whose condition said it was on. Until that
//! list, what a condition says of the namespace's switch stays ([`Switches::of`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use switchboard_crds::routing::{NamespaceOutage, OUTAGE_SWITCH_CONFIG_MAP};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{CONDITION_OUTAGE, NamespaceSwitch, REASON_NAMESPACE_ON};
use crate::controller::Context;

/// The namespaces' switches as the Agent reconcile reads them.
pub struct Switches {
    store: Store<ConfigMap>,
    /// Whether the switch ConfigMaps were listed since the operator started.
    listed: AtomicBool,
}

impl Switches {
    /// `namespace`'s switch (unreadable counts as off); unknown before the first list.
    pub fn of(&self, namespace: &str) -> NamespaceSwitch {
        if !self.listed.load(Ordering::Acquire) {
            return NamespaceSwitch::Unknown;
        }
        let key = reflector::ObjectRef::new(OUTAGE_SWITCH_CONFIG_MAP).within(namespace);
        match Switch::of(self.store.get(&key).as_deref()) {
            Switch::On(outage) => NamespaceSwitch::On(outage),
            Switch::Off | Switch::Invalid(_) => NamespaceSwitch::Off,
        }
    }
}

impl std::fmt::Debug for Switches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switches").field("listed", &self.listed).finish_non_exhaustive()
    }
}

/// Wakes the reconcile of every Agent of `namespace` (every namespace: `None`) for which
/// `wake` holds.
fn wake_agents(ctx: &Context, namespace: Option<&str>, wake: impl Fn(&switchboard_crds::Agent) -> bool) {
    for agent in ctx.stores.agents.state() {
        let ns = agent.namespace().unwrap_or_default();
        if namespace.is_none_or(|n| n == ns) && wake(&agent) {
            ctx.trigger_agent(&ns, &agent.name_any());
        }
    }
}

/// Whether `agent`'s condition says its namespace's switch is on.
fn said_on(agent: &switchboard_crds::Agent) -> bool {
    agent
        .status
        .as_ref()
        .and_then(|s| switchboard_crds::common::find_condition(&s.conditions, CONDITION_OUTAGE))
        .is_some_and(|c| c.reason == REASON_NAMESPACE_ON)
}

/// How a namespace's switch reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Switch {
    /// On: every Agent of the namespace falls back.
    On(NamespaceOutage),
    /// Off, or no ConfigMap.
    Off,
    /// Unreadable, with what to fix; counts as off.
    Invalid(String),
}

impl Switch {
    /// The switch a ConfigMap (`None`: deleted) sets.
    pub fn of(config_map: Option<&ConfigMap>) -> Self {
        let Some(config_map) = config_map else { return Self::Off };
        match NamespaceOutage::from_data(&config_map.data.clone().unwrap_or_default()) {
            Ok(Some(outage)) => Self::On(outage),
            Ok(None) => Self::Off,
            Err(problem) => Self::Invalid(problem),
        }
    }
}

/// The namespaces switched on, from the watched ConfigMaps.
pub fn switched(config_maps: &Store<ConfigMap>) -> BTreeMap<String, NamespaceOutage> {
    config_maps
        .state()
        .iter()
        .filter(|cm| cm.name_any() == OUTAGE_SWITCH_CONFIG_MAP)
        .filter_map(|cm| match Switch::of(Some(cm)) {
            Switch::On(outage) => Some((cm.namespace()?, outage)),
            _ => None,
        })
        .collect()
}

/// The Event of a change from `was` to `now`: `(type, reason, note)`, or none.
pub fn flip(was: &Switch, now: &Switch) -> Option<(EventType, &'static str, String)> {
    match (was, now) {
        (Switch::On(_), Switch::On(_)) | (Switch::Off, Switch::Off) => None,
        (_, Switch::On(_)) => Some((
            EventType::Warning,
            "OutageSwitchedOn",
            format!(
                "{OUTAGE_SWITCH_CONFIG_MAP} data.active is \"true\": every new session of every Agent of this namespace \
                 goes to its fallback; set it to \"false\" (or delete this ConfigMap) to serve sessions again"
            ),
        )),
        (_, Switch::Invalid(problem)) if was != now => Some((
            EventType::Warning,
            "OutageSwitchInvalid",
            format!("{problem}; until fixed the namespace's switch counts as off"),
        )),
        (Switch::On(_), Switch::Off) => Some((
            EventType::Normal,
            "OutageSwitchedOff",
            "the namespace's outage switch is off: new sessions are served again".to_owned(),
        )),
        _ => None,
    }
}

/// Watches the switch ConfigMaps (`namespace`: only that one) into the returned store until
/// `stop`: every change wakes the routing-table publisher (`notify`), and each flip is an
/// Event on the ConfigMap.
pub fn run(
    client: &Client,
    namespace: Option<&str>,
    notify: watch::Sender<()>,
    ctx: Arc<Context>,
    stop: CancellationToken,
) -> (Store<ConfigMap>, BoxFuture<'static, ()>) {
    let api = crate::watch::scoped::<ConfigMap>(client.clone(), namespace);
    let config = crate::watch::watch_config().fields(&format!("metadata.name={OUTAGE_SWITCH_CONFIG_MAP}"));
    let (store, writer) = reflector::store();
    let switches = Arc::new(Switches { store: store.clone(), listed: AtomicBool::new(false) });
    let _ = ctx.outage_switches.set(switches.clone());
    let events = watcher(api, config).default_backoff().reflect(writer);
    let task = Box::pin(async move {
        let mut events = std::pin::pin!(events.take_until(stop.cancelled_owned()));
        let mut known: BTreeMap<String, Switch> = BTreeMap::new();
        let mut listed = false;
        while let Some(event) = events.next().await {
            let (config_map, now) = match event {
                Ok(watcher::Event::Init) => continue,
                Ok(watcher::Event::InitDone) => {
                    notify.send_replace(());
                    if !listed {
                        listed = true;
                        switches.listed.store(true, Ordering::Release);
                        // The conditions catch up with what changed while no operator watched.
                        wake_agents(&ctx, None, |agent| {
                            said_on(agent)
                                || switches.of(&agent.namespace().unwrap_or_default()) != NamespaceSwitch::Off
                        });
                    }
                    continue;
                }
                Ok(watcher::Event::InitApply(cm)) => {
                    known.insert(cm.namespace().unwrap_or_default(), Switch::of(Some(&cm)));
                    continue;
                }
                Ok(watcher::Event::Apply(cm)) => {
                    let now = Switch::of(Some(&cm));
                    (cm, now)
                }
                Ok(watcher::Event::Delete(cm)) => (cm, Switch::Off),
                Err(e) => {
                    tracing::debug!("outage switch watch: {e}");
                    continue;
                }
            };
            notify.send_replace(());
            let ns = config_map.namespace().unwrap_or_default();
            let was = known.insert(ns.clone(), now.clone()).unwrap_or(Switch::Off);
            if !listed {
                continue;
            }
            if was != now {
                wake_agents(&ctx, Some(&ns), |_| true);
            }
            if let Some((kind, reason, note)) = flip(&was, &now) {
                if kind == EventType::Warning {
                    tracing::warn!(namespace = %ns, reason, "{note}");
                } else {
                    tracing::info!(namespace = %ns, reason, "{note}");
                }
                ctx.event(&config_map, kind, reason, note).await;
            }
        }
    });
    (store, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(OUTAGE_SWITCH_CONFIG_MAP.into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            data: Some(data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn each_flip_of_the_namespace_switch_is_one_event() {
        let on = Switch::of(Some(&cm(&[("active", "true"), ("message", "Closed.")])));
        assert_eq!(on, Switch::On(NamespaceOutage { message: Some("Closed.".into()) }));
        let off = Switch::of(Some(&cm(&[("active", "false")])));
        assert_eq!(off, Switch::Off);
        assert_eq!(Switch::of(None), Switch::Off, "deleted: off");
        let bad = Switch::of(Some(&cm(&[("active", "on")])));
        assert!(matches!(&bad, Switch::Invalid(p) if p.contains("\"on\"")), "{bad:?}");

        assert_eq!(flip(&Switch::Off, &on).map(|(k, r, _)| (k, r)), Some((EventType::Warning, "OutageSwitchedOn")));
        assert_eq!(flip(&on, &on), None, "no Event while it stays on (a message edit)");
        assert_eq!(flip(&on, &off).map(|(k, r, _)| (k, r)), Some((EventType::Normal, "OutageSwitchedOff")));
        assert_eq!(flip(&off, &off), None);
        assert_eq!(flip(&off, &bad).map(|(k, r, _)| (k, r)), Some((EventType::Warning, "OutageSwitchInvalid")));
        assert_eq!(flip(&bad, &bad), None, "told once");
        assert_eq!(flip(&on, &bad).map(|(_, r, _)| r), Some("OutageSwitchInvalid"), "on -> unreadable: off, told why");
        assert_eq!(flip(&bad, &off), None, "fixed to off: nothing changed for sessions");
        assert_eq!(flip(&bad, &on).map(|(_, r, _)| r), Some("OutageSwitchedOn"));
    }
}
