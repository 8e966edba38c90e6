//! Support for Switchboard's integration and end-to-end tests: a real Kubernetes control
//! plane ([`cluster`]), per-test namespaces, and server-side apply of YAML files.

pub mod cluster;
pub mod manifests;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}
