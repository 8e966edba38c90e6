//! One call's media both ways, without sockets: RTP from the phone in (only from the
//! address the dialogue settled; only the settled codec and telephone-event payload
//! types), through the jitter buffer to the gateway: forwarded as it comes
//! ([`MediaSession::ready`]) when the buffer forwards, else one frame a tick (see
//! [`JitterConfig::reorder`]); the agent's
//! audio out, paced into one RTP packet a tick (silence when there is none, so
//! NATs and media gateways keep the stream), and telephone events out: one key relayed
//! ([`MediaSession::digit`]), or a sequence of keys the agent presses
//! ([`MediaSession::press`], see [`super::digits`]: the agent's audio waits while it runs).
//! The owner's audio is
//! in the session's [`Format`]: G.711 as the phone sends it, or 16 kHz PCM16 on a G.722
//! or Opus call, decoded and encoded here ([`coder`]); RTP times run at the codec's clock
//! (48 kHz for Opus). When offer/answer
//! settled SRTP, every packet in is unprotected before anything reads it (one that fails
//! is dropped, [`Ignored::Srtp`]) and every packet out protected ([`super::srtp`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::FRAME_MS;
use super::digits::{Pressed, Pressing};
use super::format::Format;
use super::jitter::{JitterBuffer, JitterConfig, Playout, Pushed};
use super::rtcp::{self, Compound, ReceiverStats, SenderInfo};
use super::rtp::{self, RtpSender};
use super::srtp::{SrtpCounts, SrtpError, SrtpSession};
use super::telephone::{self, Event, Telephone};
use crate::sdp::{Direction, Negotiated};

mod coder;
mod pressing;
use coder::Coder;

/// How one call's media behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaConfig {
    /// The jitter buffer.
    pub jitter: JitterConfig,
    /// The most outgoing audio held, in bytes of G.711 (8000 a second; four times as many
    /// bytes of 16 kHz PCM16 on a G.722 or Opus call): the agent's reply arrives faster than it is
    /// spoken. Default 10 s (80 KB).
    pub max_outgoing: usize,
    /// Send silence when there is no audio to send (keeps NAT bindings and media
    /// gateways' timers alive).
    pub send_silence: bool,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self { jitter: JitterConfig::default(), max_outgoing: 80_000, send_silence: true }
    }
}

/// Why a datagram was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// From an address that is not the dialogue's.
    Source,
    /// A payload type not settled for the call.
    PayloadType(u8),
    /// Not an RTP packet the edge takes.
    Malformed,
    /// RTCP that does not read, or on the RTP port without rtcp-mux.
    Rtcp,
    /// The jitter buffer did not keep it (duplicate, late, too large).
    Dropped(Pushed),
    /// SRTP did not unprotect it (forged, replayed, malformed).
    Srtp(SrtpError),
}

/// What a received datagram was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// Audio, held for playout.
    Audio,
    /// An RTCP compound packet (on the RTP port with rtcp-mux, or from
    /// [`MediaSession::receive_rtcp`]): the phone's reports and whether it said BYE.
    Rtcp(Compound),
    /// Telephone events (each press and release told once).
    Telephone(Vec<Telephone>),
    /// Ignored, and why.
    Ignored(Ignored),
}

/// One tick's work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The caller's audio for the gateway (in the session's [`Format`]).
    pub play: Playout,
    /// An RTP packet to send to the phone, and where.
    pub send: Option<(SocketAddr, Vec<u8>)>,
}

/// One call's media (see the module docs).
#[derive(Debug)]
pub struct MediaSession {
    config: MediaConfig,
    media: Negotiated,
    coder: Coder,
    jitter: JitterBuffer,
    receiver: telephone::Receiver,
    sender: RtpSender,
    remote_ssrc: Option<u32>,
    outgoing: VecDeque<u8>,
    /// Whether the last tick sent a packet (silence or audio).
    talking: bool,
    /// Whether the last packet sent carried the agent's audio.
    replying: bool,
    stats: Option<ReceiverStats>,
    srtp: Option<SrtpSession>,
    /// Keys being pressed ([`MediaSession::press`]).
    pressing: Option<Pressing>,
    /// How the last sequence of keys ended, until the owner takes it.
    pressed: Option<Pressed>,
}

