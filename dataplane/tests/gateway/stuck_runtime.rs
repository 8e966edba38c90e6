//! A runtime that stops reading does not hold its session: a proxy in front of triage's
//! pod stops taking the gateway's bytes mid-session (as a stuck pod, or a full socket,
//! does), the client keeps typing, and the gateway — a `switchboard gateway` process —
//! gives that connection up within its send deadline and moves the session on: the client
//! gets a new `bidi_connection_start` instead of a relay frozen on one write.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;

use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};

/// A proxy whose first connection stops reading from the gateway once `choked`; later
/// connections relay both ways. Its sockets' receive buffers are small, so a sender that
/// is not read fills them soon.
struct Choke {
    addr: SocketAddr,
    choked: Arc<AtomicBool>,
    _task: tokio::task::JoinHandle<()>,
}

impl Choke {
    async fn start(to: SocketAddr) -> Self {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("small receive buffer");
        socket.bind("127.0.0.1:0".parse().expect("addr")).expect("binds");
        let listener = socket.listen(16).expect("listens");
        let addr = listener.local_addr().expect("addr");
        let choked = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let task = {
            let choked = choked.clone();
            tokio::spawn(async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    let first = connections.fetch_add(1, Ordering::SeqCst) == 0;
                    let choked = choked.clone();
                    tokio::spawn(async move {
                        let Ok(outbound) = TcpStream::connect(to).await else { return };
                        if first {
                            relay_until_choked(inbound, outbound, choked).await;
                        } else {
                            let (mut inbound, mut outbound) = (inbound, outbound);
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                }
            })
        };
        Self { addr, choked, _task: task }
    }
}

/// Relays the runtime's bytes to the gateway throughout, and the gateway's to the runtime
/// until `choked`: then it reads no more of them (and holds both sockets open).
async fn relay_until_choked(gateway: TcpStream, runtime: TcpStream, choked: Arc<AtomicBool>) {
    let (mut from_gateway, mut to_gateway) = gateway.into_split();
    let (mut from_runtime, mut to_runtime) = runtime.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_runtime, &mut to_gateway).await;
    });
    let mut buffer = vec![0u8; 1024];
    while !choked.load(Ordering::SeqCst) {
        let read = tokio::time::timeout(Duration::from_millis(50), from_gateway.read(&mut buffer)).await;
        match read {
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(n)) => {
                if to_runtime.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
    // Choked: nothing more is read from the gateway; the sockets stay open.
    let _ = back.await;
    drop((from_gateway, to_runtime));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_stops_reading_is_given_up_and_the_session_moves_on() {
    let fleet = Fleet::start(&[]).await;
    let triage = fleet.directory.borrow().lookup("bank", "triage", switchboard_gateway::Reach::Live).expect("triage");
    let choke = Choke::start(triage.ready[0]).await;
    let dir = write_routes(&fleet, |name, addr| if name == "triage" { choke.addr } else { addr });
    let gateway = GatewayProcess::start(&dir, &[]).await;
    let (socket, _) = tokio_tungstenite::connect_async(gateway.url()).await.expect("connects");
    let (mut to_gateway, mut from_gateway) = socket.split();
    let start = serde_json::to_string(&ClientMessage::SessionStart(Default::default())).expect("json");
    to_gateway.send(Message::text(start)).await.expect("sends");
    let mut starts = 0;
    let mut greeted = false;
    while !greeted {
        let Some(Ok(Message::Text(text))) = from_gateway.next().await else { panic!("no greeting") };
        match serde_json::from_str::<ServerMessage>(&text) {
            Ok(ServerMessage::BidiConnectionStart { .. }) => starts += 1,
            Ok(ServerMessage::BidiTranscriptStream { is_final: true, .. }) => greeted = true,
            _ => {}
        }
    }
    assert_eq!(starts, 1);

    // The pod stops reading; the caller types on (about 9 MB, within the message rate):
    // the gateway's writes to the pod soon wait for room that never comes.
    choke.choked.store(true, Ordering::SeqCst);
    let typing = tokio::spawn(async move {
        let line = "x".repeat(60 * 1024);
        for n in 0..150 {
            let input = ClientMessage::BidiTextInput { text: format!("{n} {line}"), id: None };
            let text = serde_json::to_string(&input).expect("json");
            if to_gateway.send(Message::text(text)).await.is_err() {
                return;
            }
        }
        // Kept open until the test ends.
        std::future::pending::<()>().await;
    });

    // The session goes on on a new connection to the pod within the send deadline (5 s)
    // and some: a second bidi_connection_start.
    let moved = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(message)) = from_gateway.next().await {
            if let Message::Text(text) = message
                && let Ok(ServerMessage::BidiConnectionStart { agent, .. }) = serde_json::from_str(&text)
            {
                return Some(agent);
            }
        }
        None
    })
    .await;
    typing.abort();
    let moved = moved.expect("the session moved on within 30 s, not held by the stuck pod");
    assert_eq!(moved.as_deref(), Some("triage"), "the session goes on at triage");
    let _ = std::fs::remove_dir_all(dir);
}
