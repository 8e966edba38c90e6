//! Helpers: run local mode or a single-agent runtime on real sockets, talk to it with a
//! real WebSocket client, scrape its metrics over HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_local::{self as local, LocalOptions};
use switchboard_runtime::{AppState, ServerConfig};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Upper bound for waiting on one expected message: a guard against hangs, not a timing
/// assertion.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking")
}

/// A running local mode and how to stop it.
pub struct Running {
    /// The gateway: where clients connect.
    pub addr: SocketAddr,
    /// The runtime behind it (limits and trust are the runtime's own; a client connecting
    /// here directly is what a pod sees from a client that bypasses the gateway).
    pub runtime_addr: SocketAddr,
    /// The runtime's state.
    pub state: Arc<AppState>,
    /// The key local mode's gateway signs with (the runtime serves only its grants).
    pub key: switchboard_core::grant::GatewaySigner,
    stop: Option<oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<()>,
    _keep: Vec<Box<dyn std::any::Any + Send>>,
}

impl Running {
    /// Starts draining (as SIGTERM does).
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// The gateway's session URL.
    pub fn url(&self, query: &str) -> String {
        format!("ws://{}/v1/session{query}", self.addr)
    }

    /// The runtime's session URL.
    pub fn runtime_url(&self, query: &str) -> String {
        format!("ws://{}/v1/session{query}", self.runtime_addr)
    }

    /// A client straight at the runtime, started as the gateway starts sessions there: with
    /// a grant for the agent of `query` (`?agent=<name>`; the default agent, triage, without).
    pub async fn runtime_client(&self, query: &str) -> Client {
        let agent = query.strip_prefix("?agent=").filter(|a| !a.is_empty()).unwrap_or("triage");
        let mut client = Client::connect(&self.runtime_url(query)).await;
        let start = signed_start(&self.key, agent, Default::default());
        client.send(&ClientMessage::SessionStart(start)).await;
        client
    }
}

/// Local mode on the banking example, on a free port, with `config` limits.
pub async fn banking(config: ServerConfig) -> Running {
    banking_with_transcripts(config, None).await
}

/// Local mode on the banking example whose gateway signs session context with `key`.
pub async fn banking_signed(config: ServerConfig, key: switchboard_core::grant::GatewaySigner) -> Running {
    start(config, None, Some(key)).await
}

/// Local mode on the banking example, writing transcripts to `transcripts`.
pub async fn banking_with_transcripts(config: ServerConfig, transcripts: Option<PathBuf>) -> Running {
    start(config, transcripts, None).await
}