impl MediaSession {
    /// Media for what offer/answer settled; the outgoing stream starts at this SSRC,
    /// sequence number and timestamp (random in practice: the owner draws them).
    pub fn new(config: MediaConfig, media: Negotiated, ssrc: u32, sequence: u16, timestamp: u32) -> Self {
        let coder = Coder::new(&media);
        Self {
            config,
            jitter: coder.jitter(config.jitter),
            coder,
            receiver: telephone::Receiver::new(),
            sender: RtpSender::new(ssrc, sequence, timestamp),
            remote_ssrc: None,
            outgoing: VecDeque::new(),
            talking: false,
            replying: false,
            stats: None,
            srtp: media.srtp.clone().map(SrtpSession::new),
            pressing: None,
            pressed: None,
            media,
        }
    }

    /// What offer/answer settled (the remote address as latched).
    pub fn media(&self) -> &Negotiated {
        &self.media
    }

    /// A re-INVITE or UPDATE moved the media (hold, a new address or codec). Keys being
    /// pressed stop when the telephone events' payload type or clock changed.
    pub fn update(&mut self, media: Negotiated) {
        if (media.telephone_event, media.telephone_event_clock)
            != (self.media.telephone_event, self.media.telephone_event_clock)
        {
            self.stop_pressing(Some("the call's media changed"));
        }
        if media.codec != self.media.codec || media.opus != self.media.opus {
            self.coder = Coder::new(&media);
            self.jitter = self.coder.jitter(self.config.jitter);
            self.outgoing.clear();
        }
        // New keys (a re-INVITE's new offer) start new contexts where they changed; the same
        // keys keep theirs, with their rollover counters and replay windows.
        match (&mut self.srtp, media.srtp.clone()) {
            (Some(srtp), Some(keys)) => srtp.rekey(keys),
            (srtp, keys) => *srtp = keys.map(SrtpSession::new),
        }
        self.media = media;
    }

    /// Takes a datagram that came to the call's RTP port from `source` at `now`.
    pub fn receive(&mut self, now: Instant, source: SocketAddr, datagram: &[u8]) -> Received {
        if source != self.media.remote {
            return Received::Ignored(Ignored::Source);
        }
        let plain;
        let datagram = match &mut self.srtp {
            Some(srtp) => {
                let rtcp = rtp::is_rtcp(datagram);
                if rtcp && !self.media.rtcp_mux {
                    return Received::Ignored(Ignored::Rtcp);
                }
                let unprotected = if rtcp { srtp.unprotect_rtcp(datagram) } else { srtp.unprotect_rtp(datagram) };
                match unprotected {
                    Ok(unprotected) => {
                        plain = unprotected;
                        &plain[..]
                    }
                    Err(error) => return Received::Ignored(Ignored::Srtp(error)),
                }
            }
            None => datagram,
        };
        let packet = match rtp::parse(datagram) {
            Ok(packet) => packet,
            Err(rtp::RtpError::Rtcp) if self.media.rtcp_mux => return self.rtcp(now, datagram),
            Err(rtp::RtpError::Rtcp) => return Received::Ignored(Ignored::Rtcp),
            Err(_) => return Received::Ignored(Ignored::Malformed),
        };
        if Some(packet.payload_type) == self.media.telephone_event {
            return match self.receiver.receive(packet.timestamp, packet.payload, self.media.telephone_event_clock) {
                Ok(told) => Received::Telephone(told),
                Err(_) => Received::Ignored(Ignored::Malformed),
            };
        }
        if packet.payload_type != self.media.payload_type {
            return Received::Ignored(Ignored::PayloadType(packet.payload_type));
        }
        if self.remote_ssrc.is_some_and(|ssrc| ssrc != packet.ssrc) {
            // A new source (the phone restarted its stream): start the buffer again.
            self.jitter = self.coder.jitter(self.config.jitter);
            self.coder.restart();
        }
        self.remote_ssrc = Some(packet.ssrc);
        let stats = match self.stats.take() {
            Some(stats) if stats.ssrc() == packet.ssrc => stats,
            _ => ReceiverStats::new(now, packet.ssrc, packet.sequence),
        };
        let stats = self.stats.insert(stats);
        stats.on_packet(now, packet.sequence, packet.timestamp, self.media.codec.clock_rate());
        match self.jitter.push(packet.sequence, packet.payload) {
            Pushed::Held | Pushed::Restarted => Received::Audio,
            other => Received::Ignored(Ignored::Dropped(other)),
        }
    }

