//! Two calls' media joined, without sockets: the caller's leg and the person's leg of a
//! transfer the edge dialled itself ([`crate::call::bridge`]). Each leg keeps its own
//! [`MediaSession`] (its jitter buffer, its RTP stream out, its RTCP), so each side hears
//! a steady stream however the other's packets arrive; every tick the frame one leg's
//! jitter buffer plays is queued for the other, transcoded when the legs settled different
//! codecs (μ-law on one side, A-law or G.722 on the other: [`Format::convert`]). A leg's
//! queue holds at most [`MAX_QUEUED`] samples: when the two phones' clocks drift apart, the
//! backlog is dropped rather than let the delay grow.
//!
//! Keys (RFC 4733 telephone events) are relayed: a press on one leg is sent to the other
//! as a press of [`KEY_MS`], when that leg settled telephone events; to a leg that did not,
//! it is dropped (and counted). Keys sent as SIP INFO are the call's owner's to relay with
//! [`MediaBridge::press`].
//!
//! Like a single call's media, each leg moves to where its RTP really comes from once per
//! offer/answer (symmetric RTP and latching: the SDP's address or the leg's SIP peer);
//! RTP from any other address is ignored.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::FRAME_MS;
use super::FRAME_SAMPLES;
use super::format::Format;
use super::jitter::Playout;
use super::session::{MediaSession, Received, Tick};
use super::telephone::{Event, Telephone};
use crate::call::bridge::Leg;
use crate::sdp::{Direction, Negotiated};

/// The most audio queued for one leg, in 8 kHz samples (four frames, 80 ms).
pub const MAX_QUEUED: usize = 4 * FRAME_SAMPLES;

/// How long a relayed key press is held, in milliseconds.
pub const KEY_MS: u32 = 120;

/// What one leg's media did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// RTP packets taken from the leg (audio and telephone events).
    pub rtp_in: u64,
    /// Datagrams from the leg's side ignored (another address, codec, malformed, late).
    pub ignored: u64,
    /// Frames of this leg's audio queued for the other leg.
    pub relayed: u64,
    /// Audio of this leg dropped because its clock ran ahead (from the other's queue, or
    /// from its own jitter buffer's backlog), in 8 kHz samples.
    pub dropped: u64,
    /// Key presses from this leg relayed to the other.
    pub keys: u64,
    /// Key presses from this leg the other takes no telephone events for.
    pub keys_dropped: u64,
}

struct Side {
    session: MediaSession,
    format: Format,
    /// The leg's SIP peer: RTP from it (another port) may move the media there.
    signalling_ip: IpAddr,
    latched: bool,
    last_rtp: Instant,
    /// Key packets to send, each with the tick it is due at.
    keys: VecDeque<(u64, Vec<u8>)>,
    counts: Counts,
}

impl Side {
    fn new(now: Instant, session: MediaSession, signalling_ip: IpAddr) -> Self {
        Self {
            format: session.format(),
            session,
            signalling_ip,
            latched: false,
            last_rtp: now,
            keys: VecDeque::new(),
            counts: Counts::default(),
        }
    }

    fn latch(&mut self, from: SocketAddr, datagram: &[u8]) {
        let remote = self.session.media().remote;
        if !self.latched
            && from != remote
            && (from.ip() == self.signalling_ip || from.ip() == remote.ip())
            && super::rtp::parse(datagram).is_ok()
        {
            let mut moved = self.session.media().clone();
            moved.remote = from;
            self.session.update(moved);
            self.latched = true;
        }
    }

    /// Whether the leg's phone should be sending RTP.
    fn should_send(&self) -> bool {
        let media = self.session.media();
        matches!(media.direction, Direction::SendRecv | Direction::RecvOnly)
            && media.remote.port() != 0
            && !media.remote.ip().is_unspecified()
    }
}

/// Two legs' media joined (see the module docs).
pub struct MediaBridge {
    caller: Side,
    person: Side,
    ticks: u64,
}

impl std::fmt::Debug for MediaBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaBridge")
            .field("caller", &self.caller.counts)
            .field("person", &self.person.counts)
            .field("ticks", &self.ticks)
            .finish()
    }
}

impl MediaBridge {
    /// Joins the caller's media (the session the call had with the agent: what was still
    /// queued of the agent's audio is dropped) and the person's, each with its SIP peer's
    /// address.
    pub fn new(
        now: Instant,
        mut caller: MediaSession,
        caller_signalling: IpAddr,
        mut person: MediaSession,
        person_signalling: IpAddr,
    ) -> Self {
        caller.clear_audio();
        // Each phone hears the other at the media clock: the jitter buffers pace.
        caller.set_reorder(None);
        person.set_reorder(None);
        Self {
            caller: Side::new(now, caller, caller_signalling),
            person: Side::new(now, person, person_signalling),
            ticks: 0,
        }
    }

    fn side(&mut self, leg: Leg) -> &mut Side {
        match leg {
            Leg::Caller => &mut self.caller,
            Leg::Person => &mut self.person,
        }
    }

    /// What a leg's media did.
    pub fn counts(&self, leg: Leg) -> Counts {
        match leg {
            Leg::Caller => self.caller.counts,
            Leg::Person => self.person.counts,
        }
    }

