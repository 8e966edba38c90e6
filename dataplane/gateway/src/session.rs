//! One client session through the gateway: the client's `session_start` picks the Agent,
//! the gateway opens the session on a ready pod of it, then relays frames both ways. It
//! keeps the session's state — memory from the runtime's `memory_update`s, the final
//! transcript lines as history — and acts on what runtimes cannot do alone:
//!
//! - **Handoff**: a runtime that hands off sends `handoff` (with the context) and closes
//!   with 4000; the gateway opens the session on a pod of the target Agent with that context
//!   signed, and keeps relaying on the same client socket. When the target has no ready pod,
//!   the client is told (`bidi_error` `handoff_failed`) and the session goes on with the
//!   source Agent on a fresh session that carries the memory and history.
//! - **A lost pod**: when a runtime connection breaks without a close, the session reopens
//!   on another ready pod of the same Agent with its memory and history, and the client gets
//!   `bidi_connection_restart` (`runtime_lost`); after [`MAX_RECOVERIES`] failures in a row,
//!   the client is closed with 1011.
//!
//! Session context from clients is refused, as on runtimes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use switchboard_core::handoff::HandoffContext;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code, decode_client};
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame as UpCloseFrame;

use crate::Gateway;
use crate::balancer::Lease;
use crate::directory::Target;
use crate::kept::Kept;
use crate::upstream::{self, Opening, UpSink, UpStream};

/// Failed reconnections in a row after which a session gives up.
pub const MAX_RECOVERIES: u32 = 3;
/// Client messages kept while the runtime connection is being replaced.
const MAX_UNSENT: usize = 64;
/// How long a send to the client may block before the client counts as gone.
const SLOW_CLIENT: Duration = Duration::from_secs(5);

type ClientSink = SplitSink<WebSocket, Message>;
type ClientStream = SplitStream<WebSocket>;

/// A close to send: code and reason (at most 123 bytes; details go in a `bidi_error`).
type Close = (u16, String);

/// Serves one upgraded client socket until the session ends.
pub async fn serve(socket: WebSocket, gateway: Arc<Gateway>, query_agent: Option<String>) {
    let (mut client_tx, mut client_rx) = socket.split();
    let close = match start(&gateway, query_agent, &mut client_tx, &mut client_rx).await {
        Ok(mut session) => {
            let close = session.relay(&mut client_tx, &mut client_rx).await;
            gateway.metrics.live.with_label_values(&[&session.target.key()]).dec();
            close
        }
        Err(close) => close,
    };
    let (code, reason) = close;
    let _ = client_tx.send(Message::Close(Some(CloseFrame { code, reason: Utf8Bytes::from(reason) }))).await;
    let _ = client_tx.close().await;
}

/// Reads the client's first message and opens the session on the Agent it asks for.
async fn start(
    gateway: &Arc<Gateway>,
    query_agent: Option<String>,
    client_tx: &mut ClientSink,
    client_rx: &mut ClientStream,
) -> Result<Session, Close> {
    let first = match tokio::time::timeout(gateway.config.start_timeout, client_rx.next()).await {
        Err(_) => return Err((close_code::NORMAL, "no session_start in time".into())),
        Ok(Some(Ok(Message::Text(text)))) => decode_client(text.as_str()),
        Ok(_) => return Err((close_code::NORMAL, String::new())),
    };
    let (start, pending) = match first {
        Ok(ClientMessage::SessionStart(start)) => (start, None),
        Ok(other) => (SessionStart::default(), Some(other)),
        Err(error) => {
            let message = ServerMessage::error(error.code(), error.to_string(), false);
            return Err(refuse(gateway, client_tx, "bad_start", message, close_code::BAD_START).await);
        }
    };
    if let Some(fields) = client_context(&start) {
        let message = ServerMessage::error(
            "context_refused",
            format!("session_start.{fields} is not accepted from clients: session context is the gateway's"),
            false,
        );
        return Err(refuse(gateway, client_tx, "context_refused", message, close_code::BAD_START).await);
    }
    let requested = query_agent.or(start.agent.clone());
    let directory = gateway.directory.borrow().clone();
    let target = match directory.for_client(requested.as_deref()) {
        Ok(target) => target,
        Err(error) => {
            let message = ServerMessage::error(error.metric_label(), error.to_string(), false);
            return Err(refuse(gateway, client_tx, error.metric_label(), message, error.close_code()).await);
        }
    };
    let mut session = Session {
        gateway: gateway.clone(),
        id: format!("gw-{}", uuid::Uuid::new_v4()),
        target,
        voice: start.voice,
        modalities: start.modalities,
        kept: Kept::default(),
        handoff_started: None,
        generation: 0,
        held_close: None,
        unsent: Vec::new(),
        upstream: None,
    };
    if let Err(message) = session.connect(None, None).await {
        // A close reason is at most 123 bytes: the bidi_error has the details.
        let message = ServerMessage::error("no_runtime", message, false);
        return Err(refuse(gateway, client_tx, "no_runtime", message, close_code::TRY_AGAIN_LATER).await);
    }
    gateway.metrics.routed.with_label_values(&[&session.target.key()]).inc();
    gateway.metrics.live.with_label_values(&[&session.target.key()]).inc();
    if let Some(pending) = pending
        && let Ok(text) = serde_json::to_string(&pending)
    {
        session.forward_text(&text).await;
    }
    Ok(session)
}

