//! Local mode (`switchboard local <dir>`): every Agent of a folder of Agent / Persona /
//! Workflow YAML (the files `kubectl apply` takes) resolved with the API crate and run in
//! one process against the Bedrock simulator (or real Bedrock), with the demo tool servers
//! of the folder's optional `tools/local.yaml` started and their hosts routed to them.
//!
//! It is the cluster's data plane in one process, not a second implementation of it:
//! clients talk to the gateway's own code ([`switchboard_gateway`], with a routing table
//! of the folder's Agents and an in-memory session store), which opens each session on one
//! runtime server that serves every agent on a loopback port, signs the session context it
//! hands it with a key made at start, and performs handoffs, keeps memory and lets clients
//! resume exactly as on a cluster. Each Agent's `gateway.expose` holds here as there: a
//! client may start a session only with an exposed agent (or the default, by naming none);
//! the others are reached by handoff (the gateway refuses them with 4403 `not_exposed`).
//! Every agent is served over text; voice and hybrid agents also speak over Nova Sonic
//! when a session asks for audio (see [`switchboard_runtime::connection`]). The demo tool servers
//! verify the gateway's identity assertion as a bank's would: their account endpoints act
//! only for the caller it names, for the folder's Agents (their namespaces are the ones the
//! servers trust; [`switchboard_demo_tools`]). Bound to loopback, local mode serves its record,
//! agent list, metrics and page without credentials, but only to requests that name it by
//! address or as `localhost` (`hosts`): not to a web page that pointed its own name here.
//!
//! Phones too, when asked ([`Servers::serve_sip`]): the SIP edge ([`switchboard_sip_edge`])
//! runs in this process as on a cluster, a client of this gateway's `/v1/session` on
//! loopback, so a softphone calls `sip:<agent>@<address>` and talks to the same YAML
//! offline. No trunks are configured: any caller that reaches the address may call (it is
//! loopback unless asked otherwise), and no caller's number is trusted. The edge's metrics
//! (`switchboard_sip_*`) are served on the gateway's `/metrics` after the runtime's.

pub use switchboard_console::{agents, web};

mod folder;
mod hosts;
pub mod outage;
mod servers;
pub use folder::{DemoToolServer, LOCAL_FILE, LocalFile, SECRETS_FOLDER, read_local_file};
pub use servers::{LocalSip, Servers};

use folder::{load_specs, start_demo_tools};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchboard_core::grant::GatewaySigner;
use switchboard_crds::routing::{Route, RouteOutage, RoutingTable};
use switchboard_gateway::auth::Auth;
use switchboard_gateway::server::Server as GatewayServer;
use switchboard_gateway::{Gateway, GatewayConfig};
use switchboard_webrtc_edge::{Edge, WebrtcConfig};
use tokio::sync::watch;

use switchboard_demo_tools::{DemoTools, Trusted};
use switchboard_models::RetryPolicy;
use switchboard_models::bedrock::BedrockConfig;
use switchboard_models::net::Trust;
use switchboard_runtime::tools::{Executor, ExecutorOptions};
use switchboard_runtime::transcript::TranscriptSink;
use switchboard_runtime::{self as runtime, Directory, Metrics, Server, ServerConfig, Shared};
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator, banking_script};

/// How to run local mode.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// Where to serve sessions.
    pub listen: SocketAddr,
    /// Use real Bedrock (default AWS credential chain) instead of the simulator.
    pub bedrock: bool,
    /// The simulator's script; `None` uses the bundled banking script.
    pub sim_script: Option<PathBuf>,
    /// Where transcripts go.
    pub transcripts: Option<PathBuf>,
    /// Limits.
    pub server: ServerConfig,
    /// Extra PEM CA certificates for https:// tool, MCP and model servers.
    pub ca_file: Option<PathBuf>,
    /// The key the in-process gateway signs session context with; `None` makes a fresh
    /// one (tests pass theirs to sign context for the runtime themselves).
    pub gateway_key: Option<GatewaySigner>,
    /// The model quota of the in-process gateway (none by default: sessions are not counted).
    pub capacity: switchboard_gateway::capacity::CapacityConfig,
    /// The WebRTC edge's ICE-TCP listener, the fallback for clients whose network blocks UDP
    /// (the gateway's `--webrtc-tcp`; port 0: any free port); `None`: UDP only. Its candidate
    /// is at the address UDP's is (the loopback one where `listen` is every address).
    pub webrtc_tcp: Option<SocketAddr>,
    /// How outbound calls' status callbacks are signed and sent (the gateway's
    /// `--calls-webhook-secret-file`); `None`: a call naming one is refused.
    pub call_webhooks: Option<switchboard_gateway::calls::webhook::CallWebhookConfig>,
}

