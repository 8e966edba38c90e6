//! A new session's way through capacity, on its client's socket: a slot at once, or the
//! queue — `bidi_session_queued` on arrival and at every change of position, the client's
//! socket watched (a client that closes or goes silent leaves, freeing its place) — or a
//! refusal with `capacity_full` and `retry_after_seconds`. The queue's messages come
//! before the session's `bidi_connection_start`, so they are not numbered for resume.
//! Each `bidi_session_queued` carries what to tell the person waiting ([`hold_message`]):
//! the Agent's `spec.capacity.holdMessage`, or a sentence with the place and the wait.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, close_code, decode_client};
use switchboard_crds::agent::WhenFull;
use switchboard_crds::routing::Route;
use switchboard_serve::frames::Conn;
use tokio_tungstenite::tungstenite::Message;

use super::policy::{Place, Refusal, Status};
use super::{Admitted, Ticket};
use crate::Gateway;
use crate::session::ClientIo;
use crate::session::machine::Close;

/// What admission gave a new session: its slot (none when its pool is not counted) and,
/// when it was placed on its Agent's fallback region, where and why.
#[derive(Debug, Default)]
pub struct Slot {
    /// The slot, given back when dropped.
    pub ticket: Option<Ticket>,
    /// The fallback region the session runs in, if it was placed there.
    pub placed: Option<Placed>,
}

/// A session placed on its Agent's fallback region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The region its Nova Sonic streams open in.
    pub region: String,
    /// The pool its slot is in (`<account>/<region>`).
    pub pool: String,
    /// `full` (its own pool had no free slot) or `failing` (its own region failed lately).
    pub cause: &'static str,
}

/// A slot for a session with `route`'s Agent: `ticket: None` when its pool is not counted.
/// A session `under_way` (resumed, continued) takes one without waiting, in its Agent's own
/// pool. An Agent with a fallback region sends a new session there when its own region is
/// failing, or when its own pool is full and the fallback's has a slot free; otherwise the
/// session waits for (or is refused) a slot of its own pool.
pub async fn admit(
    gateway: &Gateway,
    route: &Route,
    under_way: bool,
    client: &mut Conn<ClientIo>,
) -> Result<Slot, Close> {
    let capacity = &gateway.capacity;
    let settings = &route.capacity;
    if under_way {
        return Ok(Slot { ticket: capacity.force(&settings.pool, &route.namespace).await, placed: None });
    }
    let mut pool = settings.pool.as_str();
    let mut placed = None;
    if let (Some(region), Some(fallback)) = (&settings.fallback_region, settings.fallback_pool()) {
        let place = |cause| Placed { region: region.clone(), pool: fallback.clone(), cause };
        if capacity.failing(&settings.pool).await {
            placed = Some(place("failing"));
        } else {
            match capacity.request(&settings.pool, &route.namespace, settings.priority, false).await {
                Admitted::Uncounted => return Ok(Slot::default()),
                Admitted::Granted(ticket) => return Ok(Slot { ticket: Some(ticket), placed: None }),
                Admitted::Queued(..) | Admitted::Refused(_) => {
                    // No free slot of its own: the fallback's, if it has one now.
                    match capacity.request(&fallback, &route.namespace, settings.priority, false).await {
                        Admitted::Uncounted => return Ok(placing(gateway, route, None, place("full"))),
                        Admitted::Granted(ticket) => return Ok(placing(gateway, route, Some(ticket), place("full"))),
                        Admitted::Queued(..) | Admitted::Refused(_) => {}
                    }
                }
            }
        }
        if let Some(placed) = &placed {
            pool = placed.pool.as_str();
        }
    }
    let queue = settings.when_full == WhenFull::Queue;
    let ticket = match capacity.request(pool, &route.namespace, settings.priority, queue).await {
        Admitted::Uncounted => None,
        Admitted::Granted(ticket) => Some(ticket),
        Admitted::Refused(refusal) => return Err(refuse(gateway, client, pool, refusal).await),
        Admitted::Queued(ticket, status, place) => {
            let started = Instant::now();
            let waited = |outcome: &str| {
                let seconds = started.elapsed().as_secs_f64();
                capacity.metrics.wait.with_label_values(&[&route.namespace, outcome]).observe(seconds);
            };
            let hold = settings.hold_message.as_deref();
            let outcome = queued(gateway, client, status, place, hold).await;
            match &outcome {
                Ok(()) => waited("served"),
                Err(_) => waited("left"),
            }
            outcome?;
            Some(ticket)
        }
    };
    Ok(match placed {
        Some(placed) => placing(gateway, route, ticket, placed),
        None => Slot { ticket, placed: None },
    })
}

/// A session of `route` placed on its fallback region: counted and logged.
fn placing(gateway: &Gateway, route: &Route, ticket: Option<Ticket>, placed: Placed) -> Slot {
    let values = [route.capacity.pool.as_str(), placed.pool.as_str(), placed.cause];
    gateway.capacity.metrics.region_fallbacks.with_label_values(&values).inc();
    tracing::info!(
        agent = %format!("{}/{}", route.namespace, route.name),
        from = %route.capacity.pool,
        to = %placed.pool,
        cause = placed.cause,
        "a new session goes to the Agent's fallback region"
    );
    Slot { ticket, placed: Some(placed) }
}

/// Waits in the queue until the slot comes (`Ok`), or the client leaves, the gateway
/// drains, or the place is lost (`Err`: the close to send).
async fn queued(
    gateway: &Gateway,
    client: &mut Conn<ClientIo>,
    mut status: tokio::sync::watch::Receiver<Status>,
    place: Place,
    hold: Option<&str>,
) -> Result<(), Close> {
    tell(client, place, hold).await;
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
                        tell(client, place, hold).await;
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

async fn tell(client: &mut Conn<ClientIo>, place: Place, hold: Option<&str>) {
    let message = ServerMessage::BidiSessionQueued {
        position: place.position,
        estimated_wait_seconds: place.wait_ms.div_ceil(1000),
        message: hold_message(hold, place),
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

/// What a person waiting at `place` is told: the Agent's own message (`hold`), or a
/// sentence a phone can speak with the place and the wait, rounded up (seconds under two
/// minutes, then minutes).
pub fn hold_message(hold: Option<&str>, place: Place) -> String {
    if let Some(hold) = hold {
        return hold.to_owned();
    }
    let place_words = match place.position {
        1 => "You are next in line".to_owned(),
        n => format!("You are number {n} in line"),
    };
    let seconds = place.wait_ms.div_ceil(1000).max(1);
    let wait = match seconds {
        1 => "about a second".to_owned(),
        2..120 => format!("about {seconds} seconds"),
        _ => format!("about {} minutes", seconds.div_ceil(60)),
    };
    format!("All our lines are busy at the moment. {place_words}; the wait is {wait}. Please stay with us.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_message_is_the_agents_or_says_the_place_and_the_wait() {
        let place = |position, wait_ms| Place { position, wait_ms };
        assert_eq!(hold_message(Some("Please hold."), place(3, 90_000)), "Please hold.");
        assert_eq!(
            hold_message(None, place(1, 40_000)),
            "All our lines are busy at the moment. You are next in line; the wait is about 40 seconds. Please stay with us."
        );
        let later = hold_message(None, place(4, 150_001));
        assert!(later.contains("number 4 in line; the wait is about 3 minutes."), "{later}");
        assert!(hold_message(None, place(2, 0)).contains("about a second"));
        assert!(hold_message(None, place(2, 119_000)).contains("about 119 seconds"));
        assert!(hold_message(None, place(2, 120_000)).contains("about 2 minutes"));
    }
}
