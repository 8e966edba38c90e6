//! The OTLP/gRPC exporter: opentelemetry-otlp's tonic client (`grpc-tonic`; TLS by rustls
//! with aws-lc, the provider the rest of the data plane uses, trusting the system's roots
//! and `…_CERTIFICATE`). A tonic channel needs a tokio runtime for its connection and each
//! call, and the SDK's batch processor exports from a plain thread without one, so the
//! channel is made on the [`ExportThread`] and every export is spawned there.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use super::{ExportThread, read_pem};
use crate::traces::settings::{StartError, TraceSettings};

/// The tonic exporter, run on the export thread.
#[derive(Debug)]
pub(crate) struct OnExportThread {
    inner: Arc<opentelemetry_otlp::SpanExporter>,
    thread: ExportThread,
}

/// The gRPC exporter `settings` describe (their transport is gRPC), running on `thread`.
pub(crate) fn exporter(settings: &TraceSettings, thread: ExportThread) -> Result<OnExportThread, StartError> {
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(settings.endpoint.clone())
        .with_timeout(settings.timeout);
    let builder = if settings.endpoint.starts_with("https://") {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(path) = &settings.certificate {
            tls = tls.ca_certificate(Certificate::from_pem(read_pem(path).map_err(StartError::Client)?));
        }
        builder.with_tls_config(tls)
    } else {
        builder
    };
    // The channel's connection task is spawned where it is made.
    let inner = {
        let _runtime = thread.runtime.enter();
        builder.build()?
    };
    Ok(OnExportThread { inner: Arc::new(inner), thread })
}

impl SpanExporter for OnExportThread {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let inner = Arc::clone(&self.inner);
        match self.thread.runtime.spawn(async move { inner.export(batch).await }).await {
            Ok(result) => result,
            Err(error) => Err(OTelSdkError::InternalFailure(format!("the export task ended: {error}"))),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Called while the provider is built, before any export shares the exporter.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}
