//! Logging for every Switchboard binary (`switchboard`, `switchboard-operator`), set up
//! once: a `tracing` env filter (`RUST_LOG` wins over the binary's default), lines to
//! stderr as text or JSON, and ANSI colour only when stderr is a terminal and `NO_COLOR`
//! is unset — a log file or `kubectl logs` gets no escape sequences.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

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

/// Installs the global subscriber: `filter` (tracing `EnvFilter` syntax) unless `RUST_LOG`
/// is set, `format` lines on stderr. An invalid filter falls back to `info`.
pub fn init(filter: &str, format: LogFormat) {
    let mut filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    if !filter.to_string().contains("rustls")
        && let Ok(quiet) = QUIET_RUSTLS_SNI.parse()
    {
        filter = filter.add_directive(quiet);
    }
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(colour()).init(),
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(false).init(),
    }
}

/// Colour codes only for a person at a terminal.
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
