//! `switchboard-runtime`: the runtime server, which serves one agent's sessions over the
//! session protocol (`switchboard runtime`, one agent per pod; local mode serves every agent
//! of a folder with it, behind the gateway's own code in the same process), and the tool
//! executors it runs for the agent core ([`tools`]). It knows nothing of the scenario
//! runner, local mode or the Bedrock simulator (the layering stage of `test.sh` holds that).
//!
//! Its modules, from the top: [`server`] is the axum app with limits and drain, [`state`]
//! what every request shares, [`connection`] serves one WebSocket through its socket task
//! (on the shared frame layer) and a reader that own its framing and limits; [`driver`] drives a text session and [`voice`] a voice
//! session, both performing the core's effects through one performer (`perform`) with what
//! [`agent`] holds (the agent, what every
//! session shares, how a session ends), [`tool_calls`], the session's [`trace`] and its
//! summaries; [`metrics`] and [`transcript`] record what happens, [`grants`] and
//! [`identity`] check what the gateway signed. Handoffs are the gateway's: a runtime that
//! hands off sends `handoff` and closes with 4000.

pub mod agent;
pub mod connection;
pub mod driver;
pub mod grants;
pub mod identity;
pub mod metrics;
mod perform;
mod reader;
pub mod server;
mod socket;
pub mod state;
mod summaries;
pub mod tool_calls;
pub mod tools;
pub mod trace;
pub mod transcript;
pub mod voice;

use std::path::Path;
use std::sync::Arc;

use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::Provider;

pub use agent::{AgentRuntime, Exit, Shared};
pub use metrics::Metrics;
pub use server::Server;
pub use state::{AppState, DEFAULT_VOICE_AUDIO_CHUNK, Directory, ServerConfig};

use crate::tools::ToolExecutor;
use switchboard_core::{AgentCore, ConfigError};
use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_models::fallback::{Route, WithFallbacks};
use switchboard_models::net::HttpClient;
use switchboard_models::openai::{ApiKey, OpenAiTextModel};

/// The OpenAI-compatible provider's key: a file of the credentials folder, or a variable.
const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
use switchboard_models::pool;
use switchboard_models::{ModelError, TextModel};

/// A runtime that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The spec file cannot be read.
    #[error("cannot read the runtime spec {path}: {message}; check --spec / SWITCHBOARD_RUNTIME_SPEC")]
    ReadSpec {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The spec is not a RuntimeSpec.
    #[error("{path}: {source}")]
    ParseSpec {
        /// The file.
        path: String,
        /// Why.
        source: switchboard_crds::runtime::RuntimeSpecError,
    },
    /// The spec lacks something the core needs.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model client cannot be built.
    #[error("cannot set up the model for agent {agent}: {source}")]
    Model {
        /// The agent.
        agent: String,
        /// Why.
        source: ModelError,
    },
}

/// Concurrent model calls planned per Bedrock client (HTTP/2 connection); servers commonly
/// allow 100-200 streams per connection.
pub const STREAMS_PER_CONNECTION: usize = 100;
/// Most Bedrock clients per agent.
pub const MAX_MODEL_CLIENTS: usize = 16;

/// Reads a RuntimeSpec file (JSON or YAML).
pub fn load_spec(path: &Path) -> Result<RuntimeSpec, RuntimeError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| RuntimeError::ReadSpec { path: path.display().to_string(), message: e.to_string() })?;
    RuntimeSpec::parse(&text).map_err(|source| RuntimeError::ParseSpec { path: path.display().to_string(), source })
}

