//! One client session through the gateway: the client's `session_start` picks the Agent,
//! the gateway opens the session on a ready pod of it, then relays frames both ways. It
//! keeps the session's state — memory from the runtime's `memory_update`s, the final
//! transcript lines as history — and acts on what runtimes cannot do alone: handoffs to
//! another Agent's pods on the same client socket ([`machine::handoff`]), moving a session
//! off a lost or draining pod ([`machine::moves`]), and resume (`machine::park`,
//! [`crate::resume`]): every
//! message to the client is numbered and kept (bounded) for replay, every
//! `bidi_connection_start` gets a fresh resume token, a client gone without a goodbye
//! leaves the session parked for the resume window, and a `session_start` with the token
//! and the last number received continues it. With a shared store, a draining gateway
//! parks every session at once and tells its clients to resume elsewhere.
//!
//! Every rule is in the I/O-free [`machine::Machine`]; this module admits the session
//! (its first message; [`resumed`] finds a session under way in the resume store or the
//! record), [`client_io`] is what the client's socket runs over, and [`driver`] moves the
//! bytes. Session
//! context from clients is refused, as on runtimes.

mod app_context;
pub(crate) mod client_io;
mod continuation;
mod driver;
pub mod events;
pub mod kept;
pub mod machine;
mod resumed;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use switchboard_core::phone::PhoneCall;
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionStart, close_code, decode_client};

use crate::Gateway;
use crate::auth::Admission;
use crate::directory::Reach;
use crate::resume::{self, Parked};
pub use client_io::ClientIo;
pub use machine::moves::MAX_RECOVERIES;
use machine::{Close, Cx, Limits, Machine};
#[cfg(test)]
use machine::{handoff, moves};
use switchboard_serve::frames::Conn;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// The client's WebSocket.
type Client = Conn<ClientIo>;

/// How long a refused client is given to answer the close frame. The refusal's socket is
/// read meanwhile: closed with bytes unread, the kernel resets it, and a reset can reach the
/// client before the close frame is read, turning its code (4401, 4404, 1008...) into 1006.
pub(crate) const REFUSAL_LINGER: Duration = Duration::from_secs(2);

/// How long a send to the client may block before the client counts as gone.
const SLOW_CLIENT: Duration = switchboard_serve::ws::SLOW_PEER;

/// Serves one upgraded client socket until the session ends or is parked. The client's
/// identity (`admission.key`; empty without checks) binds its resume tokens, its
/// credential's scope bounds where it may start or resume, and its message budget
/// applies. The key's session slot is given back before the client is told the session
/// ended, so a client that reconnects at once is not refused.
pub async fn serve(client: Conn<ClientIo>, gateway: Arc<Gateway>, query_agent: Option<String>, admission: Admission) {
    serve_call(client, gateway, query_agent, admission, None, None).await;
}

/// An outbound call's context for the session its SIP edge opens: the Agent
/// (`namespace/name`) the call is for and the memory value ([`switchboard_core::outbound::MEMORY_KEY`]).
pub type CallContext = (String, serde_json::Value);

