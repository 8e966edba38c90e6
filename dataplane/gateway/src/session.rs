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
//! - **Resume** ([`crate::resume`]): every message to the client is numbered and kept
//!   (bounded) for replay; every `bidi_connection_start` gets a fresh resume token and its
//!   number. A client gone without a goodbye leaves the session parked for the resume
//!   window (after its runtime finishes the turn under way); a `session_start` with the
//!   token and the last number received continues it — the missed messages first, then
//!   a runtime session with the memory and history. With a shared store, a draining
//!   gateway parks every session at once and tells its clients to resume elsewhere.
//!
//! Session context from clients is refused, as on runtimes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use switchboard_core::handoff::HandoffContext;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code, decode_client};
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame as UpCloseFrame;
use tokio_util::sync::CancellationToken;

use crate::Gateway;
use crate::auth::{Admission, Bucket, Refusal};
use crate::balancer::Lease;
use crate::directory::Target;
use crate::kept::Kept;
use crate::resume::{self, Frame, Missed, Parked, Replay, Taken};
use crate::upstream::{self, Opening, UpSink, UpStream};

/// Failed reconnections in a row after which a session gives up.
pub const MAX_RECOVERIES: u32 = 3;
/// Client messages kept while the runtime connection is being replaced.
const MAX_UNSENT: usize = 64;
/// How long a send to the client may block before the client counts as gone.
const SLOW_CLIENT: Duration = Duration::from_secs(5);
/// How long the store remembers a live session's token (refreshed by every new token; a
/// gateway that dies leaves it to expire).
const HELD_TTL: Duration = Duration::from_secs(3600);

type ClientSink = SplitSink<WebSocket, Message>;
type ClientStream = SplitStream<WebSocket>;

/// A close to send: code and reason (at most 123 bytes; details go in a `bidi_error`).
type Close = (u16, String);

/// Serves one upgraded client socket until the session ends or is parked. The client's
/// identity (`admission.key`; empty without checks) binds its resume tokens, and its
/// key's message budget applies. The key's session slot is given back before the client
/// is told the session ended, so a client that reconnects at once is not refused.
pub async fn serve(socket: WebSocket, gateway: Arc<Gateway>, query_agent: Option<String>, admission: Admission) {
    let (mut client_tx, mut client_rx) = socket.split();
    let identity = admission.key.clone().unwrap_or_default();
    let close = match start(&gateway, query_agent, &identity, &mut client_tx, &mut client_rx).await {
        Ok(mut session) => {
            let end = session.relay(&mut client_tx, &mut client_rx, &admission).await;
            gateway.metrics.live.with_label_values(&[&session.target.key()]).dec();
            match end {
                Next::End(close) => {
                    session.detach().await;
                    Some(close)
                }
                Next::Continue | Next::Gone => {
                    session.park().await;
                    None
                }
                Next::Move(close) => {
                    // The store already marks the session as held, so a resume elsewhere
                    // waits for the park.
                    drop(admission);
                    close_client(&mut client_tx, close).await;
                    session.park().await;
                    return;
                }
            }
        }
        Err(close) => Some(close),
    };
    drop(admission);
    if let Some(close) = close {
        close_client(&mut client_tx, close).await;
    }
}

async fn close_client(client_tx: &mut ClientSink, (code, reason): Close) {
    let close = Message::Close(Some(CloseFrame { code, reason: Utf8Bytes::from(reason) }));
    let _ = tokio::time::timeout(SLOW_CLIENT, client_tx.send(close)).await;
    let _ = tokio::time::timeout(SLOW_CLIENT, client_tx.close()).await;
}

