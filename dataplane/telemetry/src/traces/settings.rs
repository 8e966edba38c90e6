//! What the standard `OTEL_*` variables ask of the trace pipeline ([`TraceSettings`]), and
//! why it could not start ([`StartError`]): read by the pipeline and by its exporters.

use std::path::PathBuf;
use std::time::Duration;

/// How long an export may take when no `…_TIMEOUT` says otherwise (the specification's).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How spans travel to the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`, port 4318).
    HttpProtobuf,
    /// OTLP/gRPC (`grpc`, port 4317).
    Grpc,
}

impl Transport {
    /// The value of `OTEL_EXPORTER_OTLP_PROTOCOL` that names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }
}

/// Where and how traces are exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSettings {
    /// The protocol.
    pub transport: Transport,
    /// The traces URL (`…/v1/traces` over HTTP; the collector's address over gRPC).
    pub endpoint: String,
    /// How long one export may take.
    pub timeout: Duration,
    /// Extra CA certificates for an `https://` endpoint.
    pub certificate: Option<PathBuf>,
}

/// The variables ask for traces this build cannot send.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A protocol other than OTLP/HTTP protobuf or OTLP/gRPC.
    #[error(
        "{variable}={value:?} is not a supported protocol: use grpc (the collector's port 4317) or http/protobuf (port 4318)"
    )]
    Protocol {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// An exporter other than OTLP.
    #[error("OTEL_TRACES_EXPORTER={0:?} is not supported: only otlp (or none)")]
    Exporter(String),
    /// A value that does not parse.
    #[error("{variable}={value:?} is not valid: {why}")]
    Invalid {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        why: &'static str,
    },
}

/// The exporter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP or gRPC client (TLS set-up, its thread).
    #[error("cannot set up the OTLP client: {0}")]
    Client(String),
    /// The OpenTelemetry exporter.
    #[error(transparent)]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

impl TraceSettings {
    /// The settings in this process's environment; `None`: traces are off.
    pub fn from_env() -> Result<Option<Self>, SettingsError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings that the variables `var` returns describe; `None`: traces are off.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, SettingsError> {
        let var = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        // The signal's own variable wins over the general one.
        let either = |own: &'static str, general: &'static str| {
            var(own).map(|v| (own, v)).or_else(|| var(general).map(|v| (general, v)))
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER") {
            Some(v) if v.eq_ignore_ascii_case("none") => return Ok(None),
            Some(v) if !v.split(',').any(|e| e.trim().eq_ignore_ascii_case("otlp")) => {
                return Err(SettingsError::Exporter(v));
            }
            _ => {}
        }
        let transport = match either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") {
            None => Transport::HttpProtobuf,
            Some((_, value)) if value == "http/protobuf" => Transport::HttpProtobuf,
            Some((_, value)) if value == "grpc" => Transport::Grpc,
            Some((variable, value)) => return Err(SettingsError::Protocol { variable, value }),
        };
        let endpoint = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(own), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", own),
            // gRPC names the service, not a path: the base URL is the endpoint.
            (None, Some(base)) if transport == Transport::Grpc => ("OTEL_EXPORTER_OTLP_ENDPOINT", base),
            (None, Some(base)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{}/v1/traces", base.trim_end_matches('/'))),
            (None, None) => return Ok(None),
        };
        let (variable, endpoint) = endpoint;
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            let why = "an http:// or https:// URL";
            return Err(SettingsError::Invalid { variable, value: endpoint, why });
        }
        let timeout = match either("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some((variable, value)) => match value.parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => return Err(SettingsError::Invalid { variable, value, why: "milliseconds, more than 0" }),
            },
        };
        let certificate = either("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE")
            .map(|(_, path)| PathBuf::from(path));
        Ok(Some(Self { transport, endpoint, timeout, certificate }))
    }
}