/// Builds the text model of `spec`: Bedrock with `bedrock` (its endpoint and CA overrides
/// applied), or an OpenAI-compatible server at `model.endpoint` (bearer token from the
/// `OPENAI_API_KEY` environment variable when set) reached through `http`. With
/// `model.fallbacks`, calls the model cannot serve (throttled, unavailable) move on to
/// them in order ([`switchboard_models::fallback`]); a fallback in another region gets
/// clients of its own, at that region's endpoint (or at `bedrock`'s endpoint override:
/// the simulator), never at `model.endpoint`, which belongs to the agent's own region.
pub async fn build_model(
    spec: &RuntimeSpec,
    bedrock: &BedrockConfig,
    http: &HttpClient,
) -> Result<Arc<dyn TextModel>, RuntimeError> {
    let primary = build_client(spec, bedrock, http, None).await?;
    if spec.model.fallbacks.is_empty() {
        return Ok(primary);
    }
    let mut regional: std::collections::BTreeMap<String, Arc<dyn TextModel>> = Default::default();
    let mut routes = Vec::with_capacity(spec.model.fallbacks.len());
    for fallback in &spec.model.fallbacks {
        let region = fallback.region.clone().filter(|r| *r != spec.model.region);
        let client = match &region {
            None => primary.clone(),
            Some(region) => match regional.get(region) {
                Some(client) => client.clone(),
                None => {
                    let client = build_client(spec, bedrock, http, Some(region)).await?;
                    regional.insert(region.clone(), client.clone());
                    client
                }
            },
        };
        routes.push(Route { client, model_id: fallback.model_id.clone(), region });
    }
    Ok(Arc::new(WithFallbacks::new(primary, routes)))
}

/// The text model client of `spec` in its own region, or in `region`.
async fn build_client(
    spec: &RuntimeSpec,
    bedrock: &BedrockConfig,
    http: &HttpClient,
    region: Option<&str>,
) -> Result<Arc<dyn TextModel>, RuntimeError> {
    match spec.model.provider {
        Provider::Bedrock => {
            let mut config = bedrock.clone();
            config.region = region.unwrap_or(&spec.model.region).to_owned();
            if config.endpoint_url.is_none() && region.is_none() {
                config.endpoint_url = spec.model.endpoint.clone();
            }
            // One SDK client multiplexes its calls over one HTTP/2 connection, whose
            // concurrent streams the server caps; spread the agent's sessions over several.
            let clients =
                pool::clients_for(spec.sessions.max_concurrent as usize, STREAMS_PER_CONNECTION, MAX_MODEL_CLIENTS);
            let mut models: Vec<Arc<dyn TextModel>> = Vec::with_capacity(clients);
            for _ in 0..clients {
                let model = BedrockTextModel::connect(&config)
                    .await
                    .map_err(|source| RuntimeError::Model { agent: spec.agent.name.clone(), source })?;
                models.push(Arc::new(model));
            }
            match pool::ClientPool::new(models, STREAMS_PER_CONNECTION) {
                Some(pool) => Ok(Arc::new(pool)),
                None => Err(RuntimeError::Model {
                    agent: spec.agent.name.clone(),
                    source: ModelError::Config { message: "no model client could be built".into() },
                }),
            }
        }
        Provider::Openai => {
            let Some(endpoint) = spec.model.endpoint.as_deref() else {
                return Err(RuntimeError::Model {
                    agent: spec.agent.name.clone(),
                    source: ModelError::Config { message: "provider openai needs model.endpoint".into() },
                });
            };
            // The mounted credentials Secret's key (read at each call), else the variable.
            let mounted =
                bedrock.credential_files.as_ref().map(|f| f.dir().join(OPENAI_API_KEY)).filter(|p| p.exists());
            let api_key = match mounted {
                Some(path) => Some(ApiKey::File(path)),
                None => std::env::var(OPENAI_API_KEY).ok().filter(|k| !k.is_empty()).map(ApiKey::Value),
            };
            let model = OpenAiTextModel::with_client(endpoint, api_key, http.clone())
                .map_err(|source| RuntimeError::Model { agent: spec.agent.name.clone(), source })?;
            Ok(Arc::new(model))
        }
    }
}

/// Prepares one agent.
pub fn agent_runtime(
    spec: RuntimeSpec,
    model: Arc<dyn TextModel>,
    executor: Arc<dyn ToolExecutor>,
) -> Result<Arc<AgentRuntime>, RuntimeError> {
    let core = Arc::new(AgentCore::new(spec)?);
    Ok(Arc::new(AgentRuntime { core, model, executor, variant: None, variants: Default::default() }))
}