/// Reads the client's first message and opens the session on the Agent it asks for, or
/// resumes the session its token names.
async fn start(
    gateway: &Arc<Gateway>,
    query_agent: Option<String>,
    identity: &str,
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
    if let Some(token) = &start.resume_token {
        return resume(gateway, identity, token, start.last_seq, client_tx).await;
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
        identity: identity.to_owned(),
        key: None,
        superseded: CancellationToken::new(),
        missed: None,
        target,
        voice: start.voice,
        modalities: start.modalities,
        kept: Kept::default(),
        replay: Replay::default(),
        handoff_started: None,
        generation: 0,
        pod_draining: false,
        waiting_for_pod: false,
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

/// Continues the session parked under `token` for `identity`: the messages after
/// `last_seq` first, then a runtime session with its memory and history (or the handoff
/// its runtime made while the client was away).
async fn resume(
    gateway: &Arc<Gateway>,
    identity: &str,
    token: &str,
    last_seq: Option<u64>,
    client_tx: &mut ClientSink,
) -> Result<Session, Close> {
    let key = resume::store_key(identity, token);
    let config = &gateway.config;
    // A session still attached here whose client is back on a new socket: the old one is
    // dead. It parks at once.
    if let Some(attached) = gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        attached.cancel();
    }
    // A session still held (its gateway has not seen the client go yet) or finishing its
    // turn: wait for it to park.
    let parked = match gateway.store.take(&key, config.park_grace + Duration::from_secs(5)).await {
        Ok(Taken::Parked(parked)) => *parked,
        Ok(Taken::Held) => {
            let message =
                "the session is still attached to another connection of yours; close it, or resume again shortly";
            let message = ServerMessage::error("session_attached", message, false);
            return Err(refuse(gateway, client_tx, "session_attached", message, close_code::TRY_AGAIN_LATER).await);
        }
        Ok(Taken::Unknown) => {
            let message = format!(
                "the resume token is unknown or expired (a session waits {} s for its client, and each \
                 bidi_connection_start brings a new token); start a new session without resume_token",
                config.resume_window.as_secs()
            );
            let message = ServerMessage::error("resume_refused", message, false);
            return Err(refuse(gateway, client_tx, "resume_refused", message, close_code::RESUME_REFUSED).await);
        }
        Err(error) => {
            tracing::warn!("resume: {error}");
            let message = ServerMessage::error("store_unavailable", format!("{error}; try again shortly"), false);
            return Err(refuse(gateway, client_tx, "store_unavailable", message, close_code::TRY_AGAIN_LATER).await);
        }
    };
    let Some(target) = gateway.directory.borrow().lookup(&parked.namespace, &parked.agent) else {
        let message = format!("the agent {}/{} this session was with no longer exists", parked.namespace, parked.agent);
        let message = ServerMessage::error("unknown_agent", message, false);
        return Err(refuse(gateway, client_tx, "unknown_agent", message, close_code::UNKNOWN_AGENT).await);
    };
    let mut session = Session {
        gateway: gateway.clone(),
        id: parked.session_id.clone(),
        identity: identity.to_owned(),
        key: None,
        superseded: CancellationToken::new(),
        missed: None,
        target,
        voice: parked.voice.clone(),
        modalities: parked.modalities.clone(),
        kept: parked.kept.clone(),
        replay: parked.replay.clone(),
        handoff_started: None,
        generation: parked.generation,
        pod_draining: false,
        waiting_for_pod: false,
        held_close: None,
        unsent: Vec::new(),
        upstream: None,
    };
    if let Err(message) = session.reopen_parked(parked.handoff.clone()).await {
        // The client may try again with the same token.
        if let Err(error) = gateway.store.park(&key, &parked, config.resume_window).await {
            tracing::warn!(session = %session.id, "cannot park the session again: {error}");
        }
        let message = ServerMessage::error("no_runtime", format!("{message}; resume again shortly"), false);
        return Err(refuse(gateway, client_tx, "no_runtime", message, close_code::TRY_AGAIN_LATER).await);
    }
    // Sent first by the relay: a client that fails meanwhile leaves the session parked.
    session.missed = Some(session.replay.since(last_seq));
    gateway.metrics.resumed.with_label_values(&[&session.target.key()]).inc();
    gateway.metrics.live.with_label_values(&[&session.target.key()]).inc();
    tracing::info!(session = %session.id, agent = %session.target.key(), "resumed");
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
    /// The messages sent to the client, numbered, for replay.
    replay: Replay,
    /// The client's identity (its key's name): resume tokens are bound to it.
    identity: String,
    /// Where the session parks: the store key of the resume token the client was given
    /// last (none before the first `bidi_connection_start`).
    key: Option<String>,
    /// Cancelled when the client resumes on a new socket while this one seems alive.
    superseded: CancellationToken,
    /// On resume: the messages the client missed, sent before anything else.
    missed: Option<Missed>,
    /// When the last handoff began (the source's close), until the target's first frame.
    handoff_started: Option<(Instant, String, String)>,
    /// Runtime streams opened for this session after the first.
    generation: u64,
    /// The serving pod said it drains: the session moves at its next turn boundary.
    pod_draining: bool,
    /// A draining pod's session waits for another ready pod (logged once).
    waiting_for_pod: bool,
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
    /// The session ends; the client gets this close.
    End(Close),
    /// The client went away without a goodbye: the session waits for it to resume.
    Gone,
    /// The session moves to another gateway replica: parked, the client told to resume.
    Move(Close),
}

impl Session {
    /// Relays until the client or the session ends, or the client goes away (then the
    /// runtime connection is still open, for [`Session::park`]).
    async fn relay(&mut self, client_tx: &mut ClientSink, client_rx: &mut ClientStream, admission: &Admission) -> Next {
        let shutdown = self.gateway.shutdown.clone();
        let draining = self.gateway.draining.clone();
        // With a shared store the session can move to another replica at once.
        let movable = self.gateway.store.is_shared();
        let superseded = self.superseded.clone();
        let config = &self.gateway.config;
        let (idle_timeout, mut budget) = (config.idle_timeout, Bucket::new(config.session_rate));
        // Re-armed only when it fires (resetting a timer per frame costs more than a clock
        // read).
        let idle = tokio::time::sleep(idle_timeout);
        tokio::pin!(idle);
        let mut last_activity = std::time::Instant::now();
        if let Some(missed) = self.missed.take()
            && let Err(next) = self.catch_up(client_tx, missed).await
        {
            return next;
        }
        // Ready pods come and go: a session on a draining pod moves when another is ready.
        let mut directory = self.gateway.directory.clone();
        directory.mark_unchanged();
        loop {
            let pod_draining = self.pod_draining;
            let Some(upstream) = self.upstream.as_mut() else {
                return Next::End((close_code::INTERNAL, "the session lost its runtime".into()));
            };
            let next = tokio::select! {
                biased;
                () = draining.cancelled(), if movable => Next::Move(reconnect_elsewhere()),
                () = superseded.cancelled() => Next::Gone,
                () = shutdown.cancelled() => Next::End((close_code::GOING_AWAY, "the gateway is shutting down; reconnect".into())),
                Ok(()) = directory.changed(), if pod_draining => self.move_if_between_turns(client_tx).await,
                () = &mut idle => {
                    if last_activity.elapsed() < idle_timeout {
                        // Traffic since it was armed: wait for the rest of the timeout.
                        idle.as_mut().reset(tokio::time::Instant::from_std(last_activity) + idle_timeout);
                        Next::Continue
                    } else {
                        let message = format!("nothing came from the client or the agent for {} s; reconnect or resume to go on", idle_timeout.as_secs());
                        self.refuse_message(client_tx, Refusal { code: close_code::IDLE_TIMEOUT, message, reason: "idle_timeout" }).await
                    }
                }
                frame = client_rx.next() => {
                    last_activity = std::time::Instant::now();
                    let counted = matches!(frame, Some(Ok(Message::Text(_) | Message::Binary(_))));
                    let over = if !counted {
                        Ok(())
                    } else if budget.take(std::time::Instant::now()) {
                        admission.allow_message()
                    } else {
                        let message = format!("more than {} messages a second on this session; send fewer", budget.per_second());
                        Err(Refusal { code: close_code::RATE_LIMITED, message, reason: "session_rate" })
                    };
                    match over {
                        Ok(()) => self.client_frame(frame).await,
                        Err(refusal) => self.refuse_message(client_tx, refusal).await,
                    }
                }
                frame = upstream.rx.next() => {
                    // An agent that is still answering keeps the session alive.
                    last_activity = std::time::Instant::now();
                    self.runtime_frame(frame, client_tx).await
                }
            };
            match next {
                Next::Continue => {}
                Next::End(close) => {
                    if let Some(mut upstream) = self.upstream.take() {
                        let _ = upstream.tx.close().await;
                    }
                    return Next::End(close);
                }
                gone_or_moved => return gone_or_moved,
            }
        }
    }

    /// Ends the session for a limit the client broke: the `bidi_error` says which and what
    /// to do, the close has its code.
    async fn refuse_message(&mut self, client_tx: &mut ClientSink, refusal: Refusal) -> Next {
        self.gateway.metrics.refused.with_label_values(&[refusal.reason]).inc();
        let _ = self.deliver(client_tx, ServerMessage::error(refusal.reason, refusal.message, false).into()).await;
        Next::End((refusal.code, refusal.reason.replace('_', " ")))
    }

    /// Sends a resumed client what it missed, and what could not be kept.
    async fn catch_up(&mut self, client_tx: &mut ClientSink, missed: Missed) -> Result<(), Next> {
        for frame in missed.frames {
            send_unkept(client_tx, frame.into_message()).await?;
        }
        if let Some((first, last)) = missed.gap {
            let message = format!("messages {first} to {last} were sent while you were away and are no longer held");
            self.deliver(client_tx, ServerMessage::error("replay_gap", message, true).into()).await?;
        }
        Ok(())
    }

    /// Numbers and keeps a message for the client, and sends it. `Err` is what the relay
    /// does next: the client's socket failed (it is gone: the session waits for it, and
    /// the message is replayed), or the client does not read (closed).
    async fn deliver(&mut self, client_tx: &mut ClientSink, frame: Frame) -> Result<(), Next> {
        let config = &self.gateway.config;
        self.replay.record(frame.clone(), config.replay_messages, config.replay_bytes);
        send_unkept(client_tx, frame.into_message()).await
    }

    /// A runtime's `bidi_connection_start`, given the session's number and a fresh resume
    /// token. It is not kept for replay: a resumed client gets a new one.
    async fn stamp_start(&mut self, text: &str) -> Option<String> {
        let Ok(ServerMessage::BidiConnectionStart { session_id, agent, mode, model, .. }) = serde_json::from_str(text)
        else {
            return None;
        };
        let token = resume::new_token();
        self.hold(resume::store_key(&self.identity, &token)).await;
        let seq = self.replay.skip();
        let stamped = ServerMessage::BidiConnectionStart {
            session_id,
            agent,
            mode,
            model,
            resume_token: Some(token),
            seq: Some(seq),
        };
        Some(stamped.to_json())
    }

    /// Registers the session under `key` (its newest token's), here and in the store, so
    /// a resume with that token finds it while it is still attached; the previous key
    /// is released.
    async fn hold(&mut self, key: String) {
        {
            let mut attached = self.gateway.attached.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(old) = &self.key {
                attached.remove(old);
            }
            attached.insert(key.clone(), self.superseded.clone());
        }
        let store = &self.gateway.store;
        if let Some(old) = self.key.replace(key.clone())
            && let Err(error) = store.unmark(&old).await
        {
            tracing::warn!(session = %self.id, "{error}");
        }
        if let Err(error) = store.mark_parking(&key, HELD_TTL).await {
            tracing::warn!(session = %self.id, "cannot register the session for resume: {error}");
        }
    }

    /// The session ended: nothing waits for a resume.
    async fn detach(&mut self) {
        let Some(key) = self.key.take() else { return };
        self.gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        if let Err(error) = self.gateway.store.unmark(&key).await {
            tracing::warn!(session = %self.id, "{error}");
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
            Some(Ok(Message::Close(_))) => return Next::End((close_code::NORMAL, String::new())),
            None => return Next::Gone,
            Some(Err(error)) => {
                return if crate::server::oversized(&error) {
                    let limit = self.gateway.config.max_message_bytes;
                    Next::End((close_code::TOO_BIG, format!("a message exceeded the limit of {limit} bytes")))
                } else {
                    Next::Gone
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
        let frame = match frame {
            Some(Ok(UpMessage::Text(text))) => {
                if text.starts_with(r#"{"type":"bidi_connection_close""#) {
                    self.held_close = Some(text.as_str().to_owned());
                    return Next::Continue;
                }
                if text.starts_with(r#"{"type":"bidi_connection_draining""#) {
                    // The pod shuts down: the session moves at its next turn boundary.
                    self.pod_draining = true;
                    return self.move_if_between_turns(client_tx).await;
                }
                if text.starts_with(r#"{"type":"bidi_connection_start""#)
                    && let Some(stamped) = self.stamp_start(text.as_str()).await
                {
                    self.first_frame_after_handoff();
                    return send_unkept(client_tx, Message::text(stamped)).await.err().unwrap_or(Next::Continue);
                }
                self.kept.observe(text.as_str());
                Frame::Text(Utf8Bytes::from(text.as_str()))
            }
            Some(Ok(UpMessage::Binary(data))) => Frame::Binary(data),
            Some(Ok(UpMessage::Ping(_) | UpMessage::Pong(_) | UpMessage::Frame(_))) => return Next::Continue,
            Some(Ok(UpMessage::Close(frame))) => return self.runtime_closed(frame, client_tx).await,
            None | Some(Err(_)) => return self.recover("runtime_lost", client_tx).await,
        };
        self.first_frame_after_handoff();
        match self.deliver(client_tx, frame).await {
            Ok(()) if self.pod_draining => self.move_if_between_turns(client_tx).await,
            Ok(()) => Next::Continue,
            Err(next) => next,
        }
    }

    /// On a draining pod: moves the session to another ready pod of its Agent unless a
    /// turn is under way or typed inputs wait (then the end of the turn moves it). With no
    /// other ready pod yet (one replica, whose replacement is still starting), the session
    /// stays on the draining pod, which still serves it, and moves when the directory
    /// shows another ready pod.
    async fn move_if_between_turns(&mut self, client_tx: &mut ClientSink) -> Next {
        // A handoff under way ends this pod's part anyway: the runtime closes with it next.
        let handing_off = self.kept.handoff_expected || self.kept.pending_handoff.is_some();
        if self.kept.turn_open || !self.kept.in_flight.is_empty() || handing_off {
            return Next::Continue;
        }
        let current = self.upstream.as_ref().map(|u| u.lease.addr());
        let fresh = self.gateway.directory.borrow().lookup(&self.target.route.namespace, &self.target.route.name);
        let Some(fresh) = fresh else {
            // The Agent was deleted (its pods drain with it): the session ends here.
            return self.end_removed(client_tx).await;
        };
        if !fresh.ready.iter().any(|addr| Some(*addr) != current) {
            if !self.waiting_for_pod {
                self.waiting_for_pod = true;
                tracing::info!(session = %self.id, agent = %self.target.key(), "the pod drains and no other is ready yet; the session stays until one is");
            }
            return Next::Continue;
        }
        self.waiting_for_pod = false;
        self.recover("runtime_draining", client_tx).await
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
                    let _ = self.deliver(client_tx, Frame::Text(text.into())).await;
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
                        tracing::info!(session = %self.id, turn = self.kept.turn, %from, %to, "handoff");
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
        tracing::warn!(session = %self.id, turn = self.kept.turn, from = %from, %to, %error, "handoff failed");
        self.kept.handoff_failed(&to, &error);
        let message =
            format!("the handoff to {to} failed ({error}); you are still talking to {}", self.target.route.name);
        if let Err(next) = self.deliver(client_tx, ServerMessage::error("handoff_failed", message, true).into()).await {
            return next;
        }
        self.reopen(client_tx, "handoff_failed").await
    }

    /// Reopens the session on another pod of the same Agent: its runtime was lost, or its
    /// pod drains.
    async fn recover(&mut self, reason: &str, client_tx: &mut ClientSink) -> Next {
        self.pod_draining = false;
        self.waiting_for_pod = false;
        let mut lost = None;
        if let Some(mut upstream) = self.upstream.take() {
            lost = Some(upstream.lease.addr());
            // A polite close to a draining pod; a lost one fails at once (or is given up).
            let _ = tokio::time::timeout(Duration::from_secs(1), upstream.tx.close()).await;
        }
        self.gateway.metrics.migrated.with_label_values(&[&self.target.key(), reason]).inc();
        if let Some(addr) = lost {
            tracing::info!(session = %self.id, turn = self.kept.turn, agent = %self.target.key(), %addr, reason, "moving the session to another pod");
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
            let current = self.gateway.directory.borrow().lookup(&self.target.route.namespace, &self.target.route.name);
            match current {
                Some(current) => self.target = current,
                None => return self.end_removed(client_tx).await,
            }
            match self.connect(None, avoid).await {
                Ok(()) => {
                    self.generation += 1;
                    let restart =
                        ServerMessage::BidiConnectionRestart { reason: reason.to_owned(), generation: self.generation };
                    return self.deliver(client_tx, restart.into()).await.err().unwrap_or(Next::Continue);
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
        let _ = self.deliver(client_tx, ServerMessage::error("no_runtime", message, false).into()).await;
        Next::End((close_code::INTERNAL, "no runtime pod could take the session".into()))
    }

    /// Ends a session whose Agent is no longer in the routing table (deleted, or no longer
    /// accepted): the client is told why and closed with 4404, at a turn boundary.
    async fn end_removed(&mut self, client_tx: &mut ClientSink) -> Next {
        let name = self.target.route.name.clone();
        tracing::info!(session = %self.id, turn = self.kept.turn, agent = %self.target.key(), "the agent was removed; ending the session");
        let message = format!("the agent {name} was removed from this cluster; start a new session");
        if let Err(next) = self.deliver(client_tx, ServerMessage::error("agent_removed", message, false).into()).await {
            return next;
        }
        Next::End((close_code::UNKNOWN_AGENT, "the agent was removed".into()))
    }

    /// The client is gone: lets the runtime finish the turn under way (its messages are
    /// kept for replay), closes the runtime session and parks the session for the resume
    /// window. A session its agent ended meanwhile is not parked.
    async fn park(&mut self) {
        let ended = self.settle().await;
        if let Some(mut upstream) = self.upstream.take() {
            let _ = upstream.tx.close().await;
        }
        if ended {
            self.detach().await;
            return;
        }
        // Without a token the client cannot come back.
        let Some(key) = self.key.take() else { return };
        self.gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        let store = &self.gateway.store;
        let parked = Parked {
            session_id: self.id.clone(),
            namespace: self.target.route.namespace.clone(),
            agent: self.target.route.name.clone(),
            voice: self.voice.clone(),
            modalities: self.modalities.clone(),
            handoff: self.kept.pending_handoff.take(),
            kept: std::mem::take(&mut self.kept),
            generation: self.generation,
            replay: std::mem::take(&mut self.replay),
        };
        match store.park(&key, &parked, self.gateway.config.resume_window).await {
            Ok(()) => {
                self.gateway.metrics.parked.with_label_values(&[&self.target.key()]).inc();
                tracing::info!(session = %self.id, agent = %self.target.key(), "client gone: the session waits for it to resume");
            }
            Err(error) => {
                tracing::warn!(session = %self.id, "cannot park the session, it ends: {error}");
                let _ = store.unmark(&key).await;
            }
        }
    }

    /// With the client gone: keeps the runtime's messages while it answers a turn or has
    /// typed inputs to take up, within the park grace. True when the agent ended the
    /// session meanwhile.
    async fn settle(&mut self) -> bool {
        let config = &self.gateway.config;
        let deadline = tokio::time::Instant::now() + config.park_grace;
        while self.kept.turn_open || !self.kept.in_flight.is_empty() {
            let Some(upstream) = self.upstream.as_mut() else { return false };
            let Ok(frame) = tokio::time::timeout_at(deadline, upstream.rx.next()).await else { return false };
            let frame = match frame {
                Some(Ok(UpMessage::Text(text))) => {
                    if text.starts_with(r#"{"type":"bidi_connection_close""#) {
                        self.held_close = Some(text.as_str().to_owned());
                        continue;
                    }
                    self.kept.observe(text.as_str());
                    Frame::Text(Utf8Bytes::from(text.as_str()))
                }
                Some(Ok(UpMessage::Binary(data))) => Frame::Binary(data),
                Some(Ok(UpMessage::Close(frame))) => {
                    self.upstream = None;
                    let code = frame.map_or(1005, |f| u16::from(f.code));
                    // A handoff stays pending (performed on resume); a drain or loss is
                    // recovered on resume; any other close ends the session.
                    return !matches!(code, close_code::HANDOFF | close_code::GOING_AWAY | close_code::TRY_AGAIN_LATER);
                }
                Some(Ok(_)) => continue,
                None | Some(Err(_)) => {
                    self.upstream = None;
                    return false;
                }
            };
            self.replay.record(frame, config.replay_messages, config.replay_bytes);
        }
        false
    }

    /// Opens a resumed session: the handoff its runtime made while the client was away,
    /// or the same Agent with its memory and history.
    async fn reopen_parked(&mut self, handoff: Option<(String, HandoffContext)>) -> Result<(), String> {
        if let Some((to, context)) = handoff {
            let return_to = self.kept.hand_over(&context);
            let target = self.gateway.directory.borrow().for_handoff(&self.target.route.namespace, &to);
            if let Ok(target) = target {
                let previous = std::mem::replace(&mut self.target, target);
                if self.connect(Some(context), None).await.is_ok() {
                    self.kept.return_to = return_to;
                    return Ok(());
                }
                self.target = previous;
            }
            self.kept.handoff_failed(&to, &format!("agent {to} could not take the session"));
        }
        self.generation += 1;
        self.connect(None, None).await
    }

    /// Opens the session on a ready pod of the current target (not `avoid` if another is
    /// ready), with the session's memory and history, or with `handoff`'s context.
    async fn connect(&mut self, handoff: Option<HandoffContext>, avoid: Option<SocketAddr>) -> Result<(), String> {
        let Some(lease) = self.gateway.balancer.pick(&self.target.ready, avoid) else {
            return Err(format!("agent {} has no ready pod", self.target.route.name));
        };
        // A handed-over session carries memory and history inside the handoff context;
        // one that stays with its agent goes on where it was in the workflow.
        let handed_over = handoff.is_some();
        let (memory, history, workflow) = if handed_over {
            (BTreeMap::new(), Vec::new(), None)
        } else {
            (self.kept.memory.clone(), self.kept.history.clone(), self.kept.workflow.clone())
        };
        let opening = Opening {
            session_id: &self.id,
            agent: &self.target.route.name,
            path: &self.target.route.path,
            voice: self.voice.clone(),
            modalities: self.modalities.clone(),
            memory,
            history,
            return_to: if handed_over { None } else { self.kept.return_to.clone() },
            workflow,
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
        // A new pod: whether the last one was draining, or handing off, no longer matters.
        self.pod_draining = false;
        self.waiting_for_pod = false;
        self.kept.handoff_expected = false;
        if handed_over {
            // The target's position comes with its own transitions.
            self.kept.workflow = None;
        }
        self.kept.agent.clone_from(&self.target.route.name);
        Ok(())
    }
}

/// Sends a message to the client (see [`Session::deliver`] for `Err`).
async fn send_unkept(client_tx: &mut ClientSink, message: Message) -> Result<(), Next> {
    let mut send = std::pin::pin!(client_tx.send(message));
    // Most sends complete at once (the socket has room): only a send that waits gets a
    // timer (one per frame would cost more than the send).
    let sent = match futures_util::poll!(send.as_mut()) {
        std::task::Poll::Ready(sent) => Ok(sent),
        std::task::Poll::Pending => tokio::time::timeout(SLOW_CLIENT, send).await,
    };
    match sent {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Next::Gone),
        Err(_) => Err(Next::End((close_code::SLOW_CLIENT, "the client does not read its messages".into()))),
    }
}

fn reconnect_elsewhere() -> Close {
    (close_code::GOING_AWAY, "the gateway is restarting; resume with your token".into())
}
