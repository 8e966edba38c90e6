//! OpenTelemetry traces over OTLP/HTTP (protobuf), configured by the standard variables:
//!
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, e.g. `http://collector:4318/v1/traces`)
//!   or `OTEL_EXPORTER_OTLP_ENDPOINT` (the collector's base URL; `/v1/traces` is appended).
//!   Neither set: no traces, no exporter.
//! - `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`: `http/protobuf` (the only one built in; `grpc`
//!   and `http/json` are refused with a warning, and traces stay off).
//! - `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `…_TIMEOUT` (ms, default 10000),
//!   `…_CERTIFICATE` (a PEM file of CA certificates for an `https://` collector, besides the
//!   system's roots).
//! - `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and
//!   `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`), `OTEL_BSP_*` (batching),
//!   read by the OpenTelemetry SDK itself.
//! - `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: no traces.
//!
//! Spans go through a batch processor to an exporter whose HTTP requests run on a thread of
//! their own, so exporting never takes a worker thread from sessions.

use std::path::PathBuf;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::export::ExportClient;

/// How long an export may take when no `…_TIMEOUT` says otherwise (the specification's).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how traces are exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSettings {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// How long one export may take.
    pub timeout: Duration,
    /// Extra CA certificates for an `https://` endpoint.
    pub certificate: Option<PathBuf>,
}

/// The variables ask for traces this build cannot send.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A protocol other than OTLP/HTTP protobuf.
    #[error(
        "{variable}={value:?} is not built in: only http/protobuf is; point the endpoint at the collector's OTLP/HTTP port (4318) and unset {variable}"
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
    /// The HTTP client (TLS set-up, its thread).
    #[error("cannot set up the OTLP/HTTP client: {0}")]
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
        let endpoint = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(own), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", own),
            (None, Some(base)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{}/v1/traces", base.trim_end_matches('/'))),
            (None, None) => return Ok(None),
        };
        let (variable, endpoint) = endpoint;
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            let why = "an http:// or https:// URL";
            return Err(SettingsError::Invalid { variable, value: endpoint, why });
        }
        if let Some((variable, value)) = either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
            && value != "http/protobuf"
        {
            return Err(SettingsError::Protocol { variable, value });
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
        Ok(Some(Self { endpoint, timeout, certificate }))
    }
}

/// A running trace pipeline: the SDK's provider, exporting in batches. Dropping it exports
/// what is left (the SDK waits up to 5 s) and stops.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
    endpoint: String,
}

impl Traces {
    /// Starts exporting as `settings` say, naming the service `service` unless the
    /// environment names it (`OTEL_SERVICE_NAME`, or `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`).
    pub fn start(settings: &TraceSettings, service: &str) -> Result<Self, StartError> {
        let client =
            ExportClient::new(settings.timeout, settings.certificate.as_deref()).map_err(StartError::Client)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .build()?;
        let provider =
            SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource(service)).build();
        Ok(Self { provider, endpoint: settings.endpoint.clone() })
    }

    /// Where spans go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The `tracing` layer that turns Switchboard's spans (targets `switchboard*`, level
    /// `info` and above) into OpenTelemetry spans, and the log events inside them into span
    /// events. Other crates' spans (HTTP, the AWS SDK) are left out.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer("switchboard");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_location(false)
            // No busy/idle time per span: a timer read at every poll of a session's task.
            .with_tracked_inactivity(false)
            .with_filter(Targets::new().with_target("switchboard", tracing::Level::INFO))
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("traces: the last spans may not have been exported: {error}");
        }
    }
}

/// The resource every span carries: the service's name and version.
fn resource(service: &str) -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let builder =
        Resource::builder().with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if named { builder.build() } else { builder.with_service_name(service.to_owned()).build() }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Option<TraceSettings>, SettingsError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        TraceSettings::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn without_an_endpoint_traces_are_off() {
        assert_eq!(settings(&[]).expect("valid"), None);
        assert_eq!(settings(&[("OTEL_SERVICE_NAME", "x"), ("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).expect("ok"), None);
    }

    #[test]
    fn the_endpoint_comes_from_the_signal_variable_or_the_base_url() {
        let base = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).expect("ok").expect("on");
        assert_eq!(base.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(base.timeout, DEFAULT_TIMEOUT);
        let own = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example/otlp"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ])
        .expect("ok")
        .expect("on");
        assert_eq!((own.endpoint.as_str(), own.timeout), ("https://traces.example/otlp", Duration::from_millis(2500)));
    }

    #[test]
    fn disabled_or_unsupported_settings_say_so() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")];
        assert_eq!(settings(&[on[0], ("OTEL_SDK_DISABLED", "true")]).expect("ok"), None);
        assert_eq!(settings(&[on[0], ("OTEL_TRACES_EXPORTER", "none")]).expect("ok"), None);
        let grpc = settings(&[on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).expect_err("refused");
        assert!(grpc.to_string().contains("only http/protobuf"), "{grpc}");
        assert!(settings(&[on[0], ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
        assert!(settings(&[on[0], ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")]).is_err());
        assert!(settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]).is_err());
    }
}
