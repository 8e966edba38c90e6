//! The relay's floors, so the gateway's figure means something next to them. Each is a
//! process on a tokio runtime with the gateway's worker count, one task per connection:
//!
//! - [`Kind::Bytes`] passes a client's TCP connection to the runtime byte for byte
//!   (`tokio::io::copy_bidirectional`, 2 KiB buffers as the gateway reads with). No
//!   WebSocket parsing, no session, no limits: what any user-space relay on this machine
//!   costs per relayed frame — one read and one write system call, the loopback delivery,
//!   tokio's wake-ups.
//! - [`Kind::Frames`] is a bare WebSocket relay with the gateway's WebSocket stack
//!   (tokio-tungstenite on both legs, 2 KiB read buffers): each message read from one side
//!   is sent to the other, nothing else — what the framing adds to the byte relay.
//! - [`Kind::Raw`] is a frame-level WebSocket relay without a library (`raw_relay.rs`):
//!   what a gateway that parses and passes on frames itself would cost at least.
//!
//! It runs as a child process: this benchmark's own executable with `BENCH_RELAY_FLOOR`
//! set to `bytes:`, `frames:` or `raw:` and the runtime's address.

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::common::HelperServer;

const ENV: &str = "BENCH_RELAY_FLOOR";

/// Which floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bytes passed on, no WebSocket.
    Bytes,
    /// WebSocket messages passed on (tokio-tungstenite both ways), no session.
    Frames,
    /// WebSocket frames parsed and passed on without a library (`raw_relay.rs`).
    Raw,
}

/// Starts this executable as a relay of `kind` to `runtime` (`host:port`); its URL leads
/// to the runtime's session path.
pub fn start(kind: Kind, runtime: &str) -> HelperServer {
    let prefix = match kind {
        Kind::Bytes => "bytes",
        Kind::Frames => "frames",
        Kind::Raw => "raw",
    };
    crate::common::spawn_self(ENV, &format!("{prefix}:{runtime}"), "relay floor listening on ")
}

/// Runs the floor relay and returns true if this process was started as one; the
/// benchmark's `main` calls it first.
pub fn serve_if_asked() -> bool {
    let Ok(value) = std::env::var(ENV) else { return false };
    let (kind, runtime) = match value.split_once(':') {
        Some(("bytes", runtime)) => (Kind::Bytes, runtime.to_owned()),
        Some(("frames", runtime)) => (Kind::Frames, runtime.to_owned()),
        Some(("raw", runtime)) => (Kind::Raw, runtime.to_owned()),
        _ => panic!("{ENV} is bytes:<addr>, frames:<addr> or raw:<addr>, not {value}"),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(crate::common::workers()))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        println!("relay floor listening on {}", listener.local_addr().expect("address").port());
        loop {
            let Ok((client, _)) = listener.accept().await else { continue };
            let runtime = runtime.clone();
            match kind {
                Kind::Bytes => tokio::spawn(bytes(client, runtime)),
                Kind::Frames => tokio::spawn(frames(client, runtime)),
                Kind::Raw => tokio::spawn(crate::raw_relay::relay(client, runtime)),
            };
        }
    });
    true
}

async fn bytes(mut client: TcpStream, runtime: String) {
    let Ok(mut upstream) = TcpStream::connect(&runtime).await else { return };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, 2048, 2048).await;
}

// The handshake callback's error type is tungstenite's `ErrorResponse`, not ours.
#[allow(clippy::result_large_err)]
async fn frames(client: TcpStream, runtime: String) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
    let _ = client.set_nodelay(true);
    let config = WebSocketConfig::default().read_buffer_size(2048);
    let mut path = String::new();
    let remember = |request: &Request, response: Response| {
        path = request.uri().path().to_owned();
        Ok(response)
    };
    let Ok(mut client) = tokio_tungstenite::accept_hdr_async_with_config(client, remember, Some(config)).await else {
        return;
    };
    let url = format!("ws://{runtime}{path}");
    let Ok((mut upstream, _)) = tokio_tungstenite::connect_async_with_config(url, Some(config), true).await else {
        return;
    };
    loop {
        tokio::select! {
            message = client.next() => match message {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(message)) if message.is_text() || message.is_binary() => if upstream.send(message).await.is_err() { break },
                Some(Ok(_)) => {}
            },
            message = upstream.next() => match message {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(message)) if message.is_text() || message.is_binary() => if client.send(message).await.is_err() { break },
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = client.close(None).await;
    let _ = upstream.close(None).await;
}