    /// Takes a datagram that came to the call's RTCP port (the RTP port + 1 without
    /// rtcp-mux) from `source`: only from the phone's address.
    pub fn receive_rtcp(&mut self, now: Instant, source: SocketAddr, datagram: &[u8]) -> Received {
        if source.ip() != self.media.remote.ip() {
            return Received::Ignored(Ignored::Source);
        }
        match &mut self.srtp {
            Some(srtp) => match srtp.unprotect_rtcp(datagram) {
                Ok(plain) => self.rtcp(now, &plain),
                Err(error) => Received::Ignored(Ignored::Srtp(error)),
            },
            None => self.rtcp(now, datagram),
        }
    }

    fn rtcp(&mut self, now: Instant, datagram: &[u8]) -> Received {
        let Ok(compound) = rtcp::parse(datagram) else { return Received::Ignored(Ignored::Rtcp) };
        if let (Some(ntp), Some(stats)) = (compound.sender_report, self.stats.as_mut())
            && stats.ssrc() == compound.ssrc
        {
            stats.on_sender_report(now, ntp);
        }
        Received::Rtcp(compound)
    }

    /// The edge's RTCP report for now (send one every few seconds, RFC 3550 §6.2: 5 s
    /// is the usual interval), and where to: an SR on the stream it sends with a report
    /// block on the stream it receives, and its CNAME. `wall` is the time since the
    /// Unix epoch, read by the owner. `None` while the edge may not send.
    pub fn report(&mut self, now: Instant, wall: Duration, cname: &str) -> Option<(SocketAddr, Vec<u8>)> {
        if !self.may_send() {
            return None;
        }
        let (packets, octets) = self.sender.counts();
        let sender =
            SenderInfo { ssrc: self.sender.ssrc(), wall, rtp_timestamp: self.sender.timestamp(), packets, octets };
        let block = self.stats.as_mut().map(|stats| stats.report(now));
        let remote = self.media.remote;
        let to = if self.media.rtcp_mux { remote } else { SocketAddr::new(remote.ip(), remote.port().wrapping_add(1)) };
        let report = rtcp::sender_report(&sender, block.as_ref(), cname);
        Some((to, self.protect(report, true)?))
    }

    /// A packet to send, protected when SRTP was settled; `None` when it may not be sent
    /// (the key's lifetime is spent).
    fn protect(&mut self, packet: Vec<u8>, rtcp: bool) -> Option<Vec<u8>> {
        match &mut self.srtp {
            Some(srtp) if rtcp => srtp.protect_rtcp(&packet).ok(),
            Some(srtp) => srtp.protect_rtp(&packet).ok(),
            None => Some(packet),
        }
    }

    /// Whether offer/answer settled SRTP.
    pub fn is_secure(&self) -> bool {
        self.srtp.is_some()
    }

    /// What SRTP did since this was last called (for the owner's metrics); `None` on plain
    /// RTP.
    pub fn take_srtp_counts(&mut self) -> Option<SrtpCounts> {
        self.srtp.as_mut().map(SrtpSession::take_counts)
    }

    /// The format of the audio the owner queues and is played ([`Format::of`] the codec).
    pub fn format(&self) -> Format {
        self.coder.format()
    }

    /// Queues the agent's audio (in [`MediaSession::format`], any length); past
    /// [`MediaConfig::max_outgoing`] the oldest is dropped. Returns the bytes dropped.
    pub fn queue_audio(&mut self, audio: &[u8]) -> usize {
        self.outgoing.extend(audio);
        let max = self.config.max_outgoing * self.format().bytes_per_ms() / 8;
        let over = self.outgoing.len().saturating_sub(max);
        self.outgoing.drain(..over);
        over
    }

    /// Drops the agent's queued audio (the caller barged in).
    pub fn clear_audio(&mut self) {
        self.outgoing.clear();
    }

    /// The statistics of the stream the phone sends (its current SSRC), once a packet of
    /// it came: what the RTCP reports carry, for the owner's metrics.
    pub fn receiver_stats(&self) -> Option<&ReceiverStats> {
        self.stats.as_ref()
    }

    /// How much of the agent's audio waits to be sent, in 8 kHz samples (bytes of G.711;
    /// a quarter of the bytes of 16 kHz PCM16), so that it compares with [`FRAME_SAMPLES`](super::FRAME_SAMPLES)
    /// whatever the codec.
    pub fn queued(&self) -> usize {
        self.format().samples_8k(self.outgoing.len())
    }

    fn may_send(&self) -> bool {
        let address = self.media.remote;
        matches!(self.media.direction, Direction::SendRecv | Direction::SendOnly)
            && address.port() != 0
            && !address.ip().is_unspecified()
    }

