//! The one HTTP server every Switchboard listener runs (gateway, runtime, local mode): an
//! accept loop over hyper's HTTP/1 connection, with the limits a listener open to slow or
//! hostile clients needs ([`Limits`]):
//!
//! - **HTTP/1 only.** Cleartext HTTP/2 (h2c, prior knowledge) is not served: its preface is
//!   an HTTP/1 parse error and the connection is closed.
//! - **Header read timeout**, which (hyper 1.x, `proto/h1/conn.rs`: the timer starts in
//!   `poll_read_head`, and a connection going idle after a response asks for that read at
//!   once) is also the keep-alive idle timeout: a connection must deliver a whole request
//!   head within it, counted from its start or from the end of its previous response.
//!   Request bodies are not timed: every route here is a `GET` or has a small body limit,
//!   and the connection cap bounds what slow ones hold.
//! - **A cap on connections.** Each connection holds a permit of one semaphore, inside its
//!   IO ([`Admitted`]), so a connection upgraded to a WebSocket keeps its permit until the
//!   socket closes. Past the cap a connection is answered `503` with `Retry-After: 1` if
//!   its socket takes those few bytes at once (no task, no wait), then closed; refusals are
//!   counted ([`OnRefused`]) and logged once per burst.
//! - **`TCP_NODELAY`** on every connection: replies stream as many small frames.
//! - **Graceful shutdown**: when `stop` fires the listener closes, each open connection
//!   finishes the request under way (keep-alive off), and any still open after
//!   [`SHUTDOWN_GRACE`] is dropped. Upgraded connections are not the server's any more:
//!   their sessions end through [`crate::drain`].

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long open connections get to finish the request under way once the server stops.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The largest request head (and read buffer) of a connection: what one slow client can
/// make the server hold, times the cap. Browsers' heads with cookies stay well under it.
pub const MAX_REQUEST_HEAD: usize = 64 * 1024;

/// The answer to a connection past the cap.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n\
Content-Length: 40\r\nConnection: close\r\n\r\ntoo many connections; try again shortly\n";

/// The limits of a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection may take to send a whole request head, from its start or
    /// from the end of its previous response (so also how long an idle keep-alive
    /// connection stays open). Default 10 s.
    pub header_read_timeout: Duration,
    /// Most connections open at once, WebSockets included; more are answered 503 and
    /// closed. Default 1024 (servers derive theirs from their session limits).
    pub max_connections: usize,
}

impl Limits {
    /// The default header read timeout.
    pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default connection cap.
    pub const MAX_CONNECTIONS: usize = 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Self { header_read_timeout: Self::HEADER_READ_TIMEOUT, max_connections: Self::MAX_CONNECTIONS }
    }
}

/// What a server does for each connection refused past the cap (counts it in its
/// metrics); the default does nothing more than the log line.
#[derive(Clone, Default)]
pub struct OnRefused(Option<Arc<dyn Fn() + Send + Sync>>);

impl OnRefused {
    /// Calls `count` for each refused connection.
    pub fn new(count: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(count)))
    }

    fn call(&self) {
        if let Some(count) = &self.0 {
            count();
        }
    }
}

impl std::fmt::Debug for OnRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "OnRefused(counted)" } else { "OnRefused(none)" })
    }
}

/// A connection's socket and its place under the cap: the permit goes back when the
/// socket is dropped, whether by the HTTP connection or by the WebSocket it became.
#[derive(Debug)]
pub struct Admitted {
    tcp: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Admitted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Serves `app` on `listener` within `limits` until `stop` fires, then shuts down
/// gracefully (see the module docs); `on_refused` is called for each connection refused
/// past the cap.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, on_refused: OnRefused, stop: CancellationToken) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true)
        .max_buf_size(MAX_REQUEST_HEAD);
    // Whether the last connection was refused: one log line per burst of refusals.
    let mut refusing = false;
    loop {
        let tcp = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            on_refused.call();
            if !std::mem::replace(&mut refusing, true) {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connections are refused: the server holds its most connections (logged once until one is admitted)"
                );
            }
            // One non-blocking write: a client that cannot take it now learns nothing.
            let _ = tcp.try_write(REFUSAL);
            continue;
        };
        refusing = false;
        // Replies stream as many small frames: without TCP_NODELAY, Nagle's algorithm holds
        // a frame back until the previous one is acknowledged (tens of ms with delayed ACKs).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let io = TokioIo::new(Admitted { tcp, _permit: permit });
        let connection = http.serve_connection(io, TowerToHyperService::new(app.clone())).with_upgrades();
        let stop = stop.clone();
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    tokio::time::timeout(SHUTDOWN_GRACE, connection).await.unwrap_or(Ok(()))
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// After a failed accept: a failure of that one connection is skipped; any other (out of
/// file descriptors) is logged and accepting pauses for a second, as axum and hyper do.
async fn accept_failed(error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!("cannot accept a connection: {error}; accepting again in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests;
