//! A new session's way through capacity on its client's socket: the admission the
//! capacity crate decides ([`Capacity::admit`](switchboard_capacity::Capacity::admit)) —
//! a slot at once, the queue, or a refusal — performed on the socket: in the queue,
//! `bidi_session_queued` on arrival and at every change of position, the client's socket
//! watched (a client that closes or goes silent leaves, freeing its place); a refusal, with
//! `capacity_full` and `retry_after_seconds`. The queue's messages come before the
//! session's `bidi_connection_start`, so they are not numbered for resume.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use switchboard_capacity::policy::{Place, Refusal, Status};
use switchboard_capacity::{Admission, Slot, Waiting, hold_message};
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, close_code, decode_client};
use switchboard_crds::routing::Route;
use switchboard_serve::frames::Conn;
use tokio_tungstenite::tungstenite::Message;

use crate::Gateway;
use crate::session::ClientIo;
use crate::session::machine::Close;

/// A slot for a new session with `route`'s Agent (see
/// [`Capacity::admit`](switchboard_capacity::Capacity::admit)): at once, after waiting in
/// the queue on `client`'s socket, or `Err` with the close to send (refused, or the client
/// left the queue).
pub async fn admit(gateway: &Gateway, route: &Route, client: &mut Conn<ClientIo>) -> Result<Slot, Close> {
    let capacity = &gateway.capacity;
    match capacity.admit(route).await {
        Admission::Admitted(slot) => Ok(slot),
        Admission::Refused { pool, refusal } => Err(refuse(gateway, client, &pool, refusal).await),
        Admission::Waiting(Waiting { ticket, status, place, placed }) => {
            let started = Instant::now();
            let waited = |outcome: &str| {
                let seconds = started.elapsed().as_secs_f64();
                capacity.metrics.wait.with_label_values(&[&route.namespace, outcome]).observe(seconds);
            };
            let outcome = queued(gateway, client, status, place, route).await;
            match &outcome {
                Ok(()) => waited("served"),
                Err(_) => waited("left"),
            }
            outcome?;
            Ok(capacity.slot(route, Some(ticket), placed))
        }
    }
}

/// Waits in the queue for `route`'s Agent until the slot comes (`Ok`), or the client
/// leaves, the gateway drains, or the place is lost (`Err`: the close to send).
async fn queued(
    gateway: &Gateway,
    client: &mut Conn<ClientIo>,
    mut status: tokio::sync::watch::Receiver<Status>,
    place: Place,
    route: &Route,
) -> Result<(), Close> {
    tell(client, place, route).await;
    let mut last = place.position;
    let config = &gateway.config;
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            changed = status.changed() => {
                if changed.is_err() {
                    return Err(lost(gateway, client).await);
                }
                let now = *status.borrow_and_update();
                match now {
                    Status::Granted => return Ok(()),
                    Status::Queued(place) if place.position != last => {
                        last = place.position;
                        tell(client, place, route).await;
                    }
                    Status::Queued(_) => {}
                    Status::Gone => return Err(lost(gateway, client).await),
                }
            }
            message = client.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    heard = Instant::now();
                    if let Ok(ClientMessage::Close {}) = decode_client(text.as_str()) {
                        return Err((close_code::NORMAL, "left the queue".into()));
                    }
                    // Anything else before the session starts has nobody to go to.
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    return Err((close_code::NORMAL, "left the queue".into()));
                }
                Some(Ok(_)) => heard = Instant::now(),
            },
            _ = ping.tick() => {
                if heard.elapsed() > config.ping_timeout {
                    return Err((close_code::NORMAL, "the client went silent in the queue".into()));
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), client.send(Message::Ping(Default::default()))).await;
            }
            () = gateway.draining.cancelled() => {
                let message = "the gateway is draining; reconnect to another instance";
                let message = ServerMessage::error(ErrorCode::AtCapacity, message, false);
                let _ = client.send(Message::text(message.to_json())).await;
                gateway.metrics.refused.with_label_values(&["at_capacity"]).inc();
                return Err((close_code::TRY_AGAIN_LATER, "at capacity".into()));
            }
        }
    }
}

/// Tells the client its place in the queue for `route`'s Agent (named, so that a phone
/// edge can pick the Agent's own hold recording when the caller dialled a number).
async fn tell(client: &mut Conn<ClientIo>, place: Place, route: &Route) {
    let message = ServerMessage::BidiSessionQueued {
        position: place.position,
        estimated_wait_seconds: place.wait_ms.div_ceil(1000),
        message: hold_message(route.capacity.hold_message.as_deref(), place),
        agent: format!("{}/{}", route.namespace, route.name),
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), client.send(Message::text(message.to_json()))).await;
}

/// The place was lost: this gateway's heartbeat lapsed in the store (it could not reach
/// it for longer than the lease).
async fn lost(gateway: &Gateway, client: &mut Conn<ClientIo>) -> Close {
    let wait = gateway.capacity.config().lease.as_secs().max(1);
    let refusal = Refusal { queue_full: false, retry_after_ms: wait * 1000 };
    let message = "the place in the queue was lost (the gateway lost the capacity store); try again";
    send_refusal(gateway, client, message.to_owned(), refusal).await
}

async fn refuse(gateway: &Gateway, client: &mut Conn<ClientIo>, pool: &str, refusal: Refusal) -> Close {
    let why = if refusal.queue_full {
        format!("the model quota of {pool} is full and so is its queue")
    } else {
        format!("the model quota of {pool} is full and this agent does not queue sessions")
    };
    let retry = refusal.retry_after_ms.div_ceil(1000).max(1);
    send_refusal(gateway, client, format!("{why}; try again in about {retry} s"), refusal).await
}

async fn send_refusal(gateway: &Gateway, client: &mut Conn<ClientIo>, message: String, refusal: Refusal) -> Close {
    let mut error = ServerMessage::error(ErrorCode::CapacityFull, message, false);
    if let ServerMessage::BidiError { retry_after_seconds, .. } = &mut error {
        *retry_after_seconds = Some(refusal.retry_after_ms.div_ceil(1000).max(1));
    }
    gateway.metrics.refused.with_label_values(&["capacity_full"]).inc();
    let _ = tokio::time::timeout(Duration::from_secs(5), client.send(Message::text(error.to_json()))).await;
    (close_code::TRY_AGAIN_LATER, "capacity full".into())
}
