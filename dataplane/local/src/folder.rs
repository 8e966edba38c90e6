//! What local mode reads from a folder: its Agents, resolved with the API crate (with
//! each one's outage mode, as the operator publishes it), and `tools/local.yaml` — the demo
//! tool servers to start and the host routes of the folder's tools.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchboard_crds::routing::RouteOutage;
use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_demo_tools::{Accounts, Callers, DemoTools, Trusted};

use crate::{LocalError, start_error};

/// The file local mode reads, relative to the folder. It sits in a subfolder because
/// `kubectl apply -f <dir>` takes every top-level YAML file as a Kubernetes object.
pub const LOCAL_FILE: &str = "tools/local.yaml";

/// Where local mode reads the values of tools' `secretHeaders`, relative to the folder:
/// `tools/secrets/<secret>/<key>`, one file per key, as a pod sees its mounted Secrets.
pub const SECRETS_FOLDER: &str = "tools/secrets";

/// `tools/local.yaml`: tool servers to start and host routes.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalFile {
    /// Demo tool servers to start.
    #[serde(default)]
    pub demo_tool_servers: Vec<DemoToolServer>,
    /// Tool host -> `host:port`.
    #[serde(default)]
    pub host_aliases: BTreeMap<String, String>,
}

/// A demo tool server of `local.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DemoToolServer {
    /// The host name tool URLs use for it.
    pub host: String,
    /// Its fixture data, relative to the folder of `local.yaml`.
    pub data: PathBuf,
}

/// Reads `dir`'s `tools/local.yaml`, if present; returns it with the folder its relative
/// paths start from.
pub fn read_local_file(dir: &Path) -> Result<(LocalFile, PathBuf), LocalError> {
    let path = dir.join(LOCAL_FILE);
    let base = path.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf());
    if !path.exists() {
        return Ok((LocalFile::default(), base));
    }
    let error = |message: String| LocalError::LocalFile { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| error(e.to_string()))?;
    let file = serde_yaml::from_str(&text).map_err(|e| error(e.to_string()))?;
    Ok((file, base))
}

/// Every Agent of `dir`, resolved; every problem of an invalid one. With them, the outage
/// mode of each Agent that has one (`spec.outage`), by `namespace/name`, as the operator
/// publishes it in the routing table.
pub(crate) fn load_specs(dir: &Path) -> Result<(Vec<RuntimeSpec>, BTreeMap<String, RouteOutage>), LocalError> {
    let catalog = Catalog::load_paths(&[dir])?;
    let mut specs = Vec::new();
    let mut outages = BTreeMap::new();
    for agent in catalog.agents() {
        let spec = catalog.resolve_agent(agent).map_err(|problems| LocalError::Invalid {
            agent: agent.metadata.name.clone().unwrap_or_default(),
            problems: problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"),
        })?;
        if let Some(outage) = RouteOutage::of(&agent.spec) {
            outages.insert(format!("{}/{}", spec.agent.namespace, spec.agent.name), outage);
        }
        specs.push(spec);
    }
    if specs.is_empty() {
        return Err(LocalError::NoAgents(dir.display().to_string()));
    }
    Ok((specs, outages))
}

/// Starts the demo tool servers `local` names, acting for the callers that the identity
/// assertions `trusted` accepts name (the in-process gateway's, for the folder's Agents);
/// returns the host aliases that route the agents' tool URLs to them, and the servers.
pub(crate) async fn start_demo_tools(
    local: &LocalFile,
    base: &Path,
    trusted: Trusted,
) -> Result<(BTreeMap<String, String>, Vec<(String, DemoTools)>), LocalError> {
    let mut aliases = local.host_aliases.clone();
    let mut demo = Vec::new();
    for server in &local.demo_tool_servers {
        let accounts = Accounts::load(&base.join(&server.data)).map_err(start_error)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let callers = Callers::Verified(trusted.clone());
        let tools = DemoTools::start(accounts, addr, callers).await.map_err(start_error)?;
        aliases.insert(server.host.clone(), tools.addr.to_string());
        demo.push((server.host.clone(), tools));
    }
    Ok((aliases, demo))
}