impl Default for LocalOptions {
    /// An ephemeral loopback port, the simulator with its bundled banking script, no
    /// transcripts, the default limits, no extra CA certificates, a fresh gateway key, and
    /// ICE-TCP on beside WebRTC's UDP, on any free loopback port.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bedrock: false,
            sim_script: None,
            transcripts: None,
            server: ServerConfig::default(),
            ca_file: None,
            gateway_key: None,
            capacity: switchboard_gateway::capacity::CapacityConfig::default(),
            webrtc_tcp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            call_webhooks: None,
        }
    }
}

/// Local mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The folder could not be read.
    #[error(transparent)]
    Load(#[from] switchboard_crds::LoadError),
    /// An agent is invalid.
    #[error("agent {agent} is not valid:\n{problems}")]
    Invalid {
        /// The agent.
        agent: String,
        /// What is wrong, one per line.
        problems: String,
    },
    /// No agents in the folder.
    #[error("{0} has no Agent resources")]
    NoAgents(String),
    /// `local.yaml` is unusable.
    #[error("{path}: {message}")]
    LocalFile {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Something else failed to start.
    #[error("{0}")]
    Start(String),
    /// Serving failed.
    #[error("local mode stopped: {0}")]
    Serve(String),
}

/// Running local mode.
#[derive(Debug)]
pub struct Local {
    /// The gateway and the runtime behind it (run them with [`Servers::run`]).
    pub server: Servers,
    /// The agents served, with the default first.
    pub agents: Vec<String>,
    /// Those of [`Local::agents`] a client cannot start a session with
    /// (`gateway.expose: false`, not the default): they are reached by handoff.
    pub by_handoff: Vec<String>,
    /// The default agent.
    pub default_agent: Option<String>,
    /// The simulator, when used.
    pub sim: Option<SimHandle>,
    /// Demo tool servers started.
    pub demo_tools: Vec<(String, DemoTools)>,
    /// The WebRTC edge (`POST /v1/webrtc`): its UDP and ICE-TCP addresses, its metrics.
    pub webrtc: Arc<Edge>,
}

/// Loads `dir`, starts the simulator (unless `bedrock`), demo tool servers and binds the server.
pub async fn start(dir: &Path, options: LocalOptions) -> Result<Local, LocalError> {
    start_recording(dir, options, None).await
}

/// [`start`], keeping the conversation record of every session with `record`; what is said,
/// when it goes into traces (opted in), is redacted as the record is.
pub async fn start_recording(
    dir: &Path,
    options: LocalOptions,
    record: Option<Arc<switchboard_record::Recorder>>,
) -> Result<Local, LocalError> {
    let redact = record.as_ref().map(|record| record.redactor.clone()).unwrap_or_default();
    start_redacting(dir, options, record, redact).await
}

/// [`start_recording`], redacting what goes into traces (opted in) with `redact`'s rules
/// and each Agent's own, with or without a record (`switchboard local` gives its
/// `--record-redact` rules).
pub async fn start_redacting(
    dir: &Path,
    options: LocalOptions,
    record: Option<Arc<switchboard_record::Recorder>>,
    redact: switchboard_record::Redactor,
) -> Result<Local, LocalError> {
    let (specs, outages) = load_specs(dir)?;
    let (local, base) = read_local_file(dir)?;
    let key = match options.gateway_key.clone() {
        Some(key) => key,
        None => fresh_key()?,
    };
    let namespaces: std::collections::BTreeSet<&str> = specs.iter().map(|s| s.agent.namespace.as_str()).collect();
    let trusted = Trusted::new(key.public().into(), namespaces).map_err(start_error)?;
    let (aliases, demo) = start_demo_tools(&local, &base, trusted).await?;
    let (sim, bedrock) = start_bedrock(&options).await?;
    let trust = Trust::from_file(options.ca_file.as_deref()).map_err(start_error)?;
    let http = trust.client().map_err(start_error)?;
    // Tools' secretHeaders read their values from <dir>/tools/secrets/<secret>/<key>.
    let secrets = switchboard_runtime::tools::secrets::SecretFiles::new(dir.join(SECRETS_FOLDER));
    let executor = Executor::new(ExecutorOptions { trust, aliases, secrets, ..ExecutorOptions::default() })
        .map_err(start_error)?;
    let executor = Arc::new(executor);
    let mut agents = BTreeMap::new();
    let mut voice_models = BTreeMap::new();
    let mut voice_regions = BTreeMap::new();
    let mut default_agent = None;
    for mut spec in specs {
        if !options.bedrock {
            // The simulator replaces whatever endpoint the agent names.
            spec.model.endpoint = None;
            spec.model.provider = switchboard_crds::agent::Provider::Bedrock;
        }
        // One process serves every agent here: size each agent's model client pool for
        // the server's session limit rather than for one pod's.
        spec.sessions.max_concurrent = u32::try_from(options.server.max_sessions).unwrap_or(u32::MAX);
        if spec.gateway.default {
            default_agent = Some(spec.agent.name.clone());
        }
        if spec.mode.has_audio() {
            let voice = runtime::voice::VoiceModel::connect(&spec, &bedrock)
                .await
                .map_err(|e| LocalError::Start(format!("agent {}: {e}", spec.agent.name)))?;
            voice_models.insert(spec.agent.name.clone(), Arc::new(voice));
            // A session the gateway places on the Agent's fallback region opens there.
            let regional = runtime::fallback_region(&spec, &bedrock)
                .await
                .map_err(|e| LocalError::Start(format!("agent {}: {e}", spec.agent.name)))?;
            if let Some(regional) = regional {
                voice_regions.insert(spec.agent.name.clone(), regional);
            }
        }
        let model = runtime::build_model(&spec, &bedrock, &http).await.map_err(start_error)?;
        let name = spec.agent.name.clone();
        let agent = runtime::agent_runtime(spec, model, executor.clone()).map_err(start_error)?;
        agents.insert(name, agent);
    }
    let mut names: Vec<String> = agents.keys().cloned().collect();
    if let Some(default) = &default_agent {
        names.retain(|n| n != default);
        names.insert(0, default.clone());
    }
    let table = routing_table(&agents, default_agent.as_deref(), outages);
    // The gateway decides exposure; the runtime serves whatever agent its signed grant names.
    let directory = Directory { agents, default_agent: default_agent.clone(), allow_unexposed: true };
    let metrics = Metrics::new().map_err(start_error)?;
    let shared = Shared {
        metrics,
        transcripts: options.transcripts.clone().map(TranscriptSink::start),
        retry: RetryPolicy::default(),
        redact: Arc::new(redact),
    };
    // Only the gateway talks to the runtime: it accepts the context the gateway signs.
    let runtime_config = ServerConfig { gateway_key: Some(key.public().into()), ..options.server.clone() };
    let state = runtime::AppState::with_regions(directory, runtime_config, shared, voice_models, voice_regions);
    let list = agent_list(&state, &names, default_agent.clone());
    let by_handoff = list.by_handoff.iter().map(|agent| agent.name.clone()).collect();
    let runtime = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), state).await.map_err(start_error)?;
    let (gateway, routes) = gateway(&options, key, table, runtime.local_addr().map_err(start_error)?, record)?;
    let routes = Arc::new(routes);
    outage::watch(dir, &routes);
    let runtime_state = runtime.state();
    let live = switchboard_console::live::routes(gateway.clone());
    let own = hosts::this_machine_only(web::routes(list).merge(live), gateway.clone());
    // The WebRTC edge on the machine's own address, any free UDP port, and ICE-TCP as asked.
    let webrtc = WebrtcConfig { tcp: options.webrtc_tcp, ..WebrtcConfig::on(options.listen.ip()) };
    let edge = Edge::bind(&webrtc, gateway.config.max_message_bytes).await.map_err(start_error)?;
    // The SIP edge's metrics, once [`Servers::serve_sip`] starts it, after the runtime's.
    let sip_metrics: Arc<std::sync::OnceLock<switchboard_sip_edge::Metrics>> = Arc::default();
    let sip_rendered = sip_metrics.clone();
    let gateway = GatewayServer::bind(options.listen, gateway)
        .await
        .map_err(start_error)?
        .with_channel(edge.clone())
        .with_routes(own)
        .with_more_metrics(Arc::new(move || {
            let sip = sip_rendered.get().map(switchboard_sip_edge::Metrics::render).unwrap_or_default();
            runtime_state.shared.metrics.render() + &sip
        }));
    Ok(Local {
        server: Servers::new(gateway, runtime, routes, sip_metrics),
        agents: names,
        by_handoff,
        default_agent,
        sim,
        demo_tools: demo,
        webrtc: edge,
    })
}