/// The context fields a client's `session_start` tried to set, if any.
fn client_context(start: &SessionStart) -> Option<String> {
    let mut fields = start.unsigned_context();
    if start.context.is_some() {
        fields.push("context");
    }
    (!fields.is_empty()).then(|| fields.join(", session_start."))
}

/// Counts a refused session, tells the client why, and returns the close.
async fn refuse(
    gateway: &Gateway,
    client_tx: &mut ClientSink,
    reason: &str,
    message: ServerMessage,
    code: u16,
) -> Close {
    gateway.metrics.refused.with_label_values(&[reason]).inc();
    let _ = client_tx.send(Message::text(message.to_json())).await;
    (code, reason.replace('_', " "))
}

/// The runtime connection of a session, with its hold on the pod.
struct Upstream {
    tx: UpSink,
    rx: UpStream,
    lease: Lease,
}

/// One session's state, owned by the gateway.
struct Session {
    gateway: Arc<Gateway>,
    id: String,
    /// The Agent serving the session now.
    target: Target,
    voice: Option<String>,
    modalities: Vec<String>,
    /// Memory, history, return target, announced handoff, inputs in flight.
    kept: Kept,
    /// When the last handoff began (the source's close), until the target's first frame.
    handoff_started: Option<(Instant, String, String)>,
    /// Runtime streams opened for this session after the first.
    generation: u64,
    /// The runtime's `bidi_connection_close`, held until its close shows whether the
    /// session ends (then the client gets it) or moves on (then it is dropped).
    held_close: Option<String>,
    /// Client messages (other than typed inputs, which `kept` tracks) the runtime
    /// connection refused as it broke: sent to the next.
    unsent: Vec<UpMessage>,
    upstream: Option<Upstream>,
}

/// What the relay does after a frame.
enum Next {
    Continue,
    End(Close),
}

impl Session {
    /// Relays until the client or the session ends; returns the client's close.
    async fn relay(&mut self, client_tx: &mut ClientSink, client_rx: &mut ClientStream) -> Close {
        let shutdown = self.gateway.shutdown.clone();
        loop {
            let Some(upstream) = self.upstream.as_mut() else {
                return (close_code::INTERNAL, "the session lost its runtime".into());
            };
            let next = tokio::select! {
                biased;
                () = shutdown.cancelled() => Next::End((close_code::GOING_AWAY, "the gateway is shutting down; reconnect".into())),
                frame = client_rx.next() => self.client_frame(frame).await,
                frame = upstream.rx.next() => self.runtime_frame(frame, client_tx).await,
            };
            if let Next::End(close) = next {
                if let Some(mut upstream) = self.upstream.take() {
                    let _ = upstream.tx.close().await;
                }
                return close;
            }
        }
    }

    async fn client_frame(&mut self, frame: Option<Result<Message, axum::Error>>) -> Next {
        let message = match frame {
            Some(Ok(Message::Text(text))) => {
                self.forward_text(text.as_str()).await;
                return Next::Continue;
            }
            Some(Ok(Message::Binary(data))) => UpMessage::binary(data),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Next::Continue,
            Some(Ok(Message::Close(_))) | None => return Next::End((close_code::NORMAL, String::new())),
            Some(Err(error)) => {
                let text = error.to_string();
                return if text.contains("too long") || text.contains("Space limit") {
                    let limit = self.gateway.config.max_message_bytes;
                    Next::End((close_code::TOO_BIG, format!("a message exceeded the limit of {limit} bytes")))
                } else {
                    Next::End((close_code::NORMAL, String::new()))
                };
            }
        };
        self.send_runtime(message).await;
        Next::Continue
    }

