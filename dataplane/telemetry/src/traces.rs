//! OpenTelemetry traces over OTLP/HTTP (protobuf) or OTLP/gRPC, configured by the standard
//! variables:
//!
//! - `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`: `http/protobuf` (the default) or `grpc`; any
//!   other value (`http/json` included, which is not built in) is refused with a warning
//!   that names the variable, and traces stay off.
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL: `http://collector:4318/v1/traces`,
//!   or for gRPC `http://collector:4317`) or `OTEL_EXPORTER_OTLP_ENDPOINT` (the collector's
//!   base URL; over HTTP `/v1/traces` is appended, over gRPC it is used as it is). Neither
//!   set: no traces, no exporter.
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

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::export::{ExportClient, ExportThread, grpc};

pub(crate) mod settings;
pub use settings::{SettingsError, StartError, TraceSettings, Transport};

/// A running trace pipeline: the SDK's provider, exporting in batches. Dropping it exports
/// what is left (the SDK waits up to 5 s) and stops.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
    endpoint: String,
    transport: Transport,
}

impl Traces {
    /// Starts exporting as `settings` say, naming the service `service` unless the
    /// environment names it (`OTEL_SERVICE_NAME`, or `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`).
    pub fn start(settings: &TraceSettings, service: &str) -> Result<Self, StartError> {
        let thread = ExportThread::start().map_err(StartError::Client)?;
        let provider = SdkTracerProvider::builder().with_resource(resource(service));
        let provider = match settings.transport {
            Transport::HttpProtobuf => {
                let client = ExportClient::new(&thread, settings.timeout, settings.certificate.as_deref())
                    .map_err(StartError::Client)?;
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_http_client(client)
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(settings.endpoint.clone())
                    .with_timeout(settings.timeout)
                    .build()?;
                provider.with_batch_exporter(exporter)
            }
            Transport::Grpc => provider.with_batch_exporter(grpc::exporter(settings, thread)?),
        };
        Ok(Self { provider: provider.build(), endpoint: settings.endpoint.clone(), transport: settings.transport })
    }

    /// Where spans go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// How they get there.
    pub fn transport(&self) -> Transport {
        self.transport
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

    use std::time::Duration;

    use super::settings::DEFAULT_TIMEOUT;
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
    fn grpc_takes_the_base_url_as_it_is_and_the_signal_protocol_wins() {
        let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")];
        let grpc = settings(&[base[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).expect("ok").expect("on");
        assert_eq!((grpc.transport, grpc.endpoint.as_str()), (Transport::Grpc, "http://collector:4317"));
        let own = settings(&[
            base[0],
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ])
        .expect("ok")
        .expect("on");
        assert_eq!(own.transport, Transport::Grpc);
        let http = settings(&[base[0], ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")]).expect("ok");
        assert_eq!(
            http.map(|s| (s.transport, s.endpoint)),
            Some((Transport::HttpProtobuf, format!("{}/v1/traces", base[0].1)))
        );
    }

    #[test]
    fn disabled_or_unsupported_settings_say_so() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")];
        assert_eq!(settings(&[on[0], ("OTEL_SDK_DISABLED", "true")]).expect("ok"), None);
        assert_eq!(settings(&[on[0], ("OTEL_TRACES_EXPORTER", "none")]).expect("ok"), None);
        let json = settings(&[on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]).expect_err("refused");
        assert!(json.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"http/json\" is not a supported"), "{json}");
        let own = settings(&[on[0], ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grcp")]).expect_err("refused");
        assert!(own.to_string().starts_with("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"grcp\""), "{own}");
        assert!(settings(&[on[0], ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
        assert!(settings(&[on[0], ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")]).is_err());
        assert!(settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]).is_err());
    }
}
