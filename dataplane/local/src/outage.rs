//! Outage mode offline: `switchboard local` watches [`OUTAGE_FILE`] (`tools/outage.yaml` in
//! the folder) and applies it to its routing table as the operator applies a namespace's
//! `switchboard-outage` ConfigMap and an Agent's `spec.outage.active` — no restart, and the
//! gateway's own code does the rest: new sessions go to the fallback
//! (`bidi_session_fallback`, close 4513), sessions under way go on and are told
//! (`bidi_session_outage`).
//!
//! ```yaml
//! active: true                # every Agent of the folder (its namespaces' switch)
//! message: "Closed today."    # optional: for Agents without a fallback of their own
//! agents: [triage]            # optional: these Agents only (their own switch)
//! ```
//!
//! A missing file is off. A file that cannot be read (bad YAML, an unknown key or Agent, a
//! blank or over-long message) is logged with what to fix and counts as off, as an
//! unreadable ConfigMap does on a cluster. The file sits under `tools/` so that
//! `kubectl apply -f <folder>` never takes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use switchboard_crds::agent::Breaker;
use switchboard_crds::routing::{NamespaceOutage, RouteOutage, RoutingTable};
use switchboard_gateway::Directory;
use tokio::sync::watch;

/// The file, relative to the folder.
pub const OUTAGE_FILE: &str = "tools/outage.yaml";
/// How often the file is checked for changes.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);
/// The largest file read.
const MOST_BYTES: u64 = 64 * 1024;

/// `tools/outage.yaml`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutageFile {
    /// Every Agent of the folder goes to its fallback.
    #[serde(default)]
    pub active: bool,
    /// What Agents without a fallback of their own tell the caller.
    #[serde(default)]
    pub message: Option<String>,
    /// Only these Agents (by name) go to their fallback.
    #[serde(default)]
    pub agents: Vec<String>,
}

impl OutageFile {
    /// Parses the file's text; what is wrong, for people.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str(text).map_err(|e| e.to_string())
    }
}

/// `base` (the folder's own table) with `file` applied: its namespaces switched on when
/// `active`, and each of `agents` switched on (an Agent without `spec.outage` with the
/// file's message, no person and no breaker).
pub fn apply(base: &RoutingTable, file: &OutageFile) -> Result<RoutingTable, String> {
    let mut data = BTreeMap::from([("active".to_owned(), "true".to_owned())]);
    if let Some(message) = &file.message {
        data.insert("message".to_owned(), message.clone());
    }
    let switched = NamespaceOutage::from_data(&data)?.unwrap_or_default();
    let mut table = base.clone();
    for name in &file.agents {
        let Some(route) = base.routes.iter().find(|r| &r.name == name) else {
            let known: Vec<&str> = base.routes.iter().map(|r| r.name.as_str()).collect();
            return Err(format!("agents: {name:?} is not an Agent of the folder (it has {})", known.join(", ")));
        };
        let key = format!("{}/{}", route.namespace, route.name);
        let outage = table.outages.entry(key).or_insert_with(|| RouteOutage {
            active: true,
            person: None,
            message: switched.message.clone(),
            breaker: Breaker { enabled: false, ..Breaker::default() },
            text: false,
        });
        outage.active = true;
    }
    if file.active {
        let namespaces: BTreeSet<&str> = base.routes.iter().map(|r| r.namespace.as_str()).collect();
        for namespace in namespaces {
            table.namespace_outages.insert(namespace.to_owned(), switched.clone());
        }
    }
    Ok(table)
}

/// Reads the file (`None`: there is none).
fn read(path: &Path) -> Result<Option<OutageFile>, String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
        Ok(meta) if meta.len() > MOST_BYTES => return Err(format!("larger than {MOST_BYTES} bytes")),
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    OutageFile::parse(&text).map(Some)
}

/// What the file is now, for noticing a change: its time and size, or none.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Keeps `routes` (its first value the folder's own) in step with the file in `dir`, until
/// the sender is gone. Applies the file as it is at once.
pub fn watch(dir: &Path, routes: &Arc<watch::Sender<Directory>>) {
    let path = dir.join(OUTAGE_FILE);
    let base = routes.borrow().clone();
    let sender = Arc::downgrade(routes);
    let mut seen = stamp(&path);
    update(&path, &base, routes);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        loop {
            tick.tick().await;
            let Some(routes) = Weak::upgrade(&sender) else { return };
            let now = stamp(&path);
            if now != seen {
                seen = now;
                update(&path, &base, &routes);
            }
        }
    });
}

/// Applies the file at `path` to `base` and publishes it.
fn update(path: &Path, base: &Directory, routes: &watch::Sender<Directory>) {
    let table = match read(path).and_then(|file| file.map(|f| apply(base.table(), &f)).transpose()) {
        Ok(Some(table)) => {
            let on = switchboard_gateway::outage::notice::switched(&table);
            tracing::warn!(file = %path.display(), switched_on = ?on.keys().collect::<Vec<_>>(), "outage switch file applied");
            table
        }
        Ok(None) => base.table().clone(),
        Err(problem) => {
            tracing::warn!(file = %path.display(), "{problem}; until fixed the outage switch counts as off");
            base.table().clone()
        }
    };
    routes.send_replace(base.with_table(Arc::new(table)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RoutingTable {
        let route = |name: &str| -> switchboard_crds::routing::Route {
            // From YAML: only the fields this test needs are named.
            serde_yaml::from_str(&format!(
                "{{namespace: bank, name: {name}, mode: text, service: 127.0.0.1, port: 0, path: /v1/session, \
                 handoffs: [], expose: true, default: false, ready: true, readyReplicas: 1}}"
            ))
            .expect("a route")
        };
        let mut table = RoutingTable::new(vec![route("triage"), route("idv")]);
        table.outages.insert(
            "bank/triage".into(),
            RouteOutage {
                active: false,
                person: None,
                message: Some("Own.".into()),
                breaker: Breaker::default(),
                text: false,
            },
        );
        table
    }

    #[test]
    fn the_file_switches_the_folder_or_named_agents_on_and_says_what_is_wrong() {
        let file = OutageFile::parse("active: true\nmessage: Closed today.\n").expect("parses");
        let table = apply(&base(), &file).expect("applies");
        assert_eq!(table.outage_in_effect("bank", "idv").and_then(|o| o.message).as_deref(), Some("Closed today."));
        assert_eq!(table.outage_in_effect("bank", "triage").and_then(|o| o.message).as_deref(), Some("Own."));

        let file = OutageFile::parse("agents: [idv]").expect("parses");
        let table = apply(&base(), &file).expect("applies");
        assert!(table.outage_in_effect("bank", "idv").is_some_and(|o| o.active && !o.breaker.enabled));
        assert!(table.outage_in_effect("bank", "triage").is_some_and(|o| !o.active), "only those named");

        assert_eq!(OutageFile::parse("").expect("empty is off"), OutageFile::default());
        assert!(OutageFile::parse("activ: true").expect_err("unknown key").contains("activ"));
        let unknown = apply(&base(), &OutageFile { agents: vec!["nobody".into()], ..OutageFile::default() });
        assert!(unknown.expect_err("unknown agent").contains("triage"));
        let blank = apply(&base(), &OutageFile { active: true, message: Some("  ".into()), agents: vec![] });
        assert!(blank.expect_err("blank").contains("message"));
    }
}
