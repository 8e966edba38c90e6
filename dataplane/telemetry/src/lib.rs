//! Logging and tracing for every Switchboard binary (`switchboard`, `switchboard-operator`),
//! set up once: a `tracing` env filter (`RUST_LOG` wins over the binary's default), lines to
//! stderr as text or JSON, and ANSI colour only when stderr is a terminal and `NO_COLOR`
//! is unset — a log file or `kubectl logs` gets no escape sequences.
//!
//! With the `otlp` feature (the data plane), the same subscriber also exports
//! OpenTelemetry traces over OTLP/HTTP or OTLP/gRPC when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variable is set ([`traces`]); without them nothing
//! is exported and no exporter exists. The log filter does not decide what is traced:
//! traces take the `switchboard*` spans at `info` and above whatever `--log` says.
//! [`context`] carries a span's W3C `traceparent` across processes.

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub mod context;

/// The target of events that carry what was said (prompts, transcripts, tool inputs and
/// results): exported in traces only when [`capture_content`] says so, and never written to
/// the log, whatever its filter.
pub const CONTENT_TARGET: &str = "switchboard::content";

/// Whether traces carry message content: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
/// is `true` (the OpenTelemetry GenAI instrumentations' opt-in). Off by default; read once.
pub fn capture_content() -> bool {
    static CAPTURE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAPTURE.get_or_init(|| {
        std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
    })
}
#[cfg(feature = "otlp")]
mod export;
#[cfg(feature = "otlp")]
pub mod traces;

/// The shape of log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (the default on a laptop).
    #[default]
    Text,
    /// One JSON object per line, with the span context (what pods and log collectors want;
    /// the operator and the Helm chart set it for every container).
    Json,
}

impl LogFormat {
    /// The name as written on the command line and in `SWITCHBOARD_LOG_FORMAT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

/// rustls warns for every ClientHello whose SNI is an IP address ("Illegal SNI extension:
/// ignoring IP address") — what the AWS CRT HTTP client (Pipecat, Strands, LiveKit) sends
/// when pointed at `https://127.0.0.1:…` — and the handshake goes on. A server cannot act
/// on it, so it is not worth a line per connection; a filter that names `rustls` itself
/// (e.g. `RUST_LOG=rustls=debug`) still shows it.
const QUIET_RUSTLS_SNI: &str = "rustls::msgs::handshake=error";

/// What [`init`] set up: keep it until the process ends; dropping it flushes the spans
/// not yet exported (within the exporter's timeout) and stops the exporter.
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    traces: Option<traces::Traces>,
}

impl Telemetry {
    /// Whether traces are exported.
    pub fn tracing(&self) -> bool {
        #[cfg(feature = "otlp")]
        return self.traces.is_some();
        #[cfg(not(feature = "otlp"))]
        false
    }
}

/// Installs the global subscriber: `filter` (tracing `EnvFilter` syntax) unless `RUST_LOG`
/// is set, `format` lines on stderr. An invalid filter falls back to `info`. Traces, when
/// configured, name the service `switchboard` unless `OTEL_SERVICE_NAME` says otherwise.
pub fn init(filter: &str, format: LogFormat) -> Telemetry {
    init_for("switchboard", filter, format)
}

/// [`init`], naming the service `service` in traces unless `OTEL_SERVICE_NAME` (or
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) is set.
pub fn init_for(service: &str, filter: &str, format: LogFormat) -> Telemetry {
    let logs = log_layer(filter, format);
    #[cfg(feature = "otlp")]
    {
        let (traces, problem) = match traces::TraceSettings::from_env() {
            Ok(None) => (None, None),
            Ok(Some(settings)) => match traces::Traces::start(&settings, service) {
                Ok(traces) => (Some(traces), None),
                Err(error) => (None, Some(error.to_string())),
            },
            Err(error) => (None, Some(error.to_string())),
        };
        let layer = traces.as_ref().map(|traces| traces.layer().boxed());
        subscriber(logs, layer).init();
        quiet_log_crate(filter);
        if let Some(problem) = problem {
            tracing::warn!("traces are off: {problem}");
        } else if let Some(traces) = &traces {
            tracing::info!(endpoint = %traces.endpoint(), protocol = traces.transport().as_str(), "exporting traces over OTLP");
        }
        Telemetry { traces }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = service;
        subscriber(logs, None).init();
        quiet_log_crate(filter);
        Telemetry::default()
    }
}

