//! The gateway's connection to a runtime pod: a WebSocket to the pod's session path,
//! opened with a `session_start` whose context (memory, history, handoff) the gateway
//! signs ([`switchboard_core::grant`]), so the runtime can trust it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::SinkExt;
use futures_util::stream::{SplitSink, SplitStream, StreamExt};
use switchboard_core::grant::{GatewaySigner, SessionContext};
use switchboard_core::handoff::{HandoffContext, HistoryTurn, WorkflowSnapshot};
use switchboard_core::protocol::{ClientMessage, SessionStart};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
/// Frames towards the runtime.
pub type UpSink = SplitSink<Socket, Message>;
/// Frames from the runtime.
pub type UpStream = SplitStream<Socket>;

/// What the runtime session is opened with.
#[derive(Debug)]
pub struct Opening<'a> {
    /// The gateway's session id.
    pub session_id: &'a str,
    /// The Agent's namespace and name (the runtime checks the grant is for it).
    pub namespace: &'a str,
    /// The Agent's name.
    pub agent: &'a str,
    /// The pod's session path (`/v1/session`).
    pub path: &'a str,
    /// The client's voice choice and modalities.
    pub voice: Option<String>,
    /// `text`, `audio`.
    pub modalities: Vec<String>,
    /// Session memory.
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Earlier conversation.
    pub history: Vec<HistoryTurn>,
    /// The handoff that brings the session here.
    pub handoff: Option<HandoffContext>,
    /// Without a handoff: the agent the session may return to.
    pub return_to: Option<String>,
    /// Without a handoff: where the session is in the agent's workflow.
    pub workflow: Option<WorkflowSnapshot>,
}

/// A runtime could not be reached.
#[derive(Debug, thiserror::Error)]
#[error("cannot open a session on the runtime pod {addr}: {message}")]
pub struct ConnectError {
    /// The pod.
    pub addr: SocketAddr,
    /// Why.
    pub message: String,
}

/// Connects to the runtime at `addr` and sends the signed `session_start`.
pub async fn open(
    addr: SocketAddr,
    opening: Opening<'_>,
    key: &GatewaySigner,
    timeout: Duration,
) -> Result<(UpSink, UpStream), ConnectError> {
    let error = |message: String| ConnectError { addr, message };
    let url = format!("ws://{addr}{}", opening.path);
    let config = WebSocketConfig::default().read_buffer_size(crate::server::WS_READ_BUFFER);
    let connecting = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true);
    let (socket, _) = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| error(format!("no answer within {} ms", timeout.as_millis())))?
        .map_err(|e| error(e.to_string()))?;
    // Replies stream as many small frames (see the runtime's server).
    if let MaybeTlsStream::Plain(tcp) = socket.get_ref() {
        let _ = tcp.set_nodelay(true);
    }
    let (mut sink, stream) = socket.split();
    let context = SessionContext {
        session_id: opening.session_id.to_owned(),
        namespace: opening.namespace.to_owned(),
        agent: opening.agent.to_owned(),
        issued_at_ms: now_ms(),
        nonce: uuid::Uuid::new_v4().to_string(),
        memory: opening.memory,
        history: opening.history,
        handoff: opening.handoff,
        return_to: opening.return_to,
        workflow: opening.workflow,
    };
    let start = SessionStart {
        agent: Some(opening.agent.to_owned()),
        voice: opening.voice,
        modalities: opening.modalities,
        context: Some(key.sign(&context)),
        ..Default::default()
    };
    let text = serde_json::to_string(&ClientMessage::SessionStart(start)).map_err(|e| error(e.to_string()))?;
    sink.send(Message::text(text)).await.map_err(|e| error(e.to_string()))?;
    Ok((sink, stream))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}
