//! The Kubernetes client of `switchboard-operator run`: kube's `Client` (same auth, base
//! URI and headers layers, from the kubeconfig or in-cluster config) over HTTP/2 when the
//! API server offers it (ALPN), HTTP/1.1 otherwise.
//!
//! Why not `kube::Client::try_default()`: it speaks HTTP/1.1 only, so every concurrent
//! request needs its own TLS connection. With three reconcilers writing at once (Agents,
//! Personas, Workflows) plus the watches, that was over a hundred connections to the API
//! server at start-up, each with its own read buffers, TLS state and dispatch task — a
//! fifth of the operator's heap. Over HTTP/2 every request and watch shares one
//! connection; keep-alive pings notice a dead one.
//!
//! Connecting is bounded by the kubeconfig's connect timeout (kube's default, 30 s, when it
//! sets none); every request's own deadline is added by `guard.rs`, which `run` wraps
//! around this client.

use std::time::Duration;

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use kube::{Client, Config};
use tower::{BoxError, ServiceBuilder};

/// How often an idle HTTP/2 connection is pinged, and how long a ping may take.
const KEEP_ALIVE: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(20));

/// How long connecting to the API server may take when the kubeconfig does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for `config`.
pub fn build(config: Config) -> Result<Client, kube::Error> {
    let tls = config.rustls_client_config()?;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.enforce_http(false);
    connector.set_connect_timeout(Some(config.connect_timeout.unwrap_or(CONNECT_TIMEOUT)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(connector);
    let http = HttpClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(KEEP_ALIVE.0)
        .http2_keep_alive_timeout(KEEP_ALIVE.1)
        .http2_keep_alive_while_idle(true)
        .build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(Client::new(service, config.default_namespace))
}