type BoxedLayer = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The log lines' layer and, when traces are exported, the traces' layer, over one registry.
///
/// The two layers are one list, not `registry().with(logs).with(traces)` with `traces` an
/// `Option`: an absent layer (`None`) counts as a layer that wants every span and event, so
/// every `debug_span!`/`trace_span!` of every crate (h2's per-poll spans, hyper's, the AWS
/// SDK's) was built, entered and closed although nothing wrote it — 8 % of a voice runtime's
/// CPU samples (issue 45).
fn subscriber(logs: BoxedLayer, traces: Option<BoxedLayer>) -> impl tracing::Subscriber + Send + Sync {
    let layers: Vec<BoxedLayer> = std::iter::once(logs).chain(traces).collect();
    tracing_subscriber::registry().with(layers)
}

/// Lets through the `log` crate's macros (tungstenite's and rustls's, bridged into
/// tracing) only up to the most verbose level the log filter can write. `init` sets the
/// `log` crate's level from the subscriber's hint, which the combined filters of
/// [`log_layer_to`] (and the traces layer's) leave at TRACE: every `log::trace!` of
/// tungstenite — two per WebSocket frame — was built into a record and offered to the
/// filters, about 15 % of the gateway's CPU when relaying voice (BENCHMARKS.md, `gateway`).
/// Traces take only `switchboard*` targets, written with tracing, never `log`.
fn quiet_log_crate(filter: &str) {
    log::set_max_level(log_level(&env_filter(filter)));
}

/// The most verbose level `filter` writes, as the `log` crate names it.
fn log_level(filter: &EnvFilter) -> log::LevelFilter {
    match filter.max_level_hint() {
        Some(tracing::level_filters::LevelFilter::OFF) => log::LevelFilter::Off,
        Some(tracing::level_filters::LevelFilter::ERROR) => log::LevelFilter::Error,
        Some(tracing::level_filters::LevelFilter::WARN) => log::LevelFilter::Warn,
        Some(tracing::level_filters::LevelFilter::INFO) => log::LevelFilter::Info,
        Some(tracing::level_filters::LevelFilter::DEBUG) => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// The log lines' filter: `RUST_LOG`, else `filter`, else `info`; rustls's warning about
/// IP addresses as SNI silenced unless the filter names rustls.
fn env_filter(filter: &str) -> EnvFilter {
    let mut filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    if !filter.to_string().contains("rustls")
        && let Ok(quiet) = QUIET_RUSTLS_SNI.parse()
    {
        filter = filter.add_directive(quiet);
    }
    filter
}

/// Log lines: `format` on stderr, filtered by `filter` (or `RUST_LOG`) — a filter of
/// their own, so that a quieter log does not silence traces.
fn log_layer(filter: &str, format: LogFormat) -> BoxedLayer {
    log_layer_to(filter, format, std::io::stderr, colour())
}

/// [`log_layer`] writing to `writer`. The sessions' spans (`switchboard*` spans at `info`
/// and above: `gateway.session`, `runtime.session`, ...) are kept whatever the filter says,
/// so a line logged inside one at a quieter level (`RUST_LOG=warn`) still carries its
/// `session_id` and `trace_id`; the filter decides only which lines are written.
fn log_layer_to<W>(filter: &str, format: LogFormat, writer: W, ansi: bool) -> BoxedLayer
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::filter::{FilterExt as _, filter_fn};
    let filter = env_filter(filter);
    let session_spans = filter_fn(|meta| {
        meta.is_span() && *meta.level() <= tracing::Level::INFO && meta.target().starts_with("switchboard")
    });
    // What was said never goes to the log (it may go to traces, when opted in).
    let not_content = filter_fn(|meta| meta.target() != CONTENT_TARGET);
    let filter = filter.or(session_spans).and(not_content);
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Text => layer.with_ansi(ansi).with_filter(filter).boxed(),
        LogFormat::Json => layer.json().with_current_span(true).with_span_list(false).with_filter(filter).boxed(),
    }
}

