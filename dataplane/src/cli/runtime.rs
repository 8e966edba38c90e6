//! `switchboard runtime`: serves one agent (a RuntimeSpec file) over the session protocol
//! — the process a runtime pod runs. The flags, environment variables, port and paths are
//! a contract with the operator.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::error::display::DisplayErrorContext;
use clap::Args;
use switchboard_core::gateway_keys::GatewayKeys;
use switchboard_crds::agent::Provider;
use switchboard_crds::contract;
use switchboard_models::RetryPolicy;
use switchboard_models::bedrock::BedrockConfig;
use switchboard_models::bedrock::credential_files::CredentialFiles;
use switchboard_models::net::Trust;
use switchboard_runtime::tools::{Executor, ExecutorOptions};
use switchboard_runtime::transcript::TranscriptSink;
use switchboard_runtime::{self as runtime, Metrics, Server, ServerConfig, Shared};

/// Options of `switchboard runtime`.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// The RuntimeSpec (JSON or YAML) of the agent to serve.
    #[arg(long, env = contract::env::RUNTIME_SPEC, default_value = contract::RUNTIME_SPEC_PATH)]
    spec: PathBuf,

    /// `voice`, `text` or `hybrid`; when given, it must match the spec's mode. Voice and
    /// hybrid agents speak over Nova Sonic (the spec's `model.voiceModelId`) in sessions
    /// that ask for audio (`session_start.modalities` with `audio`); other sessions use the
    /// text model.
    #[arg(long, env = contract::env::MODE)]
    mode: Option<String>,

    /// Address to serve `/v1/session`, `/healthz`, `/readyz` and `/metrics` on.
    #[arg(long, env = contract::env::LISTEN, default_value = contract::LISTEN_ADDR)]
    listen: SocketAddr,

    /// Largest client message in bytes; larger ones close the session with 1009.
    #[arg(long, env = "SWITCHBOARD_MAX_MESSAGE_BYTES", default_value_t = 65536)]
    max_message_bytes: usize,

    /// Client messages per second a session may send on average (burst: twice this).
    /// Faster clients are closed with 1008.
    #[arg(long, env = "SWITCHBOARD_RATE_PER_SECOND", default_value_t = 20)]
    rate_per_second: u32,

    /// Most connections that have not yet sent a `session_start` whose grant was checked
    /// (sessions opening, clients being refused); more are answered HTTP 503 before the
    /// WebSocket upgrade. A session slot is taken only once the grant is checked.
    #[arg(long, env = "SWITCHBOARD_MAX_OPENING_CONNECTIONS", default_value_t = 64)]
    max_opening_connections: usize,

    /// Seconds a new connection has to send a `session_start` that passes the grant check;
    /// pings and other frames do not extend it. Slower ones are closed with 4408.
    #[arg(long, env = "SWITCHBOARD_START_TIMEOUT_SECONDS", default_value_t = 10)]
    start_timeout_seconds: u64,

    /// Most connections the listener holds at once (sessions' WebSockets, connections
    /// opening, probes, scrapes); more are answered HTTP 503 with `Retry-After: 1` and
    /// closed, and counted in `switchboard_errors_total{type="max_connections"}`. Default:
    /// the spec's `sessions.maxConcurrent` + `--max-opening-connections` + 64.
    #[arg(long, env = "SWITCHBOARD_MAX_CONNECTIONS")]
    max_connections: Option<usize>,

    /// Seconds a connection has to send a whole HTTP request head, from its start or from
    /// its previous response (so also how long an idle keep-alive connection stays open);
    /// slower ones are closed.
    #[arg(long, env = "SWITCHBOARD_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10)]
    header_read_timeout_seconds: u64,

    /// Directory for JSONL transcripts, one file per session; none are written when unset.
    #[arg(long, env = "SWITCHBOARD_TRANSCRIPTS_DIR")]
    transcripts_dir: Option<PathBuf>,

    /// A PEM CA certificate to trust for the Bedrock endpoint (e.g. the simulator's).
    #[arg(long, env = contract::env::BEDROCK_CA_FILE)]
    bedrock_ca_file: Option<PathBuf>,

    /// Bedrock endpoint URL override (else the spec's `model.endpoint`, else the region's).
    #[arg(long, env = contract::env::BEDROCK_ENDPOINT)]
    bedrock_endpoint: Option<String>,

    /// PEM CA certificates trusted, on top of the system's roots, for https:// tool servers,
    /// MCP servers and OpenAI-compatible endpoints (e.g. a private in-cluster CA).
    #[arg(long, env = "SWITCHBOARD_CA_FILE")]
    ca_file: Option<PathBuf>,

    /// Where the Secrets of tools' `secretHeaders` are mounted (`<dir>/<secret>/<key>`;
    /// the operator mounts them there).
    #[arg(long, env = contract::env::SECRETS_DIR, default_value = contract::SECRETS_DIR)]
    secrets_dir: PathBuf,

    /// The gateway's Ed25519 public key (64 hex digits, or a PEM public key; the operator
    /// sets it), or several separated by commas or newlines: while the gateway's key is
    /// rotated, the old and the new. Session context — memory such as a verified caller,
    /// history, handoff state — is accepted only when the gateway signed it with one of
    /// them, and then a session without it is refused; without a key, no session context is
    /// accepted from anyone.
    #[arg(long, env = contract::env::GATEWAY_PUBLIC_KEY)]
    gateway_public_key: Option<GatewayKeys>,

    /// This pod's IP (the operator sets it from the pod's status): the gateway names the pod
    /// each grant is for, and a grant for another pod of the Agent is refused, so one captured
    /// on its way cannot open a session elsewhere while it is fresh. Unset: not checked.
    #[arg(long, env = contract::env::POD_IP)]
    pod_ip: Option<std::net::IpAddr>,

    /// A folder of model credential files — a mounted Secret, as the operator mounts the
    /// Agent's `credentials.secretRef`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// optionally `AWS_SESSION_TOKEN` (read again every `--credentials-max-age-seconds`),
    /// or `OPENAI_API_KEY` (read at each call), so a rotated Secret takes effect without a
    /// restart. Without it, Bedrock uses the default AWS credential chain (IRSA,
    /// environment, ...) and OpenAI-compatible servers the `OPENAI_API_KEY` variable.
    #[arg(long, env = contract::env::CREDENTIALS_DIR)]
    credentials_dir: Option<PathBuf>,

    /// How long AWS credentials read from `--credentials-dir` are used before the files
    /// are read again.
    #[arg(long, env = "SWITCHBOARD_CREDENTIALS_MAX_AGE_SECONDS", default_value_t = 60)]
    credentials_max_age_seconds: u64,

    /// A redaction rule `name=regex` for what is said when it goes into traces
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), after the built-in
    /// detectors and before the Agent's own rules, as the gateway's `--record-redact`: the
    /// operator gives runtime pods the chart's `gateway.record.redact`. One per line in the
    /// variable.
    #[arg(long = "record-redact", env = contract::env::RECORD_REDACT, value_delimiter = '\n')]
    record_redact: Vec<String>,

    #[command(flatten)]
    voice: super::VoiceArgs,
}

