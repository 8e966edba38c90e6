//! Logging and tracing for every Switchboard binary (`switchboard`, `switchboard-operator`),
//! set up once: a `tracing` env filter (`RUST_LOG` wins over the binary's default), lines to
//! stderr as text or JSON, and ANSI colour only when stderr is a terminal and `NO_COLOR`
//! is unset — a log file or `kubectl logs` gets no escape sequences.
//!
//! With the `otlp` feature (the data plane), the same subscriber also exports
//! OpenTelemetry traces over OTLP/HTTP when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variable is set ([`traces`]); without them nothing
//! is exported and no exporter exists. The log filter does not decide what is traced:
//! traces take the `switchboard*` spans at `info` and above whatever `--log` says.
//! [`context`] carries a span's W3C `traceparent` across processes.

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub mod context;
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
        let layer = traces.as_ref().map(traces::Traces::layer);
        tracing_subscriber::registry().with(logs).with(layer).init();
        if let Some(problem) = problem {
            tracing::warn!("traces are off: {problem}");
        } else if let Some(traces) = &traces {
            tracing::info!(endpoint = %traces.endpoint(), "exporting traces over OTLP/HTTP");
        }
        Telemetry { traces }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = service;
        tracing_subscriber::registry().with(logs).init();
        Telemetry::default()
    }
}

type BoxedLayer = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Log lines: `format` on stderr, filtered by `filter` (or `RUST_LOG`) — a filter of
/// their own, so that a quieter log does not silence traces.
fn log_layer(filter: &str, format: LogFormat) -> BoxedLayer {
    let mut filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    if !filter.to_string().contains("rustls")
        && let Ok(quiet) = QUIET_RUSTLS_SNI.parse()
    {
        filter = filter.add_directive(quiet);
    }
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text => layer.with_ansi(colour()).with_filter(filter).boxed(),
        LogFormat::Json => layer.json().with_current_span(true).with_span_list(false).with_filter(filter).boxed(),
    }
}

/// Colour codes only for a person at a terminal.
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
