//! What the operator knows of the NetworkPolicies it wrote, in memory: its last write of
//! each namespace's policy, the namespaces whose owner lists wait for the flush, and the
//! turns reconciles of one namespace take. The decisions read from it ([`Need`]) are pure;
//! the apply around it is [`super`]'s.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PartialObjectMeta;
use tokio::sync::Notify;

/// What the operator last wrote to each namespace's policy, the namespaces whose owner
/// lists wait for the flush, and the turns reconciles take (memory only: after a restart,
/// each namespace's policy is applied once again).
#[derive(Debug, Default)]
pub struct NetworkPolicies {
    written: Mutex<HashMap<String, Written>>,
    owners_due: Mutex<BTreeSet<String>>,
    flush: Notify,
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The operator's last write of one namespace's policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Written {
    /// Hash of the policy it applied, owners left out.
    pub(super) desired: u64,
    /// The generation the write left.
    pub(super) generation: Option<i64>,
    /// The uids of the owners it wrote.
    pub(super) owners: BTreeSet<String>,
}

/// What one Agent's reconcile must do about its namespace's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Need {
    /// Nothing: current, and the Agent is an owner.
    Nothing,
    /// Current, but the Agent is not an owner yet: the flush adds it.
    Owner,
    /// Apply it now, before the Agent's children.
    Write,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain collections behind: still usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl NetworkPolicies {
    pub(super) fn turn(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        locked(&self.turns).entry(namespace.to_owned()).or_default().clone()
    }

    /// What the Agent with `uid` needs, the operator wanting `desired` (a hash) and the watch
    /// having seen `cached`. The watch may trail the operator's own write (nothing seen yet,
    /// or an earlier generation); a deletion clears what was written ([`Self::forget`]), a
    /// later generation is someone else's edit.
    pub(super) fn need(
        &self,
        namespace: &str,
        desired: u64,
        uid: &str,
        cached: Option<&PartialObjectMeta<NetworkPolicy>>,
    ) -> Need {
        let written = locked(&self.written);
        let Some(w) = written.get(namespace).filter(|w| w.desired == desired) else { return Need::Write };
        if cached.is_some_and(|c| c.metadata.generation > w.generation) {
            Need::Write
        } else if w.owners.contains(uid) {
            Need::Nothing
        } else {
            Need::Owner
        }
    }

    /// Whether `generation` of `namespace`'s policy is later than the operator's last write
    /// left (someone else changed it). Unknown after a restart: every Agent is reconciled
    /// then anyway.
    pub(super) fn changed_by_others(&self, namespace: &str, generation: Option<i64>) -> bool {
        locked(&self.written).get(namespace).is_some_and(|w| generation > w.generation)
    }

    pub(super) fn record(&self, namespace: &str, written: Written) {
        locked(&self.written).insert(namespace.to_owned(), written);
    }

    pub(super) fn forget(&self, namespace: &str) {
        locked(&self.written).remove(namespace);
        locked(&self.turns).remove(namespace);
    }

    /// Forgets the namespaces whose policy a relist no longer has (deleted while the watch
    /// was down).
    pub(super) fn retain(&self, exists: impl Fn(&str) -> bool) {
        locked(&self.written).retain(|ns, _| exists(ns));
    }

    pub(super) fn owners_due(&self, namespace: &str) {
        locked(&self.owners_due).insert(namespace.to_owned());
        self.flush.notify_one();
    }

    /// Takes the namespaces whose owner lists wait for the flush.
    pub(super) fn take_due(&self) -> BTreeSet<String> {
        std::mem::take(&mut *locked(&self.owners_due))
    }

    /// Waits until a namespace's owners are due.
    pub(super) async fn flush_due(&self) {
        self.flush.notified().await;
    }

    /// Whether the operator wrote `namespace`'s policy since it started (and it was not
    /// deleted since).
    pub(super) fn is_written(&self, namespace: &str) -> bool {
        locked(&self.written).contains_key(namespace)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn cached(generation: i64) -> PartialObjectMeta<NetworkPolicy> {
        let mut p = PartialObjectMeta::<NetworkPolicy>::default();
        p.metadata.generation = Some(generation);
        p.metadata.owner_references = Some(vec![OwnerReference { uid: "a".into(), ..Default::default() }]);
        p
    }

    fn written(generation: i64, owners: &[&str]) -> Written {
        Written { desired: 7, generation: Some(generation), owners: owners.iter().map(|o| (*o).to_owned()).collect() }
    }

    #[test]
    fn the_policy_is_written_before_pods_only_when_it_is_not_as_the_operator_left_it() {
        let state = NetworkPolicies::default();
        assert_eq!(state.need("bank", 7, "a", Some(&cached(2))), Need::Write, "never written (a restart)");
        state.record("bank", written(2, &["a", "b"]));
        assert_eq!(state.need("bank", 7, "a", Some(&cached(2))), Need::Nothing);
        assert_eq!(state.need("bank", 7, "a", Some(&cached(1))), Need::Nothing, "the watch trails the write");
        assert_eq!(state.need("bank", 7, "a", None), Need::Nothing, "not seen yet (a deletion forgets it)");
        assert_eq!(state.need("bank", 7, "c", Some(&cached(2))), Need::Owner, "a new Agent: the flush adds it");
        assert_eq!(state.need("bank", 8, "a", Some(&cached(2))), Need::Write, "other settings");
        assert_eq!(state.need("bank", 7, "a", Some(&cached(3))), Need::Write, "edited by someone else");
        assert_eq!(state.need("team", 7, "a", Some(&cached(2))), Need::Write, "another namespace");
        assert!(!state.changed_by_others("bank", Some(2)) && !state.changed_by_others("bank", Some(1)));
        assert!(state.changed_by_others("bank", Some(3)));
        assert!(!state.changed_by_others("team", Some(1)), "unknown: not woken");
        state.forget("bank");
        assert_eq!(state.need("bank", 7, "a", Some(&cached(2))), Need::Write, "deleted");
        state.record("bank", written(2, &["a"]));
        state.record("team", written(1, &["a"]));
        state.retain(|ns| ns == "team");
        assert_eq!(state.need("bank", 7, "a", None), Need::Write, "gone from a relist");
        assert_eq!(state.need("team", 7, "a", None), Need::Nothing);
    }

    #[test]
    fn owners_wait_for_one_flush_per_namespace() {
        let state = NetworkPolicies::default();
        for ns in ["bank", "team", "bank"] {
            state.owners_due(ns);
        }
        let due = state.take_due();
        assert_eq!(due.into_iter().collect::<Vec<_>>(), ["bank", "team"]);
    }
}
