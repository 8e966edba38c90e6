//! An HTTP proxy in front of the test API server for one operator process: it records every
//! request the process sends (when, method, path) and can black-hole it — requests then get
//! no answer and open responses (watches) stop flowing, as when a network path to the API
//! server silently drops packets. When the black hole ends, the requests it held are
//! dropped with their connections (as a reset would), never forwarded late. It can also
//! hold requests other than the Lease's (they wait, then go on), to catch the process at a
//! moment when all its work waits for answers.
//!
//! The operator talks plain HTTP to the proxy (a kubeconfig from [`ApiProxy::kubeconfig`]);
//! the proxy forwards with the cluster-admin client, so what the process may do is
//! unchanged: the proxy only observes and cuts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// One request as the proxy received it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it arrived.
    pub at: Instant,
    /// Its method.
    pub method: Method,
    /// Its path and query.
    pub path: String,
    /// Whether it arrived during a black hole (and so was never forwarded).
    pub held: bool,
    /// Whether it was held back (see [`ApiProxy::hold`]) before being forwarded.
    pub delayed: bool,
}

impl Seen {
    /// Whether the request changes anything (not GET, HEAD or OPTIONS).
    pub fn is_write(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }
}

struct Shared {
    upstream: Client,
    log: Mutex<Vec<Seen>>,
    hole: watch::Receiver<bool>,
    hold: watch::Receiver<bool>,
}

/// A running proxy; dropping it stops accepting connections.
pub struct ApiProxy {
    /// Where it listens (plain HTTP, loopback).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    hole: watch::Sender<bool>,
    hold: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ApiProxy {
    /// A proxy to the API server of `upstream` (a client with the rights to forward with).
    pub async fn start(upstream: Client) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.context("binding the proxy")?;
        let addr = listener.local_addr()?;
        let (hole, hole_rx) = watch::channel(false);
        let (hold, hold_rx) = watch::channel(false);
        let shared = Arc::new(Shared { upstream, log: Mutex::default(), hole: hole_rx, hold: hold_rx });
        let task = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| handle(shared.clone(), req));
                        let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                    });
                }
            }
        });
        Ok(Self { addr, shared, hole, hold, task })
    }

    /// Starts (true) or ends (false) the black hole.
    pub fn black_hole(&self, on: bool) {
        self.hole.send_replace(on);
    }

    /// Starts (true) or ends (false) holding back every request but the Lease's: each waits
    /// until the hold ends, then goes on to the API server.
    pub fn hold(&self, on: bool) {
        self.hold.send_replace(on);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Seen> {
        self.shared.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Writes a kubeconfig for this proxy (namespace `namespace`) into `dir`; returns its path.
    pub fn kubeconfig(&self, dir: &Path, namespace: &str) -> anyhow::Result<PathBuf> {
        let path = dir.join(format!("kubeconfig-proxy-{}", self.addr.port()));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {{server: \"http://{}\"}}\n\
             users:\n- name: proxy\n  user: {{token: unused-the-proxy-forwards-as-admin}}\n\
             contexts:\n- name: proxy\n  context: {{cluster: proxy, user: proxy, namespace: {namespace}}}\n\
             current-context: proxy\n",
            self.addr
        );
        std::fs::write(&path, text).context("writing the proxy kubeconfig")?;
        Ok(path)
    }
}

impl std::fmt::Debug for ApiProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiProxy").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<ProxyBody>, BoxError> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let held = *shared.hole.borrow();
    let delayed = !held && *shared.hold.borrow() && !path.contains("/leases/");
    if let Ok(mut log) = shared.log.lock() {
        log.push(Seen { at: Instant::now(), method: parts.method.clone(), path: path.clone(), held, delayed });
    }
    if held {
        // No answer while the hole lasts; then the connection is dropped (an error here
        // makes hyper close it), the request never forwarded.
        let mut hole = shared.hole.clone();
        let _ = hole.wait_for(|on| !*on).await;
        return Err("black hole: request dropped".into());
    }
    if delayed {
        let _ = shared.hold.clone().wait_for(|on| !*on).await;
    }
    let bytes = body.collect().await?.to_bytes();
    let mut out = Request::builder().method(parts.method).uri(path);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "authorization" | "content-length" | "transfer-encoding" | "connection") {
            out = out.header(name, value);
        }
    }
    let request = out.body(kube::client::Body::from(bytes.to_vec()))?;
    let response = match shared.upstream.send(request).await {
        Ok(r) => r,
        Err(e) => {
            let body = Full::new(Bytes::from(format!("proxy: {e}"))).map_err(|e: Infallible| match e {}).boxed_unsync();
            return Ok(Response::builder().status(StatusCode::BAD_GATEWAY).body(body)?);
        }
    };
    let (parts, body) = response.into_parts();
    let gate = shared.hole.clone();
    let frames = futures_util::stream::unfold((body, gate), |(mut body, mut gate)| async move {
        loop {
            // Nothing flows while the hole lasts.
            if gate.wait_for(|on| !*on).await.is_err() {
                return None;
            }
            let frame = tokio::select! {
                frame = body.frame() => frame,
                _ = gate.wait_for(|on| *on) => continue,
            };
            let frame: Option<Result<Frame<Bytes>, BoxError>> = frame.map(|f| f.map_err(BoxError::from));
            return frame.map(|f| (f, (body, gate)));
        }
    });
    Ok(Response::from_parts(parts, StreamBody::new(frames).boxed_unsync()))
}
