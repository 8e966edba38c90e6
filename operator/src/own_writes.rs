//! What the operator knows about the children it writes, so it neither wakes itself with
//! its own writes nor sends a write that would change nothing:
//!
//! - for every child it applied: the hash of the desired object it sent, and the child's
//!   trigger key and content key right after the write ([`Written`]);
//! - for every labelled child its watches see: the content key of the latest version, and
//!   a Deployment's replica counts ([`Seen`]), kept current through relists.
//!
//! A child is *unchanged* when the operator would send the very object it sent last and the
//! latest version the watch saw still has the content that write left. A change by anyone
//! else (a hand edit bumps a Deployment's generation, changes a ConfigMap's data or a
//! Service's spec), a deletion, a relist that no longer has the child, or a restart of the
//! operator (this is memory only) makes the next reconcile apply it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::controller::status::Replicas;

/// What the operator wrote to one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Hash of the desired object it applied.
    pub desired: u64,
    /// The child's trigger key after the write (its own watch event carries this key).
    pub key: u64,
    /// The child's content key after the write.
    pub content: u64,
}

/// What the watch saw last of one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Content key of the latest version.
    pub content: u64,
    /// Replica counts (Deployments only).
    pub replicas: Option<Replicas>,
}

/// A child: (kind, namespace, name).
type ChildKey = (&'static str, String, String);

#[derive(Debug, Default)]
struct State {
    written: HashMap<ChildKey, Written>,
    seen: HashMap<ChildKey, Seen>,
    /// Children listed so far by a relist in progress, per kind.
    relisting: HashMap<&'static str, HashMap<ChildKey, Seen>>,
}

/// The operator's writes and its watches' view of its children (shared, cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct OwnWrites(Arc<Mutex<State>>);

fn child_key<K: Resource>(kind: &'static str, obj: &K) -> ChildKey {
    (kind, obj.namespace().unwrap_or_default(), obj.name_any())
}

impl OwnWrites {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain maps behind: still usable.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the operator applied `kind` `namespace/name`.
    pub fn record(&self, kind: &'static str, namespace: &str, name: &str, written: Written) {
        self.state().written.insert((kind, namespace.to_owned(), name.to_owned()), written);
    }

    /// Whether `key` is the trigger key the operator's last write left on the child.
    pub fn is_own(&self, kind: &'static str, namespace: &str, name: &str, key: u64) -> bool {
        self.state().written.get(&(kind, namespace.to_owned(), name.to_owned())).is_some_and(|w| w.key == key)
    }

    /// Whether applying `desired` (a hash) to the child would change nothing: the operator
    /// applied the same object last, and the latest version seen still has its content.
    pub fn unchanged(&self, kind: &'static str, namespace: &str, name: &str, desired: u64) -> bool {
        let id = (kind, namespace.to_owned(), name.to_owned());
        let state = self.state();
        match (state.written.get(&id), state.seen.get(&id)) {
            (Some(w), Some(s)) => w.desired == desired && w.content == s.content,
            _ => false,
        }
    }

    /// The replica counts of the Deployment `namespace/name` as last seen.
    pub fn replicas(&self, kind: &'static str, namespace: &str, name: &str) -> Option<Replicas> {
        self.state().seen.get(&(kind, namespace.to_owned(), name.to_owned())).and_then(|s| s.replicas)
    }

    /// Takes in one watch event of children of `kind`; `seen` says what matters of one.
    pub fn observe<K: Resource>(&self, kind: &'static str, event: &watcher::Event<K>, seen: impl Fn(&K) -> Seen) {
        let mut state = self.state();
        match event {
            watcher::Event::Apply(obj) => {
                state.seen.insert(child_key(kind, obj), seen(obj));
            }
            watcher::Event::Delete(obj) => {
                let id = child_key(kind, obj);
                state.seen.remove(&id);
                state.written.remove(&id);
            }
            watcher::Event::Init => {
                state.relisting.insert(kind, HashMap::new());
            }
            watcher::Event::InitApply(obj) => {
                let (id, s) = (child_key(kind, obj), seen(obj));
                if let Some(listed) = state.relisting.get_mut(kind) {
                    listed.insert(id.clone(), s);
                }
                state.seen.insert(id, s);
            }
            watcher::Event::InitDone => {
                // The list is the whole truth: children missing from it were deleted while
                // the watch was down, so forget them and what was written to them.
                let listed = state.relisting.remove(kind).unwrap_or_default();
                let State { written, seen, .. } = &mut *state;
                seen.retain(|id, _| id.0 != kind || listed.contains_key(id));
                written.retain(|id, _| id.0 != kind || listed.contains_key(id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
            ..Default::default()
        }
    }

    fn seen(content: u64) -> impl Fn(&ConfigMap) -> Seen {
        move |_| Seen { content, replicas: None }
    }

    const WRITTEN: Written = Written { desired: 7, key: 1, content: 1 };

    #[test]
    fn a_child_is_unchanged_only_while_it_has_what_the_operator_wrote() {
        let own = OwnWrites::default();
        assert!(!own.unchanged("ConfigMap", "ns", "a", 7), "never written");
        own.record("ConfigMap", "ns", "a", WRITTEN);
        assert!(!own.unchanged("ConfigMap", "ns", "a", 7), "its own watch event not seen yet");
        own.observe("ConfigMap", &watcher::Event::Apply(cm("a")), seen(1));
        assert!(own.unchanged("ConfigMap", "ns", "a", 7));
        assert!(own.is_own("ConfigMap", "ns", "a", 1));
        assert!(!own.unchanged("ConfigMap", "ns", "a", 8), "another desired object");
        own.observe("ConfigMap", &watcher::Event::Apply(cm("a")), seen(2));
        assert!(!own.unchanged("ConfigMap", "ns", "a", 7), "edited by someone else");
        own.observe("ConfigMap", &watcher::Event::Apply(cm("a")), seen(1));
        own.observe("ConfigMap", &watcher::Event::Delete(cm("a")), seen(1));
        assert!(!own.unchanged("ConfigMap", "ns", "a", 7), "deleted");
        assert!(!own.is_own("ConfigMap", "ns", "a", 1));
    }

    #[test]
    fn a_relist_forgets_children_that_went_while_the_watch_was_down() {
        let own = OwnWrites::default();
        for name in ["a", "b"] {
            own.record("ConfigMap", "ns", name, WRITTEN);
            own.observe("ConfigMap", &watcher::Event::Apply(cm(name)), seen(1));
        }
        own.record("Service", "ns", "a", WRITTEN);
        own.observe("Service", &watcher::Event::Apply(cm("a")), seen(1));
        own.observe("ConfigMap", &watcher::Event::Init, seen(1));
        own.observe("ConfigMap", &watcher::Event::InitApply(cm("a")), seen(1));
        own.observe("ConfigMap", &watcher::Event::InitDone, seen(1));
        assert!(own.unchanged("ConfigMap", "ns", "a", 7));
        assert!(!own.unchanged("ConfigMap", "ns", "b", 7), "b was deleted during the gap");
        assert!(own.unchanged("Service", "ns", "a", 7), "other kinds are untouched");
    }
}