/// The runtimes of `spec`'s variants, by name: each its own core, and its own text model
/// when it names another (`model`, the Agent's, otherwise).
async fn variant_runtimes(
    spec: &RuntimeSpec,
    model: &Arc<dyn TextModel>,
    bedrock: &BedrockConfig,
    http: &HttpClient,
    executor: &Arc<dyn ToolExecutor>,
) -> Result<std::collections::BTreeMap<String, Arc<AgentRuntime>>, RuntimeError> {
    let mut variants = std::collections::BTreeMap::new();
    for variant in &spec.variants {
        let Some(varied) = spec.variant(&variant.name) else { continue };
        let model = match variant.text_model_id {
            Some(_) => build_model(&varied, bedrock, http).await?,
            None => model.clone(),
        };
        let core = Arc::new(AgentCore::new(varied)?);
        let runtime = AgentRuntime {
            core,
            model,
            executor: executor.clone(),
            variant: Some(variant.name.clone()),
            variants: Default::default(),
        };
        variants.insert(variant.name.clone(), Arc::new(runtime));
    }
    Ok(variants)
}

/// The state of a server for one agent, as a runtime pod serves it: `spec`'s text model
/// (and its Nova Sonic client for voice and hybrid agents) with `bedrock`, tools run by
/// `executor`, handoffs left to the gateway.
pub async fn single_agent(
    spec: RuntimeSpec,
    bedrock: &BedrockConfig,
    http: &HttpClient,
    executor: Arc<dyn ToolExecutor>,
    config: ServerConfig,
    shared: Shared,
) -> Result<Arc<AppState>, RuntimeError> {
    let model = build_model(&spec, bedrock, http).await?;
    let name = spec.agent.name.clone();
    let mut voice = std::collections::BTreeMap::new();
    if spec.mode.has_audio() {
        let model = voice::VoiceModel::connect(&spec, bedrock)
            .await
            .map_err(|source| RuntimeError::Model { agent: name.clone(), source })?;
        voice.insert(name.clone(), Arc::new(model));
    }
    let regions = match fallback_region(&spec, bedrock).await {
        Ok(Some(regional)) => [(name.clone(), regional)].into_iter().collect(),
        Ok(None) => std::collections::BTreeMap::new(),
        Err(source) => return Err(RuntimeError::Model { agent: name.clone(), source }),
    };
    let variants = variant_runtimes(&spec, &model, bedrock, http, &executor).await?;
    let core = Arc::new(AgentCore::new(spec)?);
    let agent = Arc::new(AgentRuntime { core, model, executor, variant: None, variants });
    let directory = Directory {
        agents: [(name.clone(), agent)].into_iter().collect(),
        default_agent: Some(name),
        allow_unexposed: true,
    };
    Ok(AppState::with_regions(directory, config, shared, voice, regions))
}

/// The Nova Sonic clients of a voice or hybrid `spec` in its fallback region
/// (`model.voiceFallback.region`, when it is another region): a session the gateway placed
/// there opens its streams with them, with the fallback's model, and no further fallback.
pub async fn fallback_region(
    spec: &RuntimeSpec,
    bedrock: &BedrockConfig,
) -> Result<Option<state::RegionalVoice>, switchboard_models::ModelError> {
    let Some(fallback) = spec.model.voice_fallback.as_ref().filter(|_| spec.mode.has_audio()) else {
        return Ok(None);
    };
    let Some(region) = fallback.region.clone().filter(|region| *region != spec.model.region) else {
        return Ok(None);
    };
    let model_id = fallback.model_id.clone().unwrap_or_else(|| spec.model.voice_model_id.clone());
    let mut there = spec.clone();
    there.model.region = region.clone();
    there.model.voice_model_id = model_id.clone();
    // The endpoint override belongs to the agent's own region; no fallback from the fallback.
    there.model.endpoint = None;
    there.model.voice_fallback = None;
    let model = voice::VoiceModel::connect(&there, bedrock).await?;
    Ok(Some(state::RegionalVoice { region, model_id, model: Arc::new(model) }))
}
