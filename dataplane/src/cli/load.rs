//! `switchboard load <gateway-url>`: a load test (see [`switchboard_load`]) — simulated
//! voice or text callers playing scenario files through a gateway at an arrival rate — and
//! its report, as text or JSON; exits non-zero when a session did not complete.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use switchboard_load::{CallerSettings, LoadOptions, Mode, plan};
use switchboard_models::bedrock::BedrockConfig;
use switchboard_scenario::polly::{self, PollySettings};
use switchboard_scenario::target::session_url;

/// Options of `switchboard load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The gateway, e.g. `ws://127.0.0.1:8080` (local mode) or a full
    /// `ws://.../v1/session` URL.
    url: String,

    /// Scenario files whose turns the callers play (caller i plays file i mod n), e.g.
    /// examples/banking/tests/voice-balance.yaml. Repeat for several.
    #[arg(long = "scenario", required = true, value_name = "FILE")]
    scenarios: Vec<PathBuf>,

    /// `voice`: sessions with audio, a 20 ms frame every 20 ms, `speech:` steps spoken;
    /// `text`: every step typed.
    #[arg(long, value_parser = ["voice", "text"], default_value = "voice")]
    mode: String,

    /// Callers in all.
    #[arg(long, default_value_t = 10)]
    callers: u64,

    /// New callers a second.
    #[arg(long, default_value_t = 5.0)]
    rate: f64,

    /// Most sessions at once; a caller due while this many are under way waits.
    #[arg(long, default_value_t = 100)]
    concurrency: u64,

    /// The agent every session starts with, instead of each scenario's `agent`.
    #[arg(long)]
    agent: Option<String>,

    /// The gateway's API key (or a JWT), sent as `Authorization: Bearer <key>`.
    #[arg(long, env = "SWITCHBOARD_LOAD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// Seconds one caller's session may last in all.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    session_timeout: u64,

    /// Seconds a turn may wait for its answer (after the caller's speech).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=600))]
    turn_timeout: u64,

    /// The agent speaks first (its Persona's `speakFirst`): each caller waits for the
    /// greeting to end, however late it starts (up to --turn-timeout), before its first turn.
    /// Without it a caller waits only until the session has been quiet for 300 ms, and a
    /// greeting that starts later is talked over (counted by the model as an interruption).
    #[arg(long)]
    greeting: bool,

    /// Seconds the WebSocket connection may take to open.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    connect_timeout: u64,

    /// Milliseconds between an answer and the caller's next turn.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    think_ms: u64,

    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,

    /// The Amazon Polly voice that speaks `speech:` steps (voice mode).
    #[arg(long, default_value = polly::DEFAULT_VOICE)]
    speech_voice: String,

    /// Polly's region. Default: AWS_REGION, else us-east-1.
    #[arg(long)]
    speech_region: Option<String>,

    /// Polly's endpoint instead of the region's: the Bedrock simulator behind the gateway
    /// (`switchboard local` prints it), whose Nova Sonic then hears the very words, at no cost.
    #[arg(long)]
    speech_endpoint_url: Option<String>,

    /// A PEM file of CA certificates Polly's endpoint is trusted by (the simulator's, which
    /// `switchboard local` prints).
    #[arg(long)]
    speech_ca_file: Option<PathBuf>,
}

/// Sessions did not complete (the report says which codes ended them).
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {started} session(s) did not complete (the report says by which codes)")]
pub struct LoadFailed {
    /// Sessions that did not complete.
    pub failed: u64,
    /// Sessions started.
    pub started: u64,
}

/// Runs the load test and prints its report.
pub async fn run(args: LoadArgs) -> anyhow::Result<()> {
    let LoadArgs {
        url,
        scenarios,
        mode,
        callers,
        rate,
        concurrency,
        agent,
        api_key,
        session_timeout,
        turn_timeout,
        greeting,
        connect_timeout,
        think_ms,
        json,
        speech_voice,
        speech_region,
        speech_endpoint_url,
        speech_ca_file,
    } = args;
    let mode = if mode == "text" { Mode::Text } else { Mode::Voice };
    let caller = CallerSettings {
        url: session_url(&url),
        api_key,
        mode,
        agent,
        connect_timeout: Duration::from_secs(connect_timeout),
        turn_timeout: Duration::from_secs(turn_timeout),
        greeting,
        think: Duration::from_millis(think_ms),
        max_message_bytes: 1 << 20,
    };
    let options =
        LoadOptions { caller, callers, rate, concurrency, session_timeout: Duration::from_secs(session_timeout) };
    options.check()?;
    let region = speech_region.or_else(|| std::env::var("AWS_REGION").ok()).unwrap_or_else(|| "us-east-1".into());
    let mut aws = BedrockConfig::new(region);
    aws.endpoint_url = speech_endpoint_url;
    aws.ca_cert_file = speech_ca_file;
    let speech = PollySettings { voice: speech_voice, aws, ..PollySettings::default() };
    let conversations = plan::prepare(&scenarios, mode, &speech).await?;
    let report = switchboard_load::run(&options, conversations).await?;
    if json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.render());
    }
    if !report.ok() {
        return Err(LoadFailed { failed: report.sessions.failed, started: report.sessions.started }.into());
    }
    Ok(())
}