    /// What a leg's SRTP did since this was last called; `None` when the leg is plain RTP.
    pub fn take_srtp_counts(&mut self, leg: Leg) -> Option<super::srtp::SrtpCounts> {
        self.side(leg).session.take_srtp_counts()
    }

    /// A re-INVITE or UPDATE moved a leg's media.
    pub fn update(&mut self, leg: Leg, media: Negotiated) {
        let side = self.side(leg);
        side.format = Format::of(media.codec);
        side.latched = false;
        side.session.update(media);
    }

    /// A datagram that came to a leg's RTP port from `from`.
    pub fn receive(&mut self, now: Instant, leg: Leg, from: SocketAddr, datagram: &[u8]) -> Received {
        let side = self.side(leg);
        side.latch(from, datagram);
        let received = side.session.receive(now, from, datagram);
        match &received {
            Received::Audio => {
                side.last_rtp = now;
                side.counts.rtp_in += 1;
            }
            Received::Telephone(told) => {
                side.last_rtp = now;
                side.counts.rtp_in += 1;
                let presses: Vec<Event> = told
                    .iter()
                    .filter_map(|t| match t {
                        Telephone::Pressed(event) => Some(*event),
                        Telephone::Released { .. } => None,
                    })
                    .collect();
                for event in presses {
                    self.press(leg, event);
                }
            }
            Received::Rtcp(_) => {}
            Received::Ignored(_) => side.counts.ignored += 1,
        }
        received
    }

    /// A datagram that came to a leg's RTCP port from `from`.
    pub fn receive_rtcp(&mut self, now: Instant, leg: Leg, from: SocketAddr, datagram: &[u8]) -> Received {
        self.side(leg).session.receive_rtcp(now, from, datagram)
    }

    /// A key pressed on `leg` (an RFC 4733 event, or a SIP INFO digit its owner read): sent
    /// on to the other leg, or dropped when that leg takes no telephone events.
    pub fn press(&mut self, leg: Leg, event: Event) {
        let now = self.ticks;
        let to = self.side(leg.other());
        let packets = to.session.digit(event, KEY_MS);
        let from = self.side(leg);
        let Some(packets) = packets else {
            from.counts.keys_dropped += 1;
            return;
        };
        from.counts.keys += 1;
        let to = self.side(leg.other());
        for (at_ms, packet) in packets {
            to.keys.push_back((now + u64::from(at_ms / FRAME_MS), packet));
        }
    }

    /// Every [`FRAME_MS`]: each leg's next frame goes to the other; the packets to send,
    /// each with its leg and where.
    pub fn tick(&mut self) -> Vec<(Leg, SocketAddr, Vec<u8>)> {
        self.ticks += 1;
        let Tick { play, send: to_caller } = self.caller.session.tick();
        relay(&mut self.caller, &mut self.person, play);
        let Tick { play, send: to_person } = self.person.session.tick();
        relay(&mut self.person, &mut self.caller, play);
        for side in [&mut self.caller, &mut self.person] {
            side.counts.dropped += side.session.take_dropped() * FRAME_SAMPLES as u64;
        }
        let mut out = Vec::with_capacity(2);
        out.extend(to_caller.map(|(to, packet)| (Leg::Caller, to, packet)));
        out.extend(to_person.map(|(to, packet)| (Leg::Person, to, packet)));
        for leg in [Leg::Caller, Leg::Person] {
            let ticks = self.ticks;
            let side = self.side(leg);
            let remote = side.session.media().remote;
            while side.keys.front().is_some_and(|(due, _)| *due <= ticks) {
                if let Some((_, packet)) = side.keys.pop_front() {
                    out.push((leg, remote, packet));
                }
            }
        }
        out
    }

    /// The first leg whose phone, which should be sending, has sent nothing for `timeout`.
    pub fn silent(&self, now: Instant, timeout: Duration) -> Option<Leg> {
        [(Leg::Caller, &self.caller), (Leg::Person, &self.person)]
            .into_iter()
            .find(|(_, side)| side.should_send() && now.saturating_duration_since(side.last_rtp) > timeout)
            .map(|(leg, _)| leg)
    }

    /// A leg's RTCP report for now (see [`MediaSession::report`]).
    pub fn report(&mut self, leg: Leg, now: Instant, wall: Duration, cname: &str) -> Option<(SocketAddr, Vec<u8>)> {
        self.side(leg).session.report(now, wall, cname)
    }
}

/// Queues what `from` played for `to`, in `to`'s format; past [`MAX_QUEUED`] `to`'s backlog is
/// dropped first.
fn relay(from: &mut Side, to: &mut Side, play: Playout) {
    let frame = match play {
        Playout::Frame(frame) | Playout::Concealed(frame) => frame,
        Playout::Waiting => return,
    };
    let backlog = to.session.queued();
    if backlog + from.format.samples_8k(frame.len()) > MAX_QUEUED {
        to.session.clear_audio();
        from.counts.dropped += backlog as u64;
    }
    let frame = if from.format == to.format { frame } else { from.format.convert(to.format, &frame) };
    to.session.queue_audio(&frame);
    from.counts.relayed += 1;
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
