//! Routing without Kubernetes: a routing table file (the operator's format, see
//! `switchboard_crds::routing`) whose routes name the runtimes' addresses directly —
//! `service` a host name or IP, `port` its port. Each route's endpoints are the addresses
//! `service:port` resolves to; a route whose name does not resolve has none (its Agent has
//! no ready pod). The file is re-read, and the names resolved again, every
//! [`RELOAD_EVERY`] when it changed, so an edit takes effect without a restart.
//!
//! For a gateway on a VM or in Compose, and for the benchmarks; on a cluster the gateway
//! follows the operator's table and Endpoints ([`crate::watch`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use switchboard_crds::routing::RoutingTable;
use tokio::sync::watch;

use crate::Directory;

/// How often the file is checked for changes.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The routing file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("the routing table file {path}: {message}")]
pub struct RoutesFileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// Loads `path` and keeps the directory in step with it until every receiver is gone.
pub async fn from_file(
    path: PathBuf,
    default_agent: Option<String>,
) -> Result<watch::Receiver<Directory>, RoutesFileError> {
    let (directory, mut seen) = load(&path, default_agent.clone()).await?;
    let (tx, rx) = watch::channel(directory);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => return,
                () = tokio::time::sleep(RELOAD_EVERY) => {}
            }
            let modified = modified(&path);
            if modified == seen {
                continue;
            }
            seen = modified;
            match load(&path, default_agent.clone()).await {
                Ok((directory, _)) => {
                    tracing::info!(path = %path.display(), "routing table reloaded");
                    tx.send_replace(directory);
                }
                Err(error) => tracing::warn!("{error}; keeping the last routing table"),
            }
        }
    });
    Ok(rx)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

async fn load(path: &Path, default_agent: Option<String>) -> Result<(Directory, Option<SystemTime>), RoutesFileError> {
    let error = |message: String| RoutesFileError { path: path.to_owned(), message };
    let seen = modified(path);
    let text = tokio::fs::read_to_string(path).await.map_err(|e| error(e.to_string()))?;
    let table = RoutingTable::parse(&text).map_err(|e| error(e.to_string()))?;
    let mut endpoints: HashMap<(String, String), Vec<SocketAddr>> = HashMap::new();
    for route in &table.routes {
        let addrs = match tokio::net::lookup_host((route.service.as_str(), route.port)).await {
            Ok(addrs) => addrs.collect(),
            Err(e) => {
                tracing::warn!(agent = %route.name, service = %route.service, "cannot resolve: {e}; the agent has no endpoint");
                Vec::new()
            }
        };
        endpoints.insert((route.namespace.clone(), route.name.clone()), addrs);
    }
    Ok((Directory::new(Arc::new(table), Arc::new(endpoints), default_agent), seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn routes_name_their_runtimes_and_edits_take_effect() {
        let dir = std::env::temp_dir().join(format!("switchboard-static-routes-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("routes.json");
        let table = |port: u16| {
            serde_json::json!({
                "apiVersion": "switchboard.dev/v1alpha1", "kind": "RoutingTable",
                "routes": [
                    {"name": "triage", "namespace": "bank", "mode": "text", "service": "127.0.0.1", "port": port,
                     "path": "/v1/session", "handoffs": [], "expose": true, "default": true, "ready": true, "readyReplicas": 1},
                    {"name": "gone", "namespace": "bank", "mode": "text", "service": "no-such-host.invalid", "port": 1,
                     "path": "/v1/session", "handoffs": [], "expose": true, "default": false, "ready": true, "readyReplicas": 1}
                ]
            })
            .to_string()
        };
        std::fs::write(&path, table(9001)).expect("writes");
        let mut rx = from_file(path.clone(), None).await.expect("loads");
        let target = rx.borrow().for_client(None, crate::directory::Reach::Live).expect("the default agent");
        assert_eq!(target.ready, [SocketAddr::from(([127, 0, 0, 1], 9001))]);
        assert!(
            rx.borrow().for_client(Some("gone"), crate::directory::Reach::Live).is_err(),
            "an unresolvable service has no ready pod"
        );
        // An edit (a later modification time) is picked up.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        std::fs::write(&path, table(9002)).expect("rewrites");
        tokio::time::timeout(RELOAD_EVERY * 3, rx.changed()).await.expect("reloads in time").expect("changed");
        let target = rx.borrow().for_client(None, crate::directory::Reach::Live).expect("the default agent");
        assert_eq!(target.ready, [SocketAddr::from(([127, 0, 0, 1], 9002))]);
        // A broken file is refused at start, with its path.
        std::fs::write(&path, "{").expect("breaks");
        let error = from_file(path.clone(), None).await.expect_err("broken");
        assert!(error.to_string().contains("routes.json"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