    /// Every [`FRAME_MS`]: the caller's next frame (always [`Playout::Waiting`] when the
    /// jitter buffer forwards: [`MediaSession::ready`] gives its frames), and the next packet
    /// to the phone.
    pub fn tick(&mut self) -> Tick {
        let play = if self.jitter.forwards() { Playout::Waiting } else { self.jitter.pop() };
        let play = self.coder.play(play, self.jitter.concealed(), self.jitter.next_held());
        Tick { play, send: self.send() }
    }

    /// When the jitter buffer forwards ([`JitterConfig::reorder`]): the caller's next frame
    /// ready at `now`, if any. Call after each datagram and each tick until it says
    /// [`Playout::Waiting`]; the tick moves a gap on once its reorder window has passed.
    pub fn ready(&mut self, now: Instant) -> Playout {
        if !self.jitter.forwards() {
            return Playout::Waiting;
        }
        let play = self.jitter.pop_ready(now);
        self.coder.play(play, self.jitter.concealed(), self.jitter.next_held())
    }

    /// Whether the jitter buffer forwards (`Some(window)`) or paces (`None`) from now on:
    /// see [`JitterConfig::reorder`]. A bridge to another phone paces (its audio goes out
    /// as RTP at the media clock); the agent's session forwards. A change drops what the
    /// buffer held.
    pub fn set_reorder(&mut self, reorder: Option<Duration>) {
        if self.config.jitter.reorder != reorder {
            self.config.jitter.reorder = reorder;
            self.jitter = self.coder.jitter(self.config.jitter);
        }
    }

    /// Frames of the phone's audio dropped because the paced playout fell behind, since
    /// this was last called (for the owner's metrics).
    pub fn take_dropped(&mut self) -> u64 {
        self.jitter.take_dropped()
    }

    /// The next packet to the phone: the agent's next frame, or silence, or nothing (on
    /// hold), moving the media clock on a frame. [`MediaSession::tick`] sends one a tick;
    /// an owner that paces by its own clock calls this instead (and [`MediaSession::ready`]
    /// for the caller's audio).
    pub fn send(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        let samples = self.media.codec.clock_rate() * FRAME_MS / 1000;
        if let Some(packet) = self.press_slot(samples) {
            return packet;
        }
        let (format, bytes) = (self.format(), self.format().frame_bytes());
        let audio = !self.outgoing.is_empty();
        let frame: Option<Vec<u8>> = if audio {
            let n = bytes.min(self.outgoing.len());
            let mut frame: Vec<u8> = self.outgoing.drain(..n).collect();
            frame.resize(bytes, format.silence_byte());
            Some(frame)
        } else {
            self.config.send_silence.then(|| vec![format.silence_byte(); bytes])
        };
        match frame {
            Some(frame) if self.may_send() => {
                // A talk spurt starts after nothing was sent, or where the agent's audio
                // follows silence (RFC 3551 §4.1): the phone may set its playout anew.
                let marker = !self.talking || (audio && !self.replying);
                self.talking = true;
                self.replying = audio;
                let payload = self.coder.payload(frame);
                let packet = self.sender.media(self.media.payload_type, marker, &payload, samples);
                self.protect(packet, false).map(|packet| (self.media.remote, packet))
            }
            _ => {
                self.talking = false;
                self.replying = false;
                self.sender.skip(samples);
                None
            }
        }
    }

    /// The packets of one key press to send, each with its time after the first in
    /// milliseconds; `None` when the phone takes no telephone events or the edge may not
    /// send. The media clock is not moved (the audio stream goes on beside them).
    pub fn digit(&mut self, event: Event, duration_ms: u32) -> Option<Vec<(u32, Vec<u8>)>> {
        let payload_type = self.media.telephone_event?;
        if !self.may_send() {
            return None;
        }
        let start = self.sender.timestamp();
        let packets = telephone::packets(event, duration_ms.max(FRAME_MS * 2), self.media.telephone_event_clock);
        let mut out = Vec::with_capacity(packets.len());
        for p in packets {
            let packet = self.sender.packet(payload_type, p.marker, start, &p.payload.to_bytes());
            out.extend(self.protect(packet, false).map(|packet| (p.at_ms, packet)));
        }
        Some(out)
    }
}

#[cfg(test)]
mod digits_tests;
#[cfg(test)]
mod opus_tests;
#[cfg(test)]
mod tests;