/// A signing key from the operating system's randomness.
fn fresh_key() -> Result<GatewaySigner, LocalError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| LocalError::Start(format!("no randomness for the gateway key: {e}")))?;
    Ok(GatewaySigner::from_seed(&seed))
}

/// The routing table of local mode: every agent, at the runtime server (whose address the
/// gateway's directory gives), as the operator would publish it: exposed to clients as its
/// `gateway.expose` says, with the outage mode of each Agent that has one.
fn routing_table(
    agents: &BTreeMap<String, Arc<runtime::AgentRuntime>>,
    default_agent: Option<&str>,
    outages: BTreeMap<String, RouteOutage>,
) -> RoutingTable {
    let routes = agents
        .values()
        .map(|agent| {
            let spec = agent.core.spec();
            Route { default: default_agent == Some(spec.agent.name.as_str()), ..Route::ready_at(spec, "127.0.0.1", 0) }
        })
        .collect();
    RoutingTable { outages, ..RoutingTable::new(routes) }
}

/// The in-process gateway: `table`'s agents all at `runtime`, the local limits, no client
/// credentials (loopback), pages of this server and the listed origins only, sessions kept
/// in memory for resume.
fn gateway(
    options: &LocalOptions,
    key: GatewaySigner,
    table: RoutingTable,
    runtime: SocketAddr,
    record: Option<Arc<switchboard_record::Recorder>>,
) -> Result<(Arc<Gateway>, watch::Sender<switchboard_gateway::Directory>), LocalError> {
    let endpoints = table.routes.iter().map(|r| ((r.namespace.clone(), r.name.clone()), vec![runtime])).collect();
    let directory = switchboard_gateway::Directory::new(Arc::new(table), Arc::new(endpoints), None);
    let (routes, receiver) = watch::channel(directory);
    let auth = Auth::new(None, options.server.allowed_origins.clone()).map_err(start_error)?.with_own_page();
    // The record of this machine's sessions is this machine's to read: open on loopback only,
    // and only to requests that name this machine by address or as localhost (not to a web
    // page that pointed its own name here): the rule of the record, /metrics and the page.
    let auth = if options.listen.ip().is_loopback() { auth.with_open_records().with_open_tests() } else { auth };
    let config = GatewayConfig {
        max_message_bytes: options.server.max_message_bytes,
        max_sessions: options.server.max_sessions,
        drain_timeout: options.server.drain_timeout,
        idle_timeout: options.server.idle_timeout,
        capacity: options.capacity.clone(),
        call_webhooks: options.call_webhooks.clone(),
        // The caller's audio gathered as the runtime here would gather it for its events.
        audio_batch: options.server.voice_audio_chunk,
        ..GatewayConfig::default()
    };
    let store = switchboard_gateway::resume::Store::default();
    let gateway = match record {
        Some(record) => Gateway::recording(config, receiver, key, auth, store, record),
        None => Gateway::new(config, receiver, key, auth, store),
    }
    .map_err(start_error)?;
    Ok((gateway, routes))
}

fn start_error(error: impl std::fmt::Display) -> LocalError {
    LocalError::Start(error.to_string())
}

/// The Bedrock settings: real Bedrock (`--bedrock`), or a simulator started here.
async fn start_bedrock(options: &LocalOptions) -> Result<(Option<SimHandle>, BedrockConfig), LocalError> {
    if options.bedrock {
        return Ok((None, BedrockConfig::new("us-east-1")));
    }
    let script = match &options.sim_script {
        Some(path) => Script::load(path).map_err(start_error)?,
        None => banking_script().map_err(start_error)?,
    };
    let handle = Simulator::start(SimConfig::new(script)).await.map_err(start_error)?;
    let config = BedrockConfig::simulator(handle.endpoint_url(), handle.ca_cert_path());
    Ok((Some(handle), config))
}

/// The agents the web page lists, from the specs the runtime serves (see [`web::AgentList::new`]).
fn agent_list(state: &runtime::AppState, names: &[String], default: Option<String>) -> web::AgentList {
    let specs = names.iter().filter_map(|name| state.directory.agents.get(name)).map(|agent| agent.core.spec());
    web::AgentList::new(specs, default)
}