/// [`serve`] for the session of a phone call: an answered outbound call, whose ticket the
/// gateway took ([`crate::calls::Calls::redeem`]), must start (not resume) at the call's
/// Agent, and its memory starts with the call; an inbound call its SIP edge vouched for
/// (`phone`, [`crate::phone`]) starts new too, with the call (`phoneCall`) in its memory.
pub async fn serve_call(
    mut client: Conn<ClientIo>,
    gateway: Arc<Gateway>,
    query_agent: Option<String>,
    admission: Admission,
    call: Option<CallContext>,
    phone: Option<PhoneCall>,
) {
    match admit(&gateway, query_agent, &admission, &mut client, call, phone).await {
        Ok((mut machine, parked, under_way)) => {
            let route = machine.target().route.clone();
            // An Agent in outage mode sends a new session to its fallback, before it takes a
            // slot of the quota; or serves it in text, on its text model (no voice stream,
            // so no slot of the voice model's quota).
            let modalities = machine.modalities().to_vec();
            let text_only = match crate::outage::admit(&gateway, &route, under_way, &modalities, &mut client).await {
                Ok(text_only) => text_only,
                Err(close) => {
                    drop(admission);
                    close_client(&mut client, close).await;
                    client.linger(REFUSAL_LINGER).await;
                    return;
                }
            };
            if let Some(cause) = text_only {
                machine.serve_text_only(cause);
            }
            // A slot of the model quota before the first stream opens, held to the end
            // (handoffs and moves keep it; a park gives it back).
            let slot = match text_only {
                Some(_) => Ok(Default::default()),
                // A session under way takes its slot at once, where it was placed.
                None if under_way => Ok(gateway.capacity.resume(&route, kept_placement(&machine, &route)).await),
                None => crate::capacity::admit(&gateway, &route, &mut client).await,
            };
            let slot = match slot {
                Ok(slot) => slot,
                Err(close) => {
                    drop(admission);
                    close_client(&mut client, close).await;
                    client.linger(REFUSAL_LINGER).await;
                    return;
                }
            };
            // A session placed on its Agent's fallback region opens its streams there.
            if let Some(placed) = &slot.placed {
                machine.place(&route, placed.region.clone(), placed.cause);
            }
            let span = session_span(&machine, parked.as_ref().map(|(_, parked)| parked.traceparent.as_deref()));
            machine.set_traceparent(switchboard_telemetry::context::traceparent(&span));
            let relay = driver::Relay::new(gateway, machine, parked, client, admission, span);
            driver::run(relay).await;
            drop(slot);
        }
        Err(close) => {
            drop(admission);
            close_client(&mut client, close).await;
            // Refused before its session began: what it sent meanwhile is read until its
            // close, so the close frame is not overtaken by a reset (see `REFUSAL_LINGER`).
            client.linger(REFUSAL_LINGER).await;
        }
    }
}

/// Where a session under way was placed for `route`'s Agent, if it was: its fallback
/// region's pool, for its slot.
fn kept_placement(machine: &Machine, route: &switchboard_crds::routing::Route) -> Option<switchboard_capacity::Placed> {
    let (region, cause) = machine.placed()?;
    let pool = route.capacity.fallback_pool()?;
    Some(switchboard_capacity::Placed { region: region.to_owned(), pool, cause })
}

/// The session's span, the root of its trace: ids, the Agent it starts with and its
/// namespace — never what is said. A resumed session's span (`resumed`: the parked session's
/// `traceparent`, if it was traced) is the child of the span it parked under, in the same
/// trace. Log lines of the relay carry its `session_id` and `trace_id`; handoffs and
/// failures are its events.
fn session_span(machine: &Machine, resumed: Option<Option<&str>>) -> tracing::Span {
    let route = &machine.target().route;
    let span = tracing::info_span!(
        parent: None,
        "gateway.session",
        otel.kind = "server",
        session_id = %machine.id(),
        agent = %route.name,
        namespace = %route.namespace,
        resumed = resumed.is_some(),
        trace_id = tracing::field::Empty,
    );
    switchboard_telemetry::context::set_parent(&span, resumed.flatten());
    switchboard_telemetry::context::record_trace_id(&span);
    span
}

async fn close_client(client: &mut Client, (code, reason): Close) {
    let close = CloseFrame { code: code.into(), reason: Utf8Bytes::from(reason) };
    let _ = tokio::time::timeout(SLOW_CLIENT, client.close(Some(close))).await;
}

