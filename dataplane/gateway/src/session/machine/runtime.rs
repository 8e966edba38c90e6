//! The runtime side of a session: the pod of the open runtime connection and when it was
//! last heard, the client messages waiting for the next connection, the runtime's
//! `bidi_connection_close` held until its close, how many runtime streams the session has
//! had, and when the runtime was last given an identity assertion. [`RuntimeSide`] owns
//! them; the machine asks it what the rules need.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard_core::assertion::REFRESH_AFTER_SECS;
use tokio_tungstenite::tungstenite::{Message as UpMessage, Utf8Bytes};

/// Client messages kept while the runtime connection is being replaced.
pub const MAX_UNSENT: usize = 64;

/// The runtime connection as the session sees it.
#[derive(Debug)]
pub(in crate::session) struct RuntimeSide {
    /// The pod of the open runtime connection.
    pod: Option<SocketAddr>,
    /// The last frame of any kind from the runtime.
    heard: Instant,
    /// Client messages (other than typed inputs, which `kept` tracks) the runtime
    /// connection refused or that came while none was open: sent to the next.
    unsent: Vec<UpMessage>,
    /// The runtime's `bidi_connection_close`, held until its close shows whether the
    /// session ends (the client gets it) or moves on (dropped).
    held_close: Option<Utf8Bytes>,
    /// Runtime streams opened for this session after the first.
    generation: u64,
    /// When the runtime was last given an identity assertion (by a grant or a frame), while
    /// the memory holds a verified caller.
    asserted_at: Option<Instant>,
}

impl RuntimeSide {
    /// No connection yet; `generation` streams were opened before (a resumed session's).
    pub(super) fn new(now: Instant, generation: u64) -> Self {
        Self { pod: None, heard: now, unsent: Vec::new(), held_close: None, generation, asserted_at: None }
    }

    /// The pod of the open connection.
    pub(super) fn pod(&self) -> Option<SocketAddr> {
        self.pod
    }

    /// Whether a connection is open.
    pub(super) fn is_open(&self) -> bool {
        self.pod.is_some()
    }

    /// A connection opened on `pod` at `now`: the messages that waited for it, in order.
    pub(super) fn attach(&mut self, pod: SocketAddr, now: Instant) -> Vec<UpMessage> {
        self.heard = now;
        self.pod = Some(pod);
        std::mem::take(&mut self.unsent)
    }

    /// The connection is gone (lost, left, or closed while the client was away): its pod.
    /// A held close stays held.
    pub(super) fn detach(&mut self) -> Option<SocketAddr> {
        self.pod.take()
    }

    /// The runtime closed its connection: the close it had announced, if it had.
    pub(super) fn closed(&mut self) -> Option<Utf8Bytes> {
        self.pod = None;
        self.held_close.take()
    }

    /// The runtime's `bidi_connection_close`, held until its close.
    pub(super) fn hold_close(&mut self, close: Utf8Bytes) {
        self.held_close = Some(close);
    }

    /// A frame of any kind came from the runtime.
    pub(super) fn heard(&mut self, now: Instant) {
        self.heard = now;
    }

