//! Support for Switchboard's integration and end-to-end tests: a real Kubernetes control
//! plane ([`cluster`]), per-test namespaces, server-side apply of YAML files, the operator
//! running in-process ([`operator`]), the Helm chart ([`helm`]), a stand-in for the kubelet ([`kubelet`]), the
//! `switchboard` binary's processes ([`switchboard`]), ports for the other programs tests
//! start ([`ports`]) and polling ([`wait`]).

pub mod api_proxy;
pub mod cluster;
pub mod helm;
pub mod kubelet;
pub mod manifests;
pub mod operator;
// One file for every test crate's harnesses (see its header).
#[path = "../../dataplane/tests/support/ports.rs"]
pub mod ports;
#[cfg(test)]
mod ports_tests;
pub mod process;
pub mod switchboard;
pub mod wait;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}
