//! When the next RTP packet goes to the phone, without I/O: the agent's audio goes out as
//! it comes, never more than [`LEAD`] ahead of real time; silence fills in on the media
//! clock when there is none.
//!
//! Two clocks. The stream's ([`Pacer::due`]): when the next packet is due, moved on a frame by
//! each packet. The reply's: when the agent's next frame is due, moved on only by the agent's
//! audio. A reply's first frame goes at once and starts the reply's clock; each next whole
//! frame goes as soon as the reply's clock is at most [`LEAD`] ahead: a reply streamed in
//! real time goes out the moment each frame arrives, one that comes faster than real time (a
//! reply synthesized in a burst) one frame every 20 ms. With no whole frame queued a packet
//! (silence, or a reply's padded last part) goes on the stream's clock, [`GRACE`] later
//! mid-reply. Frames that come late (the gateway or the network held them) do not stay
//! queued behind the silence that filled in for them: the reply's clock did not move for the
//! silence, so they are owed and go at once, up to [`MAX_BEHIND`] of them. A reply silent for
//! longer than that is over; the next starts its clock again.

use std::time::{Duration, Instant};

use switchboard_sip::media::FRAME_MS;

/// One frame of media time.
const FRAME: Duration = Duration::from_millis(FRAME_MS as u64);
/// How far ahead of real time the agent's audio may go (the phone's jitter buffer holds it).
pub(crate) const LEAD: Duration = Duration::from_millis(10);
/// How long past its time a packet mid-reply waits for the agent's next frame before
/// silence (or the reply's padded last part) goes instead.
pub(crate) const GRACE: Duration = Duration::from_millis(10);
/// How far behind real time the reply's clock may be: the most of the agent's audio owed
/// that goes at once, and how long a reply may be silent before it is over.
pub(crate) const MAX_BEHIND: Duration = Duration::from_millis(100);

/// What is queued for the phone, as the pacer needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    /// At least a whole frame of audio.
    Frame,
    /// Less than a frame of audio, or none.
    Partial,
}

/// The media clocks of one call's packets to the phone (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pacer {
    /// When the next packet is due; `None` before the first.
    due: Option<Instant>,
    /// When the reply's next frame is due; `None` when no reply is under way.
    reply: Option<Instant>,
}

impl Pacer {
    /// When the next packet may go, with `queued` waiting: `None` at once.
    pub(crate) fn next(&self, queued: Queued) -> Option<Instant> {
        match (queued, self.reply) {
            (Queued::Frame, reply) => reply.map(|at| at.checked_sub(LEAD).unwrap_or(at)),
            (Queued::Partial, Some(reply)) => Some(self.due.map_or(reply, |due| due.max(reply)) + GRACE),
            (Queued::Partial, None) => self.due,
        }
    }

    /// Whether a packet goes at `now`, with `queued` waiting.
    pub(crate) fn is_due(&self, now: Instant, queued: Queued) -> bool {
        self.next(queued).is_none_or(|at| now >= at)
    }

    /// A packet went at `now` (`audio`: the agent's, or the chime; else silence or nothing,
    /// on hold): the clocks move on.
    pub(crate) fn sent(&mut self, now: Instant, audio: bool) {
        let floor = now.checked_sub(MAX_BEHIND).unwrap_or(now);
        if audio {
            let slot = self.reply.map_or(now, |reply| reply.max(floor));
            self.reply = Some(slot + FRAME);
            self.due = Some((slot + FRAME).max(now));
            return;
        }
        if self.reply.is_some_and(|reply| reply < floor) {
            self.reply = None;
        }
        let base = match self.due {
            Some(due) if now <= due + FRAME => due,
            _ => now,
        };
        self.due = Some(base + FRAME);
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
    fn mid_reply_a_late_frame_is_waited_for_then_silence_goes_and_the_late_frames_are_owed() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.sent(t0, true);
        assert!(!p.is_due(t0 + ms(20), Queued::Partial), "within the grace the reply's next frame may come");
        assert!(p.is_due(t0 + ms(25), Queued::Frame), "it came 5 ms late: it goes at once");
        p.sent(t0 + ms(25), true);
        assert!(!p.is_due(t0 + ms(49), Queued::Partial));
        assert!(p.is_due(t0 + ms(50), Queued::Partial), "past the grace: silence");
        p.sent(t0 + ms(50), false);
        // The frames the gateway held come together: the silence did not move the reply's
        // clock, so both are owed and go at once.
        for _ in 0..2 {
            assert!(p.is_due(t0 + ms(55), Queued::Frame));
            p.sent(t0 + ms(55), true);
        }
        assert!(!p.is_due(t0 + ms(55), Queued::Frame), "caught up: the next waits for its time");
    }

    #[test]
    fn behind_the_audio_owed_goes_at_once_and_a_reply_silent_too_long_is_over() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.sent(t0, true);
        // Busy for 70 ms while the reply queued: the frames owed go at once, each on its own
        // media time, up to the lead.
        let late = t0 + ms(90);
        let mut sent = 0;
        while p.is_due(late, Queued::Frame) {
            p.sent(late, true);
            sent += 1;
        }
        assert_eq!((sent, p.reply), (5, Some(t0 + ms(120))), "slots 20 to 100 ms");
        // Busy for seconds: at most `MAX_BEHIND` of audio at once.
        let stalled = t0 + ms(5000);
        let mut sent = 0;
        while p.is_due(stalled, Queued::Frame) {
            p.sent(stalled, true);
            sent += 1;
        }
        assert_eq!(sent, 6, "100 ms owed and the lead");
        // Silent for seconds: one packet of silence, the clock starts again, the reply is over.
        let back = t0 + ms(9000);
        assert!(p.is_due(back, Queued::Partial));
        p.sent(back, false);
        assert_eq!((p.due, p.reply), (Some(back + FRAME), None));
        assert!(!p.is_due(back, Queued::Partial));
        assert!(p.is_due(back + ms(1), Queued::Frame), "a new reply's first frame goes at once");
    }
}