    /// How long the runtime has said nothing.
    pub(super) fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.heard)
    }

    /// A client message for the runtime: given back to send now while a connection is open,
    /// otherwise kept for the next.
    pub(super) fn send(&mut self, message: UpMessage) -> Option<UpMessage> {
        if self.is_open() {
            return Some(message);
        }
        self.keep(message);
        None
    }

    /// Keeps a message for the next connection (at most [`MAX_UNSENT`]; later ones are
    /// dropped).
    pub(super) fn keep(&mut self, message: UpMessage) {
        if self.unsent.len() < MAX_UNSENT {
            self.unsent.push(message);
        }
    }

    /// Runtime streams opened for this session after the first.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Another runtime stream: its number.
    pub(super) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// A connection opened at `now`: its grant carried an assertion if there is a `caller`.
    pub(super) fn granted(&mut self, caller: bool, now: Instant) {
        self.asserted_at = caller.then_some(now);
    }

    /// An assertion was sent to the runtime at `now`.
    pub(super) fn asserted(&mut self, now: Instant) {
        self.asserted_at = Some(now);
    }

    /// The caller is no longer verified: no more assertions are due.
    pub(super) fn forget_assertion(&mut self) {
        self.asserted_at = None;
    }

    /// Whether the assertion the runtime holds is [`REFRESH_AFTER_SECS`] old (none held:
    /// none is due).
    pub(super) fn assertion_due(&self, now: Instant) -> bool {
        self.asserted_at.is_some_and(|at| now.saturating_duration_since(at).as_secs() >= REFRESH_AFTER_SECS)
    }

    /// What waits for the next connection.
    #[cfg(test)]
    pub(super) fn unsent(&self) -> &[UpMessage] {
        &self.unsent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], 8080))
    }

    #[test]
    fn messages_wait_for_the_next_connection_bounded_and_in_order() {
        let now = Instant::now();
        let mut side = RuntimeSide::new(now, 0);
        for n in 0..MAX_UNSENT + 5 {
            assert_eq!(side.send(UpMessage::text(n.to_string())), None, "no connection: kept");
        }
        assert_eq!(side.unsent().len(), MAX_UNSENT, "the ones past the bound are dropped");
        let waiting = side.attach(pod(1), now);
        assert_eq!(waiting.first(), Some(&UpMessage::text("0")));
        assert_eq!(waiting.last(), Some(&UpMessage::text((MAX_UNSENT - 1).to_string())));
        assert!(side.unsent().is_empty() && side.pod() == Some(pod(1)));
        assert_eq!(side.send(UpMessage::text("now")), Some(UpMessage::text("now")), "open: sent at once");
        side.keep(UpMessage::text("refused"));
        assert_eq!(side.detach(), Some(pod(1)));
        assert_eq!(side.attach(pod(2), now), [UpMessage::text("refused")], "a refused message goes to the next");
    }

    #[test]
    fn a_held_close_goes_with_the_runtimes_close_and_outlives_a_loss() {
        let mut side = RuntimeSide::new(Instant::now(), 0);
        side.attach(pod(1), Instant::now());
        side.hold_close("bye".into());
        assert_eq!(side.detach(), Some(pod(1)));
        assert!(!side.is_open());
        assert_eq!(side.closed(), Some(Utf8Bytes::from("bye")), "still held");
        assert_eq!(side.closed(), None, "given once");
    }

    #[test]
    fn silence_is_counted_from_the_last_frame_or_the_connection() {
        let start = Instant::now();
        let mut side = RuntimeSide::new(start, 0);
        side.attach(pod(1), start + Duration::from_secs(5));
        assert_eq!(side.silent_for(start + Duration::from_secs(7)), Duration::from_secs(2));
        side.heard(start + Duration::from_secs(9));
        assert_eq!(side.silent_for(start + Duration::from_secs(9)), Duration::ZERO);
        assert_eq!(side.silent_for(start), Duration::ZERO, "never negative");
    }

    #[test]
    fn generations_go_on_from_the_resumed_count() {
        let mut side = RuntimeSide::new(Instant::now(), 3);
        assert_eq!(side.generation(), 3);
        assert_eq!(side.next_generation(), 4);
        assert_eq!(side.generation(), 4);
    }

    #[test]
    fn an_assertion_is_due_once_it_is_old_and_never_without_one() {
        let start = Instant::now();
        let refresh = Duration::from_secs(REFRESH_AFTER_SECS);
        let mut side = RuntimeSide::new(start, 0);
        assert!(!side.assertion_due(start + refresh), "none held");
        side.granted(false, start);
        assert!(!side.assertion_due(start + refresh), "a grant without a caller");
        side.granted(true, start);
        assert!(!side.assertion_due(start + refresh - Duration::from_secs(1)));
        assert!(side.assertion_due(start + refresh));
        side.asserted(start + refresh);
        assert!(!side.assertion_due(start + refresh), "replaced");
        side.forget_assertion();
        assert!(!side.assertion_due(start + 3 * refresh));
    }
}