/// Reads the client's first message: a new session on the Agent it asks for (the machine
/// opens it), or the parked session its resume token names (also returned, to go back to
/// the store if it cannot be opened). The flag: the session was under way (resumed or
/// continued), so it does not wait for capacity.
async fn admit(
    gateway: &Arc<Gateway>,
    query_agent: Option<String>,
    admission: &Admission,
    client: &mut Client,
    call: Option<CallContext>,
    phone: Option<PhoneCall>,
) -> Result<(Machine, Option<(String, Parked)>, bool), Close> {
    let identity = admission.key.as_deref().unwrap_or_default();
    let first = match tokio::time::timeout(gateway.config.start_timeout, client.next()).await {
        Err(_) => return Err((close_code::IDLE_TIMEOUT, "no session_start in time".into())),
        Ok(Some(Ok(Message::Text(text)))) => decode_client(text.as_str()),
        Ok(_) => return Err((close_code::NORMAL, String::new())),
    };
    let (start, pending) = match first {
        Ok(ClientMessage::SessionStart(start)) => (start, None),
        Ok(other) => (SessionStart::default(), serde_json::to_string(&other).ok()),
        Err(error) => {
            let message = ServerMessage::error(error.code(), error.to_string(), false);
            return Err(refuse(gateway, client, "bad_start", message, close_code::BAD_START).await);
        }
    };
    if let Some(fields) = client_context(&start) {
        let message = ServerMessage::error(
            ErrorCode::ContextRefused,
            format!("session_start.{fields} is not accepted from clients: session context is the gateway's"),
            false,
        );
        return Err(refuse(gateway, client, "context_refused", message, close_code::BAD_START).await);
    }
    let mut limits = Limits::new(&gateway.config, gateway.store.is_shared());
    limits.record = gateway.record.is_some();
    if start.app_context.is_some()
        && (call.is_some() || phone.is_some() || start.resume_token.is_some() || start.continue_from.is_some())
    {
        let error = crate::auth::AppContextError::NotAccepted(
            "session_start.app_context opens a new session only: a resumed or continued session keeps its memory, \
             and an outbound call's context is the gateway's; leave it out"
                .into(),
        );
        return Err(app_context::refuse(gateway, client, error).await);
    }
    if (call.is_some() || phone.is_some())
        && (start.resume_token.is_some() || start.continue_from.is_some() || start.candidate)
    {
        let message = ServerMessage::error(
            ErrorCode::ContextRefused,
            "a phone call's session starts new: no resume_token, continue_from or candidate",
            false,
        );
        return Err(refuse(gateway, client, "context_refused", message, close_code::BAD_START).await);
    }
    if let Some(token) = &start.resume_token {
        let key = resume::store_key(identity, token);
        let parked = resumed::take_parked(gateway, &key, client).await?;
        if let Err(refusal) = resumed::allowed(admission, &parked) {
            return Err(refuse_as(gateway, client, refusal).await);
        }
        let Some(target) = gateway.directory.borrow().lookup(&parked.namespace, &parked.agent, parked.reach) else {
            let message =
                format!("the agent {}/{} this session was with no longer exists", parked.namespace, parked.agent);
            let message = ServerMessage::error(ErrorCode::UnknownAgent, message, false);
            return Err(refuse(gateway, client, "unknown_agent", message, close_code::UNKNOWN_AGENT).await);
        };
        let directory = gateway.directory.borrow().clone();
        let cx = Cx { now: Instant::now(), directory: &directory, outages: &gateway.outages.switches };
        // The call goes on: its clock too (one parked by an older gateway starts it now).
        let mut resuming = parked.clone();
        resuming.kept.call_started_at_ms.get_or_insert_with(wall_ms);
        let machine = Machine::resume(limits, identity.to_owned(), resuming, target, start.last_seq, &cx);
        return Ok((machine, Some((key, parked)), true));
    }
    if let Some(from) = &start.continue_from {
        let token = start.continue_token.as_deref().unwrap_or_default();
        let (mut parked, target) = resumed::continued(gateway, from, token, identity, admission, client).await?;
        // A session continued from the record is a new call (the caller came back): its
        // clock starts now.
        parked.kept.call_started_at_ms = Some(wall_ms());
        let directory = gateway.directory.borrow().clone();
        let cx = Cx { now: Instant::now(), directory: &directory, outages: &gateway.outages.switches };
        return Ok((Machine::resume(limits, identity.to_owned(), parked, target, None, &cx), None, true));
    }
    let reach = if start.candidate { Reach::Candidates } else { Reach::Live };
    if start.candidate
        && let Err(refusal) = admission.allow_candidates()
    {
        return Err(refuse_as(gateway, client, refusal).await);
    }
    let requested = query_agent.or(start.agent.clone());
    let routed = gateway.directory.borrow().for_client(requested.as_deref(), reach);
    let target = match routed {
        Ok(target) => target,
        Err(error) => {
            let message = ServerMessage::error(error.code(), error.to_string(), false);
            return Err(refuse(gateway, client, error.metric_label(), message, error.close_code()).await);
        }
    };
    if let Err(refusal) = admission.allow_agent(&target.route.namespace, &target.route.name) {
        return Err(refuse_as(gateway, client, refusal).await);
    }
    let id = format!("gw-{}", uuid::Uuid::new_v4());
    let audio = start.audio.clone();
    let (voice, modalities, now, started_ms) = (start.voice, start.modalities, Instant::now(), wall_ms());
    let mut memory = std::collections::BTreeMap::new();
    if let Some(phone) = phone {
        memory.insert(switchboard_core::phone::MEMORY_KEY.to_owned(), phone.memory_value());
    }
    // The memory the session starts with: an outbound call's context, the phone call's, or
    // the host app's; none at all starts it plainly (with the input sent before its start).
    let memory = match call {
        Some((agent, context)) => {
            let routed = format!("{}/{}", target.route.namespace, target.route.name);
            if routed != agent {
                let message = ServerMessage::error(
                    ErrorCode::ContextRefused,
                    format!("this outbound call is for {agent}, not {routed}"),
                    false,
                );
                return Err(refuse(gateway, client, "context_refused", message, close_code::BAD_START).await);
            }
            memory.insert(switchboard_core::outbound::MEMORY_KEY.to_owned(), context);
            Some(memory)
        }
        None if !memory.is_empty() => Some(memory),
        None => match start.app_context.as_deref() {
            Some(token) => match app_context::memory(gateway, admission, &target, &id, token).await {
                Ok(memory) => Some(memory),
                Err(error) => return Err(app_context::refuse(gateway, client, error).await),
            },
            None => None,
        },
    };
    let identity = identity.to_owned();
    let machine = match memory {
        Some(memory) => {
            Machine::start_with_memory(limits, id, identity, target, voice, modalities, memory, now, started_ms)
        }
        None => Machine::start(limits, id, identity, target, voice, modalities, pending, now, started_ms),
    };
    let mut machine = machine.with_model(start.model).with_reach(reach);
    machine.set_audio(audio);
    Ok((machine, None, false))
}

/// The context fields a client's `session_start` tried to set, if any.
fn client_context(start: &SessionStart) -> Option<String> {
    let mut fields = start.unsigned_context();
    if start.context.is_some() {
        fields.push("context");
    }
    (!fields.is_empty()).then(|| fields.join(", session_start."))
}

/// [`refuse`] with the credential check's refusal.
async fn refuse_as(gateway: &Gateway, client: &mut Client, refusal: crate::auth::Refusal) -> Close {
    let reason = refusal.reason.metric_label();
    let message = ServerMessage::error(refusal.reason, refusal.message, false);
    refuse(gateway, client, reason, message, refusal.code).await
}

/// Counts a refused session, tells the client why, and returns the close.
async fn refuse(gateway: &Gateway, client: &mut Client, reason: &str, message: ServerMessage, code: u16) -> Close {
    gateway.metrics.refused.with_label_values(&[reason]).inc();
    let _ = client.send(Message::text(message.to_json())).await;
    (code, reason.replace('_', " "))
}

/// Milliseconds since the Unix epoch (when a call starts: carried to every runtime session).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