/// Serves until SIGTERM/SIGINT, then drains for the spec's `sessions.drainTimeoutSeconds`.
pub async fn run(args: RuntimeArgs) -> anyhow::Result<()> {
    let RuntimeArgs {
        spec,
        mode,
        listen,
        max_message_bytes,
        rate_per_second,
        max_opening_connections,
        start_timeout_seconds,
        max_connections,
        header_read_timeout_seconds,
        transcripts_dir,
        bedrock_ca_file,
        bedrock_endpoint,
        ca_file,
        secrets_dir,
        gateway_public_key: gateway_key,
        pod_ip,
        credentials_dir,
        credentials_max_age_seconds,
        record_redact,
        voice: voice_options,
    } = args;
    let redact = switchboard_core::redact::Redactor::new(&record_redact)
        .map_err(|e| anyhow::anyhow!("{e}; check --record-redact (the operator's --runtime-record-redact)"))?;
    let trust = Trust::from_file(ca_file.as_deref())?;
    let secrets = switchboard_runtime::tools::secrets::SecretFiles::new(secrets_dir);
    let executor = Executor::new(ExecutorOptions { trust: trust.clone(), secrets, ..ExecutorOptions::default() })?;
    let spec = runtime::load_spec(&spec)?;
    if let Some(mode) = mode
        && mode != spec.mode.as_str()
    {
        anyhow::bail!(
            "MODE={mode} but the runtime spec says mode {}; the operator sets both from the Agent",
            spec.mode
        );
    }
    let mut bedrock = BedrockConfig::new(spec.model.region.clone());
    bedrock.endpoint_url = bedrock_endpoint;
    bedrock.ca_cert_file = bedrock_ca_file;
    if let Some(dir) = credentials_dir {
        let files = CredentialFiles::new(dir, Duration::from_secs(credentials_max_age_seconds));
        // An agent that calls Bedrock (every voice agent does) refuses to start with an
        // unusable folder, rather than fail every model call.
        if spec.model.provider == Provider::Bedrock || spec.mode.has_audio() {
            files.read().map_err(|e| anyhow::anyhow!("AWS credentials: {}", DisplayErrorContext(&e)))?;
        }
        bedrock.credential_files = Some(files);
    }
    let mut config = ServerConfig {
        max_message_bytes,
        rate_per_second,
        rate_burst: rate_per_second.saturating_mul(2),
        max_sessions: spec.sessions.max_concurrent as usize,
        max_opening_connections,
        start_timeout: Duration::from_secs(start_timeout_seconds),
        drain_timeout: Duration::from_secs(u64::from(spec.sessions.drain_timeout_seconds)),
        idle_timeout: Duration::from_secs(u64::from(spec.sessions.idle_timeout_seconds)),
        voice_rotate_after: voice_options.rotate_after(),
        voice_audio_chunk: voice_options.audio_chunk(),
        gateway_key,
        pod_ip,
        ..ServerConfig::default()
    };
    config.http = switchboard_serve::Limits {
        header_read_timeout: Duration::from_secs(header_read_timeout_seconds),
        max_connections: max_connections.unwrap_or_else(|| config.default_max_connections()),
    };
    let shared = Shared {
        metrics: Metrics::new()?,
        transcripts: transcripts_dir.map(TranscriptSink::start),
        retry: RetryPolicy::default(),
        redact: Arc::new(redact),
    };
    let name = spec.agent.name.clone();
    let state = runtime::single_agent(spec, &bedrock, &trust.client()?, Arc::new(executor), config, shared).await?;
    let stop = super::shutdown_signal()?;
    let server = Server::bind(listen, state).await?;
    tracing::info!(agent = %name, addr = %server.local_addr()?, "runtime serving /v1/session");
    server.run(stop).await?;
    Ok(())
}
