//! The operator's own HTTP server: `/metrics` (Prometheus text), `/healthz` (the process
//! serves) and `/readyz` (start-up checks passed: CRDs installed; a standby replica waiting
//! for the Lease is ready too, so a rollout of the operator is not blocked on leadership).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::Metrics;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}; pick another --metrics-addr")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

impl ServeError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        "http_bind"
    }
}

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    /// Marks the operator ready (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether the operator is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// Binds `addr`; returns the bound address (useful with port 0) and the serving future,
/// which ends when `shutdown` is cancelled and every connection has finished.
pub async fn bind(
    addr: SocketAddr,
    metrics: Metrics,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, impl Future<Output = ()>), ServeError> {
    let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
    let serve = async move {
        let tracker = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                a = listener.accept() => a,
            };
            let Ok((stream, _)) = accepted else { continue };
            let (metrics, health, shutdown) = (metrics.clone(), health.clone(), shutdown.clone());
            tracker.spawn(async move {
                let service = service_fn(move |req| {
                    let response = respond(&req, &metrics, &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => { if let Err(e) = r { tracing::debug!("metrics connection: {e}"); } }
                    _ = shutdown.cancelled() => conn.as_mut().graceful_shutdown(),
                }
            });
        }
        tracker.close();
        tracker.wait().await;
    };
    Ok((local, serve))
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, health: &Health) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match req.uri().path() {
        "/metrics" => (StatusCode::OK, "text/plain; version=0.0.4", metrics.render()),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" if health.is_ready() => (StatusCode::OK, "text/plain", "ready\n".to_owned()),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", "starting\n".to_owned()),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found; try /metrics, /healthz or /readyz\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}
