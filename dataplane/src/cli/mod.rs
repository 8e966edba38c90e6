//! The command line: global options, the subcommands (one module each), logging setup
//! and shutdown signals shared by the long-running subcommands.

mod app_context;
mod call;
mod call_webhook;
mod callers;
mod capacity;
mod chat;
mod demo_tools;
mod gateway;
mod gateway_auth;
mod load;
#[cfg(feature = "local")]
mod local;
mod record;
mod runtime;
mod sessions;
#[cfg(feature = "local")]
mod sim;
mod sip;
mod sip_outbound;
mod test;
mod turn;
mod variants;
mod watch;

use clap::{Args, Parser, Subcommand};
use switchboard_telemetry::LogFormat;

/// Switchboard's data plane: runtime pods, local mode and the Bedrock simulator.
///
/// `runtime` serves one agent (what a runtime pod runs), `gateway` is the one endpoint
/// clients talk to on a cluster,
/// `local` runs a folder of agents on this machine against the Bedrock simulator, `sim`
/// runs the simulator alone, `chat` talks to an agent from the terminal, `demo-tools` serves
/// the Example Bank's tool server, `test` runs scenario tests of agents' behaviour, `load`
/// load-tests a gateway with simulated callers. (`local`
/// and `sim` exist in builds with the `local` feature, the default; the shipping image
/// leaves them out, and its `test` needs `--gateway`.)
#[derive(Debug, Parser)]
#[command(name = "switchboard", version)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or
    /// `switchboard_runtime=debug,info`. `RUST_LOG` takes precedence when set.
    #[arg(long, env = "SWITCHBOARD_LOG", default_value = "info", global = true)]
    pub log: String,

    /// Log lines as `text` (for a terminal) or `json` (one object per line, for a log
    /// collector; the operator sets it on runtime pods). Colour codes only on a terminal.
    #[arg(long, env = switchboard_crds::contract::env::LOG_FORMAT, value_enum, default_value_t, global = true)]
    pub log_format: LogFormat,

    /// Threads that run the async work (tokio workers). Default: one per CPU this process
    /// may use (a cgroup CPU limit counts). A runtime pod is best sized from its CPU
    /// request — the operator sets it so — because every extra worker costs wake-ups
    /// between threads: one worker used ~18 % less CPU per text turn than two
    /// (benchmarks/HISTORY.md, "Session 5").
    #[arg(long, env = switchboard_crds::contract::env::WORKER_THREADS, global = true,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,

    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the local Bedrock Runtime simulator.
    #[cfg(feature = "local")]
    Sim(sim::SimArgs),
    /// Serve one agent (a RuntimeSpec) over the session protocol: what a runtime pod runs.
    Runtime(Box<runtime::RuntimeArgs>),
    /// The session gateway: one endpoint for every agent of the cluster.
    Gateway(Box<gateway::GatewayArgs>),
    /// Run every agent of a folder locally, against the simulator by default.
    #[cfg(feature = "local")]
    Local(Box<local::LocalArgs>),
    /// Chat with an agent from the terminal.
    Chat(chat::ChatArgs),
    /// Serve the Example Bank demo tool server.
    DemoTools(demo_tools::DemoToolsArgs),
    /// Run scenario tests of agents (YAML next to them, e.g. examples/banking/tests)
    /// against local mode or a gateway; exits non-zero when one fails.
    ///
    /// The report goes to stdout; only warnings are logged unless --log (or
    /// SWITCHBOARD_LOG) asks for more. The README's "Scenario tests" section describes the
    /// scenario files.
    Test(Box<test::TestArgs>),
    /// Read the conversation record: recorded sessions (`list`) and everything that
    /// happened in one (`show`).
    Sessions(sessions::SessionsArgs),
    /// The callers the record keeps across sessions: `delete` forgets one on request.
    Callers(callers::CallersArgs),
    /// An Agent's variants (`spec.variants`) compared from the record: resolved,
    /// transferred to a person, duration, cost and the analysis's answers.
    Variants(variants::VariantsArgs),
    /// The SIP edge: phones and trunks call `sip:<agent>@host`, each call one session at
    /// the gateway.
    Sip(Box<sip::SipArgs>),
    /// Place an outbound call through a gateway and its SIP edge (`POST /v1/calls`), and
    /// print its progress until it is over.
    Call(Box<call::CallArgs>),
    /// Load-test a gateway: simulated voice or text callers play scenario files at an
    /// arrival rate; reports time to first audio and token, handoff gaps, sessions
    /// completed, errors by code and capacity refusals; exits non-zero when a session did
    /// not complete.
    Load(Box<load::LoadArgs>),
}

