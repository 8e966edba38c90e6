//! `switchboard chat` gets its session back after its connection drops: the terminal
//! client talks to the gateway through a TCP relay the test cuts mid-conversation (both
//! sockets closed, no WebSocket close). The client resumes with its token and the number of
//! the last message it read; the line typed after the cut is answered in the same session
//! (the caller verified at idv stays verified), and nothing is printed twice.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::fleet::Fleet;

/// A TCP relay whose connections the test can cut.
struct Relay {
    addr: std::net::SocketAddr,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    _task: JoinHandle<()>,
}

impl Relay {
    async fn start(to: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let task = {
            let links = links.clone();
            tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let link = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(to).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    links.lock().expect("lock").push(link);
                }
            })
        };
        Self { addr, links, _task: task }
    }

    /// Closes every connection through it, both sides, without a word.
    fn cut(&self) {
        for link in self.links.lock().expect("lock").drain(..) {
            link.abort();
        }
    }
}

/// Reads the client's output until a line contains `needle`; returns the lines read.
async fn read_until(out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, needle: &str) -> Vec<String> {
    let mut read = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), out.next_line())
            .await
            .unwrap_or_else(|_| panic!("{needle:?} in time; read {read:#?}"))
            .expect("reads")
            .unwrap_or_else(|| panic!("the client ended before {needle:?}; read {read:#?}"));
        let done = line.contains(needle);
        read.push(line);
        if done {
            return read;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchboard_chat_resumes_its_session_after_the_connection_drops() {
    let fleet = Fleet::start(&[]).await;
    let (to, path) = fleet.url.trim_start_matches("ws://").split_once('/').expect("ws://host:port/path");
    let relay = Relay::start(to.parse().expect("an address")).await;
    let mut chat = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["chat", &format!("ws://{}/{path}", relay.addr)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starts switchboard chat");
    let mut input = chat.stdin.take().expect("stdin");
    let mut out = BufReader::new(chat.stdout.take().expect("stdout")).lines();
    let mut printed = read_until(&mut out, "How can I help").await;
    input.write_all(b"I'd like to check my balance\n").await.expect("types");
    printed.extend(read_until(&mut out, "To verify your identity").await);

    relay.cut();
    printed.extend(read_until(&mut out, "resuming the session").await);
    input.write_all(b"My name is Ada Lovelace, account 12345678, sort code 12-34-56\n").await.expect("types");
    printed.extend(read_until(&mut out, "you're verified").await);
    input.write_all(b"My balance please\n").await.expect("types");
    printed.extend(read_until(&mut out, "1234.56 GBP").await);
    drop(input);
    let status = tokio::time::timeout(Duration::from_secs(30), chat.wait()).await.expect("it ends").expect("status");
    assert!(status.success(), "{status}; printed {printed:#?}");
    let once = |needle: &str| printed.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(once("To verify your identity"), 1, "{printed:#?}");
    assert_eq!(once("you're verified"), 1, "{printed:#?}");
}
