//! A new session's admission, without its client's socket: a slot at once, a place in its
//! pool's queue, or a refusal ([`Capacity::admit`]); and for an Agent with a fallback
//! region, the choice of pool. The gateway performs the outcome on the client's socket
//! (`bidi_session_queued` while waiting, `capacity_full` on a refusal). Each
//! `bidi_session_queued` carries what to tell the person waiting ([`hold_message`]): the
//! Agent's `spec.capacity.holdMessage`, or a sentence with the place and the wait.

use std::sync::Arc;

use switchboard_crds::agent::WhenFull;
use switchboard_crds::routing::Route;
use tokio::sync::watch;

use crate::policy::{Place, Refusal, Status};
use crate::{Admitted, Capacity, Ticket};

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

/// Where a new session stands after [`Capacity::admit`].
#[derive(Debug)]
pub enum Admission {
    /// It may start now.
    Admitted(Slot),
    /// It waits in a pool's queue.
    Waiting(Waiting),
    /// No slot in `pool`, and the session does not wait (its Agent refuses, or the queue is
    /// full).
    Refused {
        /// The pool that was full.
        pool: String,
        /// Why, and when to try again.
        refusal: Refusal,
    },
}

/// A new session waiting for a slot: its place, given back when dropped.
#[derive(Debug)]
pub struct Waiting {
    /// The place (the slot, once served).
    pub ticket: Ticket,
    /// Where it stands: [`Status::Granted`] when served, its new place when it moves,
    /// [`Status::Gone`] when the pool forgot it.
    pub status: watch::Receiver<Status>,
    /// Its place on arrival.
    pub place: Place,
    /// The fallback region it waits for, if its own region is failing.
    pub placed: Option<Placed>,
}

impl Capacity {
    /// A slot for a new session with `route`'s Agent (`ticket: None` when its pool is not
    /// counted; a session under way takes one with [`Capacity::resume`]). An Agent with a
    /// fallback region sends a new session there when its own region is failing, or when its
    /// own pool is full and the fallback's has a slot free; otherwise the session waits for
    /// (or is refused) a slot of its own pool.
    pub async fn admit(self: &Arc<Self>, route: &Route) -> Admission {
        let settings = &route.capacity;
        let mut pool = settings.pool.as_str();
        let mut placed = None;
        if let (Some(region), Some(fallback)) = (&settings.fallback_region, settings.fallback_pool()) {
            let place = |cause| Placed { region: region.clone(), pool: fallback.clone(), cause };
            if self.failing(&settings.pool).await {
                placed = Some(place("failing"));
            } else {
                match self.request(&settings.pool, &route.namespace, settings.priority, false).await {
                    Admitted::Uncounted => return Admission::Admitted(Slot::default()),
                    Admitted::Granted(ticket) => {
                        return Admission::Admitted(Slot { ticket: Some(ticket), placed: None });
                    }
                    Admitted::Queued(..) | Admitted::Refused(_) => {
                        // No free slot of its own: the fallback's, if it has one now.
                        match self.request(&fallback, &route.namespace, settings.priority, false).await {
                            Admitted::Uncounted => {
                                return Admission::Admitted(self.slot(route, None, Some(place("full"))));
                            }
                            Admitted::Granted(ticket) => {
                                return Admission::Admitted(self.slot(route, Some(ticket), Some(place("full"))));
                            }
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
        match self.request(pool, &route.namespace, settings.priority, queue).await {
            Admitted::Uncounted => Admission::Admitted(self.slot(route, None, placed)),
            Admitted::Granted(ticket) => Admission::Admitted(self.slot(route, Some(ticket), placed)),
            Admitted::Refused(refusal) => Admission::Refused { pool: pool.to_owned(), refusal },
            Admitted::Queued(ticket, status, place) => Admission::Waiting(Waiting { ticket, status, place, placed }),
        }
    }

    /// A slot for a session under way (resumed, continued) of `route`, taken without
    /// waiting: in the pool of the fallback region it was placed on (`placed`, when it is
    /// still `route`'s fallback region), else in its Agent's own pool. Not counted as a new
    /// placement.
    pub async fn resume(self: &Arc<Self>, route: &Route, placed: Option<Placed>) -> Slot {
        let settings = &route.capacity;
        let placed = placed.filter(|p| {
            settings.fallback_region.as_deref() == Some(p.region.as_str())
                && settings.fallback_pool().as_deref() == Some(p.pool.as_str())
        });
        let pool = placed.as_ref().map_or(settings.pool.as_str(), |p| p.pool.as_str());
        let ticket = self.force(pool, &route.namespace).await;
        Slot { ticket, placed }
    }

    /// The slot of a session of `route` holding `ticket`; one placed on its fallback region
    /// (`placed`) is counted and logged.
    pub fn slot(&self, route: &Route, ticket: Option<Ticket>, placed: Option<Placed>) -> Slot {
        let Some(placed) = placed else { return Slot { ticket, placed: None } };
        let values = [route.capacity.pool.as_str(), placed.pool.as_str(), placed.cause];
        self.metrics.region_fallbacks.with_label_values(&values).inc();
        tracing::info!(
            agent = %format!("{}/{}", route.namespace, route.name),
            from = %route.capacity.pool,
            to = %placed.pool,
            cause = placed.cause,
            "a new session goes to the Agent's fallback region"
        );
        Slot { ticket, placed: Some(placed) }
    }
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
