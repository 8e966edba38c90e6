//! The servers local mode runs: the gateway clients talk to and the runtime server behind
//! it (and the SIP edge, when asked), served and drained together.

use std::net::SocketAddr;
use std::sync::Arc;

use switchboard_gateway::server::Server as GatewayServer;
use switchboard_runtime::{self as runtime, Server};
use tokio::sync::watch;

use crate::{LocalError, start_error};

mod sip;
pub use sip::LocalSip;

/// The gateway and the runtime server of local mode (and its SIP edge, when asked).
#[derive(Debug)]
pub struct Servers {
    gateway: GatewayServer,
    runtime: Server,
    /// Holds the gateway's directory open (only the outage switch file changes it, [`crate::outage`]).
    _routes: Arc<watch::Sender<switchboard_gateway::Directory>>,
    sip: Option<switchboard_sip_edge::Edge>,
    /// Where the SIP edge's metrics go once it runs (the gateway's `/metrics` renders them).
    sip_metrics: Arc<std::sync::OnceLock<switchboard_sip_edge::Metrics>>,
}

impl Servers {
    /// `gateway` in front of `runtime`, the gateway's directory held open by `routes`; the
    /// SIP edge's metrics go to `sip_metrics` once [`Servers::serve_sip`] starts it.
    pub(crate) fn new(
        gateway: GatewayServer,
        runtime: Server,
        routes: Arc<watch::Sender<switchboard_gateway::Directory>>,
        sip_metrics: Arc<std::sync::OnceLock<switchboard_sip_edge::Metrics>>,
    ) -> Self {
        Self { gateway, runtime, _routes: routes, sip: None, sip_metrics }
    }

    /// Where clients connect: the gateway (`/v1/session`, the web page, `/metrics` with the
    /// runtime's metrics after the gateway's, and the SIP edge's when it runs).
    pub fn local_addr(&self) -> Result<SocketAddr, LocalError> {
        self.gateway.local_addr().map_err(start_error)
    }

    /// The runtime server's loopback address (the gateway's only upstream).
    pub fn runtime_addr(&self) -> Result<SocketAddr, LocalError> {
        self.runtime.local_addr().map_err(start_error)
    }

    /// The runtime's shared state (metrics, session slots).
    pub fn state(&self) -> Arc<runtime::AppState> {
        self.runtime.state()
    }

    /// Serves until `stop` resolves; then the gateway drains (clients are told to
    /// reconnect), then the runtime.
    pub async fn run(self, stop: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), LocalError> {
        let (stopped, runtime_stop) = tokio::sync::oneshot::channel::<()>();
        let _routes = self._routes;
        let runtime = tokio::spawn(self.runtime.run(async move {
            let _ = runtime_stop.await;
        }));
        // The SIP edge stops with the gateway: its calls are hung up while the gateway drains.
        let (sip_stop, sip_stopped) = tokio::sync::oneshot::channel::<()>();
        let sip = self.sip.map(|edge| {
            tokio::spawn(edge.run(async move {
                let _ = sip_stopped.await;
            }))
        });
        let gateway = self
            .gateway
            .run(async move {
                stop.await;
                let _ = sip_stop.send(());
            })
            .await;
        if let Some(sip) = sip {
            let _ = sip.await;
        }
        let _ = stopped.send(());
        let runtime = runtime.await.map_err(|e| LocalError::Serve(e.to_string()))?;
        gateway.map_err(|e| LocalError::Serve(e.to_string()))?;
        runtime.map_err(|e| LocalError::Serve(e.to_string()))
    }
}
