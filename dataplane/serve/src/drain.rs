//! Serving until told to stop, then draining, as runtime pods and gateway replicas both do:
//!
//! 1. `stop` resolves (SIGTERM): `draining` fires — readiness answers 503 and new sessions
//!    are refused with a clear reason — and the tracker of live sessions closes.
//! 2. Live sessions get `timeout` to finish; meanwhile, for at least `linger` (a gateway
//!    replica's preStop-length wait until every proxy has dropped it), the listener keeps
//!    accepting, so a late connection is answered, not refused by a closed port.
//! 3. `shutdown` fires: the remaining sessions close (each says why) and the server stops,
//!    after at most five more seconds for them to say it.
//!
//! The server itself, with its timeouts and connection cap, is [`crate::server`].

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::server::{self, Limits, OnRefused};

/// The server could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address is not usable.
    #[error("cannot listen on {addr}: {source}; pick another address or port")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("the HTTP server failed: {0}")]
    Serve(String),
}

/// Binds `addr`, naming it in the error.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Listen { addr, source })
}

/// What draining needs of a server's state.
#[derive(Debug, Clone)]
pub struct Drain {
    /// Fires when draining starts.
    pub draining: CancellationToken,
    /// Fires when the remaining sessions must close.
    pub shutdown: CancellationToken,
    /// The live sessions.
    pub tracker: TaskTracker,
    /// How long live sessions may take to finish.
    pub timeout: Duration,
    /// The least time the listener keeps accepting after `stop` (zero: none).
    pub linger: Duration,
    /// The listener's timeouts and connection cap.
    pub limits: Limits,
    /// Counts connections refused past the cap.
    pub on_refused: OnRefused,
}

impl Drain {
    /// Serves `app` on `listener` until `stop` resolves, then drains (see the module docs).
    pub async fn serve(
        self,
        listener: TcpListener,
        app: Router,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let serving = tokio::spawn(server::serve(listener, app, self.limits, self.on_refused, self.shutdown.clone()));
        stop.await;
        tracing::info!(sessions = self.tracker.len(), "draining: readiness is false and new sessions are refused");
        self.draining.cancel();
        self.tracker.close();
        let drained = async {
            if tokio::time::timeout(self.timeout, self.tracker.wait()).await.is_err() {
                tracing::info!(sessions = self.tracker.len(), "drain timeout: closing the remaining sessions");
            }
        };
        tokio::join!(drained, tokio::time::sleep(self.linger));
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.tracker.wait()).await;
        serving.await.map_err(|e| ServeError::Serve(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::routing::get;

    use super::*;

    #[tokio::test]
    async fn a_live_session_finishes_within_the_drain_and_the_listener_lingers() {
        let drain = Drain {
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            timeout: Duration::from_secs(5),
            linger: Duration::from_millis(300),
            limits: Limits::default(),
            on_refused: OnRefused::default(),
        };
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        // A live session that finishes once draining starts.
        let finished = Arc::new(AtomicBool::new(false));
        let (session_draining, session_finished) = (drain.draining.clone(), finished.clone());
        drain.tracker.spawn(async move {
            session_draining.cancelled().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            session_finished.store(true, Ordering::SeqCst);
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new().route("/", get(|| async { "ok" }));
        let serving = tokio::spawn(drain.clone().serve(listener, app, async move {
            let _ = stop_rx.await;
        }));
        let _ = stop_tx.send(());
        drain.draining.cancelled().await;
        // While lingering, the port still answers.
        let connected = tokio::net::TcpStream::connect(addr).await;
        assert!(connected.is_ok(), "a connection during the linger is accepted");
        tokio::time::timeout(Duration::from_secs(10), serving).await.expect("stops").expect("joins").expect("serves");
        assert!(finished.load(Ordering::SeqCst), "the live session finished before shutdown");
        assert!(drain.shutdown.is_cancelled());
        assert!(bind(addr).await.is_ok(), "the port is free again");
    }

    #[test]
    fn a_busy_port_is_named() {
        let source = std::io::Error::new(std::io::ErrorKind::AddrInUse, "in use");
        let message = ServeError::Listen { addr: SocketAddr::from(([127, 0, 0, 1], 9)), source };
        assert_eq!(message.to_string(), "cannot listen on 127.0.0.1:9: in use; pick another address or port");
    }
}
