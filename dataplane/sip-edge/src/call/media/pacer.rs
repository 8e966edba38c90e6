//! When the next RTP packet goes to the phone, without I/O: the agent's audio goes out as
//! it comes, never more than [`LEAD`] ahead of real time; silence fills in on the media
//! clock when there is none.
//!
//! The clock ([`Pacer::due`]) is the wall time the next packet's media belongs to; each packet
//! sent moves it on by a frame. A whole frame of the agent's audio goes as soon as the clock
//! is at most [`LEAD`] ahead: a reply streamed in real time goes out the moment each frame
//! arrives (nothing waits for a tick), and one that comes faster than real time (a reply
//! synthesized in a burst) goes out one frame every 20 ms. With no whole frame queued, a
//! packet (silence, or the last part of a reply padded) goes when the clock is due — after
//! [`GRACE`] more mid-reply, so a frame a little late does not put silence in the reply and
//! shift the rest of it a frame later. A clock that fell more than [`MAX_BEHIND`] behind
//! (the edge was busy, or nothing was sent for a while) starts again from now; less than that,
//! the packets owed go at once, so the stream keeps to real time.

use std::time::{Duration, Instant};

use switchboard_sip::media::FRAME_MS;

/// One frame of media time.
const FRAME: Duration = Duration::from_millis(FRAME_MS as u64);
/// How far ahead of real time the agent's audio may go (the phone's jitter buffer holds it).
pub(crate) const LEAD: Duration = Duration::from_millis(10);
/// How long past its time a packet mid-reply waits for the agent's next frame before
/// silence (or the reply's padded last part) goes instead.
pub(crate) const GRACE: Duration = Duration::from_millis(10);
/// How far behind real time the clock may fall before it starts again from now.
pub(crate) const MAX_BEHIND: Duration = Duration::from_millis(60);

/// What is queued for the phone, as the pacer needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    /// At least a whole frame of audio.
    Frame,
    /// Less than a frame of audio, or none.
    Partial,
}

/// The media clock of one call's packets to the phone (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pacer {
    /// When the next packet's media is due; `None` before the first.
    due: Option<Instant>,
    /// Whether the last packet carried the agent's audio.
    replying: bool,
}

impl Pacer {
    /// When the next packet may go, with `queued` waiting: `None` at once.
    pub(crate) fn next(&self, queued: Queued) -> Option<Instant> {
        let due = self.due?;
        Some(match queued {
            Queued::Frame => due.checked_sub(LEAD).unwrap_or(due),
            Queued::Partial if self.replying => due + GRACE,
            Queued::Partial => due,
        })
    }

    /// Whether a packet goes at `now`, with `queued` waiting.
    pub(crate) fn is_due(&self, now: Instant, queued: Queued) -> bool {
        self.next(queued).is_none_or(|at| now >= at)
    }

    /// A packet went at `now` (`audio`: the agent's, or the chime; else silence or nothing,
    /// on hold): the clock moves on a frame.
    pub(crate) fn sent(&mut self, now: Instant, audio: bool) {
        let base = match self.due {
            Some(due) if now <= due + MAX_BEHIND => due,
            _ => now,
        };
        self.due = Some(base + FRAME);
        self.replying = audio;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_reply_streamed_in_real_time_goes_out_as_each_frame_arrives() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert!(p.is_due(t0, Queued::Frame), "the first packet at once");
        p.sent(t0, true);
        // Each frame 20 ms after the last, give or take a few ms of jitter: none waits.
        for at in [23, 36, 67, 80, 91] {
            assert!(p.is_due(t0 + ms(at), Queued::Frame), "the frame at {at} ms goes at once");
            p.sent(t0 + ms(at), true);
        }
        assert_eq!(p.due, Some(t0 + ms(120)), "the clock kept to real time");
    }

    #[test]
    fn a_burst_goes_out_one_frame_a_tick_at_most_the_lead_ahead() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.sent(t0, true);
        assert!(!p.is_due(t0, Queued::Frame), "the second frame waits");
        assert_eq!(p.next(Queued::Frame), Some(t0 + FRAME - LEAD));
        let mut at = t0;
        for _ in 0..50 {
            at = p.next(Queued::Frame).expect("a clock");
            p.sent(at, true);
        }
        assert_eq!(at, t0 + ms(50 * 20) - LEAD, "50 frames over a second: never faster than real time");
    }

    #[test]
    fn mid_reply_a_late_frame_is_waited_for_and_then_silence_goes() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.sent(t0, true);
        assert!(!p.is_due(t0 + ms(20), Queued::Partial), "within the grace the reply's next frame may come");
        assert!(p.is_due(t0 + ms(25), Queued::Frame), "it came 5 ms late: it goes at once");
        p.sent(t0 + ms(25), true);
        assert!(p.is_due(t0 + ms(50), Queued::Partial), "past the grace: silence");
        p.sent(t0 + ms(50), false);
        assert!(!p.is_due(t0 + ms(59), Queued::Partial));
        assert!(p.is_due(t0 + ms(60), Queued::Partial), "silence on the clock itself, no grace");
    }

    #[test]
    fn a_clock_far_behind_starts_again_and_a_little_behind_catches_up() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.sent(t0, false);
        // Busy for 50 ms: the packets owed go at once, each on its own media time.
        let late = t0 + ms(70);
        p.sent(late, false);
        assert!(p.is_due(late, Queued::Partial), "the next one is owed too");
        p.sent(late, false);
        assert!(p.is_due(late, Queued::Partial));
        p.sent(late, false);
        assert!(!p.is_due(late, Queued::Partial), "caught up");
        // Silent for a second (on hold): the clock starts again from now.
        let back = t0 + ms(1000);
        p.sent(back, false);
        assert_eq!(p.due, Some(back + FRAME));
    }
}