/// Local mode on the banking example whose simulated model follows `script` (YAML text)
/// instead of the bundled one.
pub async fn banking_scripted(script: &str) -> Running {
    let path = std::env::temp_dir().join(format!("switchboard-script-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&path, script).expect("the script is written");
    let running = start_with(ServerConfig::default(), None, None, Some(path.clone())).await;
    // The simulator has read it by now.
    let _ = std::fs::remove_file(&path);
    running
}

/// Local mode on the banking example as `edit` changes it (a copy of the folder: file
/// name -> its YAML text, changed).
pub async fn banking_edited(edit: impl Fn(&str, String) -> String) -> Running {
    let dir = std::env::temp_dir().join(format!("switchboard-banking-{}", uuid::Uuid::new_v4()));
    copy_dir(&examples_dir(), &dir, &edit);
    let running = start_in(&dir, ServerConfig::default(), None, None, None).await;
    // Local mode has read the folder by now.
    let _ = std::fs::remove_dir_all(&dir);
    running
}

/// Local mode on the banking example as `edit` changes it, its simulated model following
/// `script` (YAML text).
pub async fn banking_edited_scripted(edit: impl Fn(&str, String) -> String, script: &str) -> Running {
    let dir = std::env::temp_dir().join(format!("switchboard-banking-{}", uuid::Uuid::new_v4()));
    copy_dir(&examples_dir(), &dir, &edit);
    let path = dir.join("simulator-script.yaml.txt");
    std::fs::write(&path, script).expect("the script is written");
    let running = start_in(&dir, ServerConfig::default(), None, None, Some(path)).await;
    // Local mode and the simulator have read them by now.
    let _ = std::fs::remove_dir_all(&dir);
    running
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path, edit: &impl Fn(&str, String) -> String) {
    std::fs::create_dir_all(to).expect("a scratch folder");
    for entry in std::fs::read_dir(from).expect("the examples").flatten() {
        let (path, name) = (entry.path(), entry.file_name().to_string_lossy().into_owned());
        if path.is_dir() {
            copy_dir(&path, &to.join(&name), edit);
        } else if name.ends_with(".yaml") {
            let text = std::fs::read_to_string(&path).expect("readable");
            std::fs::write(to.join(&name), edit(&name, text)).expect("written");
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copied");
        }
    }
}

async fn start(
    config: ServerConfig,
    transcripts: Option<PathBuf>,
    gateway_key: Option<switchboard_core::grant::GatewaySigner>,
) -> Running {
    start_with(config, transcripts, gateway_key, None).await
}

async fn start_with(
    config: ServerConfig,
    transcripts: Option<PathBuf>,
    gateway_key: Option<switchboard_core::grant::GatewaySigner>,
    sim_script: Option<PathBuf>,
) -> Running {
    start_in(&examples_dir(), config, transcripts, gateway_key, sim_script).await
}

/// Local mode on the example in `dir`, run until the returned handle is dropped.
pub async fn start_in(
    dir: &std::path::Path,
    config: ServerConfig,
    transcripts: Option<PathBuf>,
    gateway_key: Option<switchboard_core::grant::GatewaySigner>,
    sim_script: Option<PathBuf>,
) -> Running {
    let key = gateway_key.unwrap_or_else(self::gateway_key);
    let options = LocalOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        bedrock: false,
        sim_script,
        transcripts,
        server: config,
        ca_file: None,
        gateway_key: Some(key.clone()),
        capacity: Default::default(),
        ..LocalOptions::default()
    };
    let local = local::start(dir, options).await.expect("local mode starts");
    let addr = local.server.local_addr().expect("bound");
    let runtime_addr = local.server.runtime_addr().expect("bound");
    let state = local.server.state();
    let (tx, rx) = oneshot::channel::<()>();
    let server = local.server;
    let done = tokio::spawn(async move {
        server
            .run(async move {
                let _ = rx.await;
            })
            .await
            .expect("server runs");
    });
    let keep: Vec<Box<dyn std::any::Any + Send>> = vec![Box::new(local.sim), Box::new(local.demo_tools)];
    Running { addr, runtime_addr, state, key, stop: Some(tx), done, _keep: keep }
}

pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub seen: Vec<ServerMessage>,
}

impl Client {
    pub async fn connect(url: &str) -> Self {
        Self::connect_with(url, &[]).await
    }