    /// Sends a client's text frame to the runtime. A typed input is tracked until the
    /// runtime takes it up ([`Kept::track`]) rather than kept as unsent.
    async fn forward_text(&mut self, text: &str) {
        if self.kept.track(text) {
            if let Some(upstream) = self.upstream.as_mut() {
                let _ = upstream.tx.send(UpMessage::text(text)).await;
            }
        } else {
            self.send_runtime(UpMessage::text(text)).await;
        }
    }

    /// Sends to the runtime. A message the connection refuses is kept for the connection
    /// that replaces it (the failure itself shows up on the read side).
    async fn send_runtime(&mut self, message: UpMessage) {
        let Some(upstream) = self.upstream.as_mut() else { return };
        // A clone shares the frame's bytes.
        let copy = message.clone();
        if upstream.tx.send(message).await.is_err() && self.unsent.len() < MAX_UNSENT {
            self.unsent.push(copy);
        }
    }

    async fn runtime_frame(
        &mut self,
        frame: Option<Result<UpMessage, tokio_tungstenite::tungstenite::Error>>,
        client_tx: &mut ClientSink,
    ) -> Next {
        let message = match frame {
            Some(Ok(UpMessage::Text(text))) => {
                if text.starts_with(r#"{"type":"bidi_connection_close""#) {
                    self.held_close = Some(text.as_str().to_owned());
                    return Next::Continue;
                }
                self.kept.observe(text.as_str());
                Message::text(text.as_str())
            }
            Some(Ok(UpMessage::Binary(data))) => Message::Binary(data),
            Some(Ok(UpMessage::Ping(_) | UpMessage::Pong(_) | UpMessage::Frame(_))) => return Next::Continue,
            Some(Ok(UpMessage::Close(frame))) => return self.runtime_closed(frame, client_tx).await,
            None | Some(Err(_)) => return self.recover("runtime_lost", client_tx).await,
        };
        self.first_frame_after_handoff();
        match tokio::time::timeout(SLOW_CLIENT, client_tx.send(message)).await {
            Ok(Ok(())) => Next::Continue,
            Ok(Err(_)) => Next::End((close_code::NORMAL, String::new())),
            Err(_) => Next::End((close_code::RATE_LIMITED, "the client does not read its messages".into())),
        }
    }

    fn first_frame_after_handoff(&mut self) {
        if let Some((started, from, to)) = self.handoff_started.take() {
            let gap = started.elapsed().as_secs_f64();
            self.gateway.metrics.handoff_gap.with_label_values(&[&from, &to]).observe(gap);
        }
    }

    async fn runtime_closed(&mut self, frame: Option<UpCloseFrame>, client_tx: &mut ClientSink) -> Next {
        let (code, reason) = frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
        let held_close = self.held_close.take();
        match self.kept.pending_handoff.take() {
            Some((to, context)) if code == close_code::HANDOFF => self.hand_off(to, context, client_tx).await,
            _ if code == close_code::GOING_AWAY || code == close_code::TRY_AGAIN_LATER => {
                // The pod is draining or full: the session moves to another pod.
                self.recover("runtime_draining", client_tx).await
            }
            _ => {
                if let Some(text) = held_close {
                    let _ = tokio::time::timeout(SLOW_CLIENT, client_tx.send(Message::text(text))).await;
                }
                Next::End((if code == 1005 { close_code::NORMAL } else { code }, reason))
            }
        }
    }

    /// Moves the session to `to` with `context`, or keeps it with the source Agent.
    async fn hand_off(&mut self, to: String, context: HandoffContext, client_tx: &mut ClientSink) -> Next {
        let from = self.target.key();
        let return_to = self.kept.hand_over(&context);
        let directory = self.gateway.directory.borrow().clone();
        let error = match directory.for_handoff(&self.target.route.namespace, &to) {
            Ok(target) => {
                let previous = std::mem::replace(&mut self.target, target);
                match self.connect(Some(context), None).await {
                    Ok(()) => {
                        self.kept.return_to = return_to;
                        let to = self.target.key();
                        let metrics = &self.gateway.metrics;
                        metrics.live.with_label_values(&[&from]).dec();
                        metrics.live.with_label_values(&[&to]).inc();
                        metrics.handoffs.with_label_values(&[&from, &to]).inc();
                        self.handoff_started = Some((Instant::now(), from, to));
                        return Next::Continue;
                    }
                    Err(message) => {
                        self.target = previous;
                        message
                    }
                }
            }
            Err(error) => error.to_string(),
        };
        self.gateway.metrics.refused.with_label_values(&["handoff_failed"]).inc();
        let message =
            format!("the handoff to {to} failed ({error}); you are still talking to {}", self.target.route.name);
        if send(client_tx, ServerMessage::error("handoff_failed", message, true)).await.is_err() {
            return Next::End((close_code::NORMAL, String::new()));
        }
        self.reopen(client_tx, "handoff_failed").await
    }