/// Colour codes only for a person at a terminal.
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Lines written, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_log_crate_is_let_through_only_as_far_as_the_filter_writes() {
        let level = |filter: &str| log_level(&EnvFilter::new(filter));
        assert_eq!(level("warn"), log::LevelFilter::Warn, "tungstenite's trace lines are not even built");
        assert_eq!(level("info"), log::LevelFilter::Info);
        assert_eq!(level("warn,switchboard_gateway=debug"), log::LevelFilter::Debug, "the most verbose directive");
        assert_eq!(level("tungstenite=trace"), log::LevelFilter::Trace, "asked for, written");
        assert_eq!(level("off"), log::LevelFilter::Off);
    }

    #[test]
    fn a_warning_in_a_session_carries_its_id_at_a_quiet_level() {
        let lines = Lines::default();
        let sink = lines.clone();
        let layer = log_layer_to("warn", LogFormat::Json, move || sink.clone(), false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "switchboard_gateway::session", "gateway.session", session_id = "gw-1", trace_id = "abc");
            let _entered = span.enter();
            tracing::info!(target: "switchboard_gateway::session", "not written at warn");
            tracing::warn!(target: "switchboard_gateway::session", "the runtime answers nothing");
        });
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "only the warning: {text}");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("a JSON line");
        assert_eq!(line["span"]["session_id"], "gw-1", "{line}");
        assert_eq!(line["span"]["trace_id"], "abc", "{line}");
        assert_eq!(line["fields"]["message"], "the runtime answers nothing");
    }

    /// Spans and events no layer writes are not built: an `info` log without traces leaves
    /// other crates' debug and trace spans disabled (they were all enabled by an absent
    /// traces layer: issue 45), and the traces' own filter adds only what it takes.
    #[test]
    fn what_no_layer_writes_is_not_built() {
        let quiet = |traces: Option<BoxedLayer>| {
            let logs = log_layer_to("info", LogFormat::Text, std::io::sink, false);
            tracing::subscriber::with_default(subscriber(logs, traces), || {
                let h2 = tracing::debug_span!(target: "h2::proto::connection", "Connection");
                let poll = tracing::trace_span!(target: "h2::proto::connection", "poll");
                let session = tracing::info_span!(target: "switchboard_runtime::connection", "runtime.session");
                let debug_event = tracing::enabled!(target: "h2::codec", tracing::Level::DEBUG);
                (h2.is_disabled(), poll.is_disabled(), session.is_disabled(), debug_event)
            })
        };
        assert_eq!(quiet(None), (true, true, false, false), "logs only: a session span, nothing of h2's");
        let traces = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::filter::Targets::new().with_target("switchboard", tracing::Level::INFO))
            .boxed();
        assert_eq!(quiet(Some(traces)), (true, true, false, false), "with traces: the same");
    }

    #[test]
    fn content_events_are_never_written_to_the_log() {
        let lines = Lines::default();
        let sink = lines.clone();
        let layer = log_layer_to("trace", LogFormat::Json, move || sink.clone(), false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::event!(target: CONTENT_TARGET, tracing::Level::INFO, gen_ai.message.content = "my card is 4111", "gen_ai.user.message");
            tracing::info!(target: "switchboard::runtime", "a line about the session");
        });
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains("4111") && text.contains("a line about the session"), "{text}");
    }
}
