//! The client side of a session: when the client was last heard and when anything last
//! moved (the idle deadline), its message rate, the store key of the newest resume token it
//! was given, the messages it holds that the session does not (a resume from a snapshot),
//! and the message number of the last snapshot. [`ClientSide`] owns them; the messages kept
//! for replay are [`crate::resume::Replay`], beside it in the machine.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ErrorCode, close_code};

use crate::auth::{Bucket, Refusal};

/// The client as the session sees it.
#[derive(Debug)]
pub(in crate::session) struct ClientSide {
    /// The last frame of any kind from the client.
    heard: Instant,
    /// The last frame either way (pings and pongs aside): the idle deadline runs from it.
    last_activity: Instant,
    /// The session's own message rate, judged by when the client's frames could have
    /// arrived: a driver behind on the socket (busy, or opening the next runtime session)
    /// reads at once what came over seconds.
    bucket: Bucket,
    /// The store key of the newest resume token the client was given.
    key: Option<String>,
    /// Resumed from a snapshot, the client having received messages `(first, last)` the
    /// session does not hold: told once it is open (`session_restored`).
    restored: Option<(u64, u64)>,
    /// The number of the last message sent when the last snapshot was asked for.
    snapshot_seq: u64,
}

impl ClientSide {
    /// A client heard at `now`, allowed `session_rate` messages a second.
    pub(super) fn new(session_rate: u32, now: Instant) -> Self {
        Self {
            heard: now,
            last_activity: now,
            bucket: crate::auth::message_bucket(session_rate),
            key: None,
            restored: None,
            snapshot_seq: 0,
        }
    }

    /// A frame of any kind came from the client.
    pub(super) fn heard(&mut self, now: Instant) {
        self.heard = now;
    }

    /// How long the client has said nothing.
    pub(super) fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.heard)
    }

    /// A frame other than a ping or pong, either way.
    pub(super) fn active(&mut self, now: Instant) {
        self.last_activity = now;
    }

    /// When the session counts as idle after `timeout` without activity.
    pub(super) fn idle_deadline(&self, timeout: Duration) -> Instant {
        self.last_activity + timeout
    }

    /// The client's socket was found empty at `at`: what is read next came after it.
    pub(super) fn caught_up(&mut self, at: Instant) {
        self.bucket.caught_up(at);
    }

    /// A message of the client read at `now`, within the session's rate since the socket
    /// was last found empty ([`ClientSide::caught_up`]) or refused.
    pub(super) fn take_message(&mut self, now: Instant) -> Result<(), Refusal> {
        if self.bucket.take_read(now) {
            return Ok(());
        }
        let message = format!("more than {} messages a second on this session; send fewer", self.bucket.per_second());
        Err(Refusal { code: close_code::RATE_LIMITED, message, reason: ErrorCode::SessionRate })
    }

    /// The store key of the newest resume token.
    pub(super) fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// A new resume token's store key: the one it replaces.
    pub(super) fn new_key(&mut self, key: String) -> Option<String> {
        self.key.replace(key)
    }

    /// Forgets the resume key.
    pub(super) fn take_key(&mut self) -> Option<String> {
        self.key.take()
    }

    /// The client received messages `first` to `last`, which the session does not hold.
    pub(super) fn restored_without(&mut self, first: u64, last: u64) {
        self.restored = Some((first, last));
    }

    /// The messages the client has that the session does not, told once.
    pub(super) fn take_restored(&mut self) -> Option<(u64, u64)> {
        self.restored.take()
    }

    /// A snapshot was asked for with `seq` the last message sent.
    pub(super) fn snapshot_taken(&mut self, seq: u64) {
        self.snapshot_seq = seq;
    }

    /// Whether messages were sent since the last snapshot (`seq` the last one sent now).
    pub(super) fn snapshot_behind(&self, seq: u64) -> bool {
        self.snapshot_seq != seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_twice_the_rate_then_a_refusal_that_says_the_rate() {
        let now = Instant::now();
        let mut client = ClientSide::new(2, now);
        for n in 0..4 {
            assert!(client.take_message(now).is_ok(), "message {n} of the burst");
        }
        let refusal = client.take_message(now).expect_err("over the burst");
        assert_eq!(refusal.code, close_code::RATE_LIMITED);
        assert_eq!(refusal.reason, ErrorCode::SessionRate);
        assert_eq!(refusal.message, "more than 2 messages a second on this session; send fewer");
        assert!(client.take_message(now + Duration::from_secs(1)).is_ok(), "refilled");
    }

    #[test]
    fn silence_and_idleness_are_counted_apart() {
        let start = Instant::now();
        let mut client = ClientSide::new(10, start);
        let timeout = Duration::from_secs(60);
        assert_eq!(client.idle_deadline(timeout), start + timeout);
        client.heard(start + Duration::from_secs(30));
        assert_eq!(client.idle_deadline(timeout), start + timeout, "a pong is no activity");
        assert_eq!(client.silent_for(start + Duration::from_secs(31)), Duration::from_secs(1));
        client.active(start + Duration::from_secs(40));
        assert_eq!(client.idle_deadline(timeout), start + Duration::from_secs(100));
        assert_eq!(client.silent_for(start), Duration::ZERO, "never negative");
    }

    #[test]
    fn each_key_replaces_the_last_and_a_restored_gap_is_told_once() {
        let mut client = ClientSide::new(10, Instant::now());
        assert_eq!(client.key(), None);
        assert_eq!(client.new_key("a".into()), None);
        assert_eq!(client.new_key("b".into()), Some("a".into()), "the older key, to release");
        assert_eq!(client.key(), Some("b"));
        assert_eq!(client.take_key(), Some("b".into()));
        assert_eq!(client.key(), None);
        client.restored_without(4, 9);
        assert_eq!(client.take_restored(), Some((4, 9)));
        assert_eq!(client.take_restored(), None);
    }

    #[test]
    fn a_snapshot_is_behind_once_a_message_went_out_after_it() {
        let mut client = ClientSide::new(10, Instant::now());
        assert!(!client.snapshot_behind(0));
        assert!(client.snapshot_behind(3));
        client.snapshot_taken(3);
        assert!(!client.snapshot_behind(3));
    }
}