    /// Reopens the session on another pod of the same Agent after its runtime was lost.
    async fn recover(&mut self, reason: &str, client_tx: &mut ClientSink) -> Next {
        let lost = self.upstream.take().map(|u| u.lease.addr());
        self.gateway.metrics.migrated.with_label_values(&[&self.target.key(), reason]).inc();
        if let Some(addr) = lost {
            tracing::info!(session = %self.id, agent = %self.target.key(), %addr, reason, "moving the session to another pod");
        }
        self.reopen_avoiding(client_tx, reason, lost).await
    }

    async fn reopen(&mut self, client_tx: &mut ClientSink, reason: &str) -> Next {
        self.upstream = None;
        self.reopen_avoiding(client_tx, reason, None).await
    }

    async fn reopen_avoiding(&mut self, client_tx: &mut ClientSink, reason: &str, avoid: Option<SocketAddr>) -> Next {
        let mut avoid = avoid;
        for _ in 0..MAX_RECOVERIES {
            let key = self.target.key();
            if let Some(current) =
                self.gateway.directory.borrow().lookup(&self.target.route.namespace, &self.target.route.name)
            {
                self.target = current;
            }
            match self.connect(None, avoid).await {
                Ok(()) => {
                    self.generation += 1;
                    let restart =
                        ServerMessage::BidiConnectionRestart { reason: reason.to_owned(), generation: self.generation };
                    return match send(client_tx, restart).await {
                        Ok(()) => Next::Continue,
                        Err(()) => Next::End((close_code::NORMAL, String::new())),
                    };
                }
                Err(message) => {
                    tracing::warn!(session = %self.id, agent = %key, "{message}");
                    avoid = None;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        let message = format!(
            "the agent {} has no pod that can take this session now; reconnect shortly",
            self.target.route.name
        );
        let _ = send(client_tx, ServerMessage::error("no_runtime", message, false)).await;
        Next::End((close_code::INTERNAL, "no runtime pod could take the session".into()))
    }

    /// Opens the session on a ready pod of the current target (not `avoid` if another is
    /// ready), with the session's memory and history, or with `handoff`'s context.
    async fn connect(&mut self, handoff: Option<HandoffContext>, avoid: Option<SocketAddr>) -> Result<(), String> {
        let Some(lease) = self.gateway.balancer.pick(&self.target.ready, avoid) else {
            return Err(format!("agent {} has no ready pod", self.target.route.name));
        };
        // A handed-over session carries memory and history inside the handoff context.
        let (memory, history) = if handoff.is_some() {
            (BTreeMap::new(), Vec::new())
        } else {
            (self.kept.memory.clone(), self.kept.history.clone())
        };
        let opening = Opening {
            session_id: &self.id,
            agent: &self.target.route.name,
            path: &self.target.route.path,
            voice: self.voice.clone(),
            modalities: self.modalities.clone(),
            memory,
            history,
            return_to: if handoff.is_some() { None } else { self.kept.return_to.clone() },
            handoff,
        };
        let config = &self.gateway.config;
        let (tx, rx) = upstream::open(lease.addr(), opening, &self.gateway.key, config.connect_timeout)
            .await
            .map_err(|e| e.to_string())?;
        let mut upstream = Upstream { tx, rx, lease };
        for message in self.unsent.drain(..) {
            let _ = upstream.tx.feed(message).await;
        }
        for frame in self.kept.replay() {
            let _ = upstream.tx.feed(UpMessage::text(frame)).await;
        }
        let _ = upstream.tx.flush().await;
        self.upstream = Some(upstream);
        Ok(())
    }
}

async fn send(client_tx: &mut ClientSink, message: ServerMessage) -> Result<(), ()> {
    match tokio::time::timeout(SLOW_CLIENT, client_tx.send(Message::text(message.to_json()))).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}
