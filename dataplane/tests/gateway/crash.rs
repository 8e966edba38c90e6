//! A gateway replica killed with SIGKILL while it holds sessions — no drain, no park; the
//! kernel resets its sockets — as a crash or a lost node does. Two (then three)
//! `switchboard gateway` processes share a real redis-server; the runtimes are real
//! processes against the simulator. Each attached session is held by a lease its gateway
//! renews, with a snapshot taken at its turn boundaries and handoffs; once the dead
//! gateway's lease lapses, the client's resume through another replica takes the snapshot.
//!
//! - Mid-handoff: triage hands the caller to idv, whose pod has taken the connection but
//!   not answered yet (a gate in front of it holds the bytes); the gateway dies then. The
//!   client resumes through another replica with the token it has (triage's), and the
//!   handoff happens there: idv answers the request the caller made, once.
//! - Between turns, verified at idv: the gateway dies; the client resumes through a third
//!   replica and asks for the balance: the verified caller survived (banking answers).
//!
//! Prints the time from the kill to the resumed session's `bidi_connection_start`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_core::protocol::ServerMessage;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::redis::Redis;
use crate::resume::{position, resume_start};

/// A TCP gate in front of a runtime: while shut it accepts connections and holds them
/// without a byte either way (a pod that has not answered yet); once open it relays.
struct Gate {
    addr: SocketAddr,
    open: Arc<AtomicBool>,
    held: Arc<Notify>,
    _task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn start(to: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let (open, held) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
        let holding: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let task = {
            let (open, held) = (open.clone(), held.clone());
            tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        holding.lock().expect("lock").push(inbound);
                        held.notify_one();
                        continue;
                    }
                    tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(to).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                }
            })
        };
        Self { addr, open, held, _task: task }
    }
}

fn started_at(messages: &[ServerMessage], agent: &str) -> bool {
    messages.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent: a, .. } if a == agent))
}

/// Resumes at `gateway` with the position in `seen`; returns the client once the session's
/// `bidi_connection_start` at `agent` arrived, and how long that took.
async fn resume_at(gateway: &GatewayProcess, seen: &[ServerMessage], agent: &str) -> (Client, Duration) {
    let (token, last_seq) = position(seen);
    let started = Instant::now();
    let mut client = Client::connect(&gateway.url()).await;
    client.send(&resume_start(&token, last_seq)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent: a, .. } if a == agent)).await;
    (client, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_handoff_or_between_turns_loses_no_session() {
    let redis = Redis::start();
    let fleet = Fleet::start(&[]).await;
    let idv = fleet.directory.borrow().lookup("bank", "idv", switchboard_gateway::Reach::Live).expect("idv").ready[0];
    let gate = Gate::start(idv).await;
    let dir = write_routes(&fleet, |name, addr| if name == "idv" { gate.addr } else { addr });
    // Pings every second, silence for 3 s is death: a dead gateway's holds lapse in 3 s.
    let args = ["--redis-url", &redis.url, "--ping-seconds", "1", "--ping-timeout-seconds", "3"];
    let mut a = GatewayProcess::start(&dir, &args).await;
    let mut b = GatewayProcess::start(&dir, &args).await;

    // 1. Killed mid-handoff.
    let mut client = Client::start(&a.url(), None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    tokio::time::timeout(Duration::from_secs(30), gate.held.notified()).await.expect("the handoff reaches idv's pod");
    a.kill();
    let killed = Instant::now();
    let before = client.seen.clone();
    drop(client);
    assert!(!started_at(&before, "idv"), "the handoff was still under way: {before:?}");
    gate.open.store(true, Ordering::SeqCst);
    let (mut client, _) = resume_at(&b, &before, "idv").await;
    let handoff_recovered = killed.elapsed();
    let answer = client.turn().await;
    assert!(
        replies(&answer).iter().any(|r| r.to_lowercase().contains("verify")),
        "idv answers the request made before the crash: {answer:?}"
    );
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    let all: Vec<ServerMessage> = before.iter().chain(&client.seen).cloned().collect();
    let idv_starts =
        all.iter().filter(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv"));
    assert_eq!(idv_starts.count(), 1, "one handoff: {all:?}");
    let finals = replies(&all);
    let mut unique = finals.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(finals.len(), unique.len(), "no line delivered twice: {before:#?}\n{:#?}", client.seen);

    // 2. Killed between turns, the caller verified: the third replica resumes it with its
    // memory, and banking serves the verified caller.
    let mut c = GatewayProcess::start(&dir, &args).await;
    // Between turns: the snapshot catches up with what followed the turn's end (a state
    // change) at the next ping.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let seen = client.seen.clone();
    b.kill();
    let killed = Instant::now();
    drop(client);
    let (mut client, _) = resume_at(&c, &seen, "idv").await;
    let idle_recovered = killed.elapsed();
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "still verified: {balance:?}");
    assert!(
        !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "session_restored")),
        "between turns nothing was lost: {:?}",
        client.seen
    );
    eprintln!(
        "SIGKILLed gateway, 3 s hold lease: resumed mid-handoff in {:.2} s, between turns in {:.2} s; 0 messages lost",
        handoff_recovered.as_secs_f64(),
        idle_recovered.as_secs_f64()
    );
    c.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
