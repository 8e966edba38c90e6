//! The OTLP exporter's HTTP client: hyper with rustls (the stack the data plane already
//! uses for tools and models, so no second HTTP or TLS library), `http://` and `https://`
//! (the system's roots plus `…_CERTIFICATE`). The SDK's batch processor exports from a
//! plain thread of its own, outside any tokio runtime, so the requests run on a small
//! single-threaded runtime on one more thread, `otlp-export` ([`ExportThread`]), which
//! ends with the client. The gRPC exporter ([`grpc`]) runs on the same kind of thread.

pub(crate) mod grpc;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::oneshot;

/// The largest collector answer read (it is a small status message).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// A single-threaded tokio runtime on a thread of its own, `otlp-export`, where exports run;
/// the thread ends when the last clone goes.
#[derive(Clone, Debug)]
pub(crate) struct ExportThread {
    pub(crate) runtime: tokio::runtime::Handle,
    /// Ends the thread when the last clone goes.
    _stop: Arc<oneshot::Sender<()>>,
}

impl ExportThread {
    pub(crate) fn start() -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        Ok(Self { runtime: handle, _stop: Arc::new(stop) })
    }
}

/// Sends the exporter's requests.
pub(crate) struct ExportClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    thread: ExportThread,
    timeout: Duration,
}

impl std::fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportClient").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl ExportClient {
    /// A client whose requests each take at most `timeout` on `thread`, trusting the
    /// system's roots and the PEM certificates in `certificate`.
    pub(crate) fn new(thread: &ExportThread, timeout: Duration, certificate: Option<&Path>) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(certificate)?)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { client, thread: thread.clone(), timeout })
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (client, timeout) = (self.client.clone(), self.timeout);
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, Full::new(body));
        let exchange = async move {
            let response = client.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES).collect().await?.to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        let sent = self.thread.runtime.spawn(async move {
            tokio::time::timeout(timeout, exchange)
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis()).into()))
        });
        sent.await?
    }
}

/// The PEM file of `…_CERTIFICATE`.
pub(crate) fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The system's root certificates and those in the PEM file `extra`.
fn roots(extra: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let (_, _ignored) = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = extra {
        let pem = read_pem(path)?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("{} is not PEM certificates: {e}", path.display()))?;
            roots.add(cert).map_err(|e| format!("a certificate of {} is unusable: {e}", path.display()))?;
        }
    }
    Ok(roots)
}