impl Command {
    /// Runs the subcommand to completion.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            #[cfg(feature = "local")]
            Self::Sim(args) => sim::run(args).await,
            Self::Runtime(args) => runtime::run(*args).await,
            Self::Gateway(args) => gateway::run(*args).await,
            #[cfg(feature = "local")]
            Self::Local(args) => local::run(*args).await,
            Self::Chat(args) => chat::run(args).await,
            Self::DemoTools(args) => demo_tools::run(args).await,
            Self::Test(args) => test::run(*args).await,
            Self::Sessions(args) => sessions::run(args).await,
            Self::Callers(args) => callers::run(args).await,
            Self::Variants(args) => variants::run(args).await,
            Self::Sip(args) => sip::run(*args).await,
            Self::Call(args) => call::run(*args).await,
            Self::Load(args) => load::run(*args).await,
        }
    }

    /// The log filter this subcommand uses when `--log` (or `SWITCHBOARD_LOG`) is not
    /// given: `test` prints a report on stdout, so only warnings are logged.
    pub fn default_log(&self) -> Option<&'static str> {
        match self {
            Self::Test(_)
            | Self::Load(_)
            | Self::Sessions(_)
            | Self::Callers(_)
            | Self::Variants(_)
            | Self::Call(_) => Some("warn"),
            _ => None,
        }
    }
}

/// Voice options shared by `runtime` and `local`.
#[derive(Debug, Args)]
pub struct VoiceArgs {
    /// Age in seconds at which a voice session's Nova Sonic stream is replaced by a fresh
    /// one (at the next turn boundary, with the conversation replayed), ahead of the
    /// service's 8-minute stream limit.
    #[arg(long, env = "SWITCHBOARD_VOICE_ROTATE_AFTER_SECONDS", default_value_t = 360,
          value_parser = clap::value_parser!(u64).range(1..=470))]
    voice_rotate_after_seconds: u64,
    /// Milliseconds of the caller's audio sent to the voice model per event: frames are
    /// gathered until this much has come or the first has waited this long (fewer events
    /// per call, less CPU; each frame reaches the model at most this much later). 0 sends
    /// each frame as it comes.
    #[arg(long, env = "SWITCHBOARD_VOICE_AUDIO_CHUNK_MS",
          default_value_t = switchboard_runtime::DEFAULT_VOICE_AUDIO_CHUNK.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(0..=200))]
    voice_audio_chunk_ms: u64,
}

impl VoiceArgs {
    /// The stream age at which to rotate.
    pub fn rotate_after(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.voice_rotate_after_seconds)
    }

    /// The caller's audio per event to the voice model.
    pub fn audio_chunk(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.voice_audio_chunk_ms)
    }
}

/// Takes SIGINT (Ctrl-C) and SIGTERM over from now on, and returns what resolves on the
/// first. Call it before the server answers anyone: until a handler is installed, SIGTERM
/// kills the process on the spot (no drain, every connection reset), and a handler that an
/// `async fn` installed on its first poll left that window open while the server already
/// answered (a runtime killed by a quick SIGTERM, seen in `runtime_binary`).
pub fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use anyhow::Context as _;
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
