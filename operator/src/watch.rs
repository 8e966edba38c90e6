//! How the operator watches the API: every watch is scoped to the namespace it was given
//! (or all), lists in pages of [`LIST_PAGE_SIZE`], and the watches of owned children see
//! only the objects the operator labelled as an Agent's. Shared by `run`, the wiring of the
//! watches and the controllers that keep watches of their own.

use kube::runtime::watcher;
use kube::{Api, Client, Resource};

use crate::build::{AGENT_LABEL, MANAGED_BY};

/// An Api for every namespace, or for `namespace` only.
pub fn scoped<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Objects per page of a watch's initial list (and relist). The default, 500, means
/// holding 500 parsed objects at once per watch at start-up; smaller pages cost a few more
/// requests and keep the start-up memory peak low.
pub const LIST_PAGE_SIZE: u32 = 100;

/// The watch configuration of Agents, Personas and Workflows.
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE_SIZE)
}

/// The watch configuration of the owned children: only objects the operator labelled as
/// an Agent's (so not its own routing-table ConfigMap, whose every write would otherwise
/// come back through the ConfigMap watch).
pub fn owned_watch_config() -> watcher::Config {
    watch_config().labels(&format!("app.kubernetes.io/managed-by={},{}", MANAGED_BY, AGENT_LABEL))
}