    /// Connects to `url` sending the extra request `headers`.
    pub async fn connect_with(url: &str, headers: &[(&'static str, &str)]) -> Self {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.into_client_request().expect("a WebSocket URL");
        for (name, value) in headers {
            request.headers_mut().insert(*name, value.parse().expect("a header value"));
        }
        let (ws, _) = tokio_tungstenite::connect_async(request).await.expect("websocket connects");
        Self { ws, seen: Vec::new() }
    }

    pub async fn start(url: &str, agent: Option<&str>) -> Self {
        let mut client = Self::connect(url).await;
        client
            .send(&ClientMessage::SessionStart(SessionStart { agent: agent.map(str::to_owned), ..Default::default() }))
            .await;
        client
    }

    pub async fn send(&mut self, message: &ClientMessage) {
        self.send_raw(&serde_json::to_string(message).expect("serialises")).await;
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.expect("frame sent");
    }

    /// Sends a frame; false once the server has closed the connection.
    pub async fn try_send_raw(&mut self, text: &str) -> bool {
        self.ws.send(Message::text(text)).await.is_ok()
    }

    /// Ends the connection with a normal close (1000): the client is done, the session ends.
    #[allow(dead_code, reason = "the gateway's tests use it, the runtime's do not")]
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
        while let Some(Ok(_)) = self.ws.next().await {}
    }

    pub async fn say(&mut self, text: &str) {
        self.send(&ClientMessage::BidiTextInput { text: text.into(), id: None }).await;
    }

    /// The next frame: a protocol message, or the close (code, reason), or None at the end.
    pub async fn next(&mut self) -> Option<Result<ServerMessage, (u16, String)>> {
        // Pings (the gateway's keep-alive) do not count as a message arriving.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("a message arrives in time; seen {:#?}", self.seen))?;
            match frame {
                Ok(Message::Text(text)) => {
                    let message: ServerMessage =
                        serde_json::from_str(text.as_str()).expect("server sends protocol JSON");
                    self.seen.push(message.clone());
                    return Some(Ok(message));
                }
                Ok(Message::Close(frame)) => {
                    return Some(Err(frame
                        .map(|f| (u16::from(f.code), f.reason.to_string()))
                        .unwrap_or((1005, String::new()))));
                }
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    /// The next frame as [`Client::next`] reads it, or `None` when nothing arrives within
    /// `patience`.
    #[allow(dead_code)] // the gateway's network tests; not every test binary reads with a patience
    pub async fn next_within(&mut self, patience: Duration) -> Option<Option<Result<ServerMessage, (u16, String)>>> {
        // One deadline: the pings skipped do not restart the patience.
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await.ok()? {
                Some(Ok(Message::Text(text))) => {
                    let message: ServerMessage =
                        serde_json::from_str(text.as_str()).expect("server sends protocol JSON");
                    self.seen.push(message.clone());
                    return Some(Some(Ok(message)));
                }
                Some(Ok(Message::Close(frame))) => {
                    let close =
                        frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
                    return Some(Some(Err(close)));
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Some(None),
            }
        }
    }

    /// Reads until `pred` holds; returns everything read (the match last).
    pub async fn until(&mut self, pred: impl Fn(&ServerMessage) -> bool) -> Vec<ServerMessage> {
        let mut got = Vec::new();
        loop {
            match self.next().await {
                Some(Ok(message)) => {
                    let done = pred(&message);
                    got.push(message);
                    if done {
                        return got;
                    }
                }
                other => panic!("connection ended before the expected message: {other:?}; got {got:#?}"),
            }
        }
    }

    /// Reads until the turn completes.
    pub async fn turn(&mut self) -> Vec<ServerMessage> {
        self.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await
    }

    /// From triage's greeting through idv's identity check as Ada Lovelace: asks for the
    /// balance, is handed to idv, gives the details; returns the turn that verified her.
    pub async fn verify_at_idv(&mut self) -> Vec<ServerMessage> {
        self.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
        self.say("I'd like to check my balance").await;
        self.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
        self.turn().await;
        self.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
        let verified = self.turn().await;
        assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
        verified
    }

    /// Reads until the server closes; returns the close code and reason.
    pub async fn closed(&mut self) -> (u16, String) {
        loop {
            match self.next().await {
                Some(Ok(_)) => continue,
                Some(Err(close)) => return close,
                None => return (1006, String::new()),
            }
        }
    }
}

/// The final assistant text in `messages`.
pub fn replies(messages: &[ServerMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream {
                role: switchboard_core::protocol::TranscriptRole::Assistant,
                text,
                is_final: true,
                ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The Example Bank's conversation from triage: the balance request goes to idv, the caller
/// is verified, and banking gives the balance (each turn read to its end).
pub async fn balance_via_idv(client: &mut Client) {
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    client.turn().await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.turn().await;
}

/// GETs `path` from `addr` over a real TCP connection; returns (status, body).
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_with(addr, path, &[]).await
}

/// [`get`] with request `headers`.
pub async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let headers: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The sum of all samples of metric `name` whose labels contain every `labels` pair.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// The private key of the tests' "gateway"; servers under test get its public key.
pub fn gateway_key() -> switchboard_core::grant::GatewaySigner {
    switchboard_core::grant::GatewaySigner::from_seed(&[42; 32])
}

/// A `session_start` for `agent` whose context the gateway signed with `key`, fresh now;
/// as the gateway does, with the identity assertion of the caller `memory` holds.
pub fn signed_start(
    key: &switchboard_core::grant::GatewaySigner,
    agent: &str,
    memory: std::collections::BTreeMap<String, serde_json::Value>,
) -> SessionStart {
    use switchboard_core::assertion::{IdentityClaims, sign_identity};
    let session_id = format!("gw-{}", uuid::Uuid::new_v4());
    let now_ms = switchboard_runtime::grants::now_ms();
    // The examples name no namespace: they are the default namespace's.
    let identity = memory.get("verifiedUser").map(|caller| {
        let claims = IdentityClaims::new(caller.clone(), "default", agent, &session_id, now_ms / 1000);
        sign_identity(key, &claims).expect("an identity assertion")
    });
    let context = switchboard_core::grant::SessionContext {
        session_id,
        namespace: "default".to_owned(),
        agent: agent.to_owned(),
        issued_at_ms: now_ms,
        nonce: uuid::Uuid::new_v4().to_string(),
        carried: switchboard_core::grant::Carried { memory, ..Default::default() },
        identity,
        ..Default::default()
    };
    SessionStart { agent: Some(agent.to_owned()), context: Some(key.sign(&context)), ..Default::default() }
}

/// The Example Bank's verified caller, as the idv agent remembers her.
pub fn ada() -> std::collections::BTreeMap<String, serde_json::Value> {
    [(
        "verifiedUser".to_owned(),
        serde_json::json!({ "name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56", "status": "active" }),
    )]
    .into()
}
