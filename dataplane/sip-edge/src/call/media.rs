//! A call's media apart from its sockets ([`Relay`]): the media session with the phone
//! (settled, changed, latched to where the phone's RTP really comes from), the agent's
//! audio held until the media is settled, keys pressed not yet forwarded, the format each
//! side speaks (G.711 in a law, or 16 kHz PCM16 for a G.722 phone), the hold chime while a warm transfer holds the caller, the keys the
//! agent presses (`send_digits`: [`Relay::press`], see [`crate::digits`]), and what the
//! media did ([`Counts`], for the call's last log line).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use switchboard_sip::media::FRAME_SAMPLES;
use switchboard_sip::media::format::Format;
use switchboard_sip::media::g711::Law;
use switchboard_sip::media::hold::HoldTone;
use switchboard_sip::media::jitter::Playout;
use switchboard_sip::media::session::{Ignored, MediaSession, Received};
use switchboard_sip::sdp::{Direction, Negotiated};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::MediaSettings;
use pacer::{Pacer, Queued};

mod pacer;

/// Audio from one format to the other (only when the phone's codec changed mid-call, or a
/// delayed offer settled on another codec than the session's).
fn convert(from: Format, to: Format, audio: &[u8]) -> Vec<u8> {
    from.convert(to, audio)
}

/// A datagram for the phone and where to send it.
type Packet = (SocketAddr, Vec<u8>);

/// The media state of a call, apart from the sockets.
pub(crate) struct Relay {
    settings: Arc<MediaSettings>,
    session_format: Format,
    session: Option<(MediaSession, Format, Negotiated)>,
    /// The phone's SIP address: RTP from it (another port) may move the media there.
    signalling_ip: IpAddr,
    /// Whether the media moved to where the phone's RTP really comes from.
    latched: bool,
    /// The agent's audio that came before the media was settled (its greeting).
    pending: VecDeque<u8>,
    last_rtp: Instant,
    /// Keys pressed and not yet forwarded (RFC 4733 events, SIP INFO digits).
    pressed: Vec<switchboard_sip::media::telephone::Event>,
    /// A warm transfer holds the caller: the chime fills what the agent leaves silent.
    hold: Option<HoldTone>,
    /// The jitter buffer's mode: forwarding to the agent at once (the settings' reorder
    /// window), or paced (`None`: answering-machine detection reads one frame a tick).
    reorder: Option<Duration>,
    /// When the next packet goes to the phone ([`Relay::send_due`]).
    pacer: Pacer,
    /// The tool call whose keys are being pressed ([`Relay::press`]).
    pressing: Option<String>,
    counts: Counts,
}

/// What a call's media did, for its last log line.
#[derive(Debug, Default)]
struct Counts {
    /// RTP packets taken (audio and telephone events).
    rtp_in: u64,
    /// Datagrams ignored (not the dialogue's address, codec, malformed, late).
    ignored: u64,
    /// Frames of the caller's audio sent to the gateway.
    frames_to_gateway: u64,
    /// Frames dropped because the gateway did not read.
    dropped_to_gateway: u64,
    /// Milliseconds of the agent's audio.
    agent_ms: u64,
    /// Keys forwarded to the gateway (`bidi_dtmf`; the keys themselves are never logged).
    keys: u64,
    /// Keys dropped because the gateway did not read.
    dropped_keys: u64,
    /// Keys the agent pressed (`send_digits`; the keys themselves are not logged).
    keys_pressed: u64,
}

impl Relay {
    pub(crate) fn new(settings: Arc<MediaSettings>, session_format: Format, signalling_ip: IpAddr) -> Self {
        Self {
            session_format,
            session: None,
            signalling_ip,
            latched: false,
            pending: VecDeque::new(),
            last_rtp: Instant::now(),
            pressed: Vec::new(),
            hold: None,
            reorder: settings.media.jitter.reorder,
            pacer: Pacer::default(),
            pressing: None,
            counts: Counts::default(),
            settings,
        }
    }

    /// Paces the phone's audio, one frame a tick (`true`: answering-machine detection reads
    /// the audio's timeline), or forwards it as it comes (`false`, the settings' mode: the
    /// agent's speech model takes it at once). A change drops what the jitter buffer held.
    pub(crate) fn pace(&mut self, paced: bool) {
        self.reorder = if paced { None } else { self.settings.media.jitter.reorder };
        if let Some((session, ..)) = &mut self.session {
            session.set_reorder(self.reorder);
        }
    }

    /// Puts the phone on hold (the chime, wherever the agent says nothing) or takes it off.
    pub(crate) fn hold(&mut self, on: bool) {
        self.hold = on.then(|| HoldTone::new(Law::Ulaw));
    }

    /// The format of the session's audio.
    pub(crate) fn session_format(&self) -> Format {
        self.session_format
    }

    /// The agent's audio still to be sent to the phone, in 8 kHz samples.
    pub(crate) fn queued(&self) -> usize {
        let pending = self.session_format.samples_8k(self.pending.len());
        self.session.as_ref().map_or(pending, |(session, ..)| session.queued())
    }

    /// Whether the media with the phone is settled (the clocks run only then).
    pub(crate) fn is_settled(&self) -> bool {
        self.session.is_some()
    }

    /// A key pressed (a SIP INFO digit), forwarded with the next [`Relay::forward_keys`].
    pub(super) fn pressed(&mut self, event: switchboard_sip::media::telephone::Event) {
        self.pressed.push(event);
    }

    /// Queues the caller's frame for the gateway; dropped (and counted) when the gateway
    /// does not read.
    pub(super) fn frame_to_gateway(&mut self, frame: Vec<u8>, to_gateway: &mpsc::Sender<Message>) {
        match to_gateway.try_send(Message::binary(frame)) {
            Ok(()) => self.counts.frames_to_gateway += 1,
            Err(_) => self.counts.dropped_to_gateway += 1,
        }
    }

    /// The call's last log line about its media.
    pub(super) fn log_counts(&self, call_id: &str) {
        let counts = &self.counts;
        tracing::info!(
            call = %call_id,
            rtp_in = counts.rtp_in,
            ignored = counts.ignored,
            frames_to_gateway = counts.frames_to_gateway,
            dropped_to_gateway = counts.dropped_to_gateway,
            agent_audio_ms = counts.agent_ms,
            keys = counts.keys,
            dropped_keys = counts.dropped_keys,
            keys_pressed = counts.keys_pressed,
            srtp = self.session.as_ref().is_some_and(|(session, ..)| session.is_secure()),
            codec = self.session.as_ref().map_or("none", |(_, _, media)| media.codec.name()),
            "media relayed"
        );
    }

    /// Sends each key pressed since the last call to the gateway, one `bidi_dtmf` each.
    pub(super) fn forward_keys(&mut self, to_gateway: &mpsc::Sender<Message>) {
        for message in self.pressed.drain(..).filter_map(crate::keys::message) {
            match to_gateway.try_send(message) {
                Ok(()) => self.counts.keys += 1,
                Err(_) => self.counts.dropped_keys += 1,
            }
        }
    }

    /// The agent's `digits_request` for call `tool_use_id`: its keys start going to the
    /// phone with the next packet (the agent's audio waits until they are over), and the
    /// `digits_result` follows from [`Relay::keys_done`]; or, when they cannot be pressed,
    /// the `digits_result` saying why, to send at once.
    pub(crate) fn press(&mut self, tool_use_id: &str, digits: &str) -> Result<u32, Message> {
        use switchboard_core::protocol::DigitsOutcome;
        let refuse = |outcome, message: &str| Err(crate::digits::result(tool_use_id, outcome, 0, message));
        if self.pressing.is_some() {
            return refuse(DigitsOutcome::Rejected, "other keys are being pressed on this call");
        }
        let steps = match switchboard_sip::media::digits::parse(digits) {
            Ok(steps) => steps,
            Err(error) => return refuse(DigitsOutcome::Rejected, &format!("the keys do not read: {error}")),
        };
        let Some((session, ..)) = &mut self.session else {
            return refuse(DigitsOutcome::Rejected, "the call's media is not settled yet");
        };
        match session.press(steps) {
            Ok(ms) => {
                self.pressing = Some(tool_use_id.to_owned());
                Ok(ms)
            }
            Err(why) => refuse(crate::digits::refused(why), &why.to_string()),
        }
    }

    /// The `digits_result` of the keys being pressed, once they are over (all sent, or
    /// interrupted), with the outcome for the log.
    pub(crate) fn keys_done(&mut self) -> Option<(Message, switchboard_core::protocol::DigitsOutcome)> {
        let (session, ..) = self.session.as_mut()?;
        let ended = session.take_pressed()?;
        let tool_use_id = self.pressing.take()?;
        let (outcome, sent, why) = crate::digits::ended(&ended);
        self.counts.keys_pressed += u64::from(sent);
        Some((crate::digits::result(&tool_use_id, outcome, sent, why), outcome))
    }

    pub(crate) fn media(&mut self, media: Negotiated) {
        let phone_format = Format::of(media.codec);
        match &mut self.session {
            Some((session, current, negotiated)) => {
                self.latched = false;
                session.update(media.clone());
                *current = phone_format;
                *negotiated = media;
            }
            None => {
                let mut config = self.settings.media;
                config.jitter.reorder = self.reorder;
                let mut session =
                    MediaSession::new(config, media.clone(), fastrand::u32(..), fastrand::u16(..), fastrand::u32(..));
                let pending: Vec<u8> = self.pending.drain(..).collect();
                session.queue_audio(&convert(self.session_format, phone_format, &pending));
                self.session = Some((session, phone_format, media));
                self.last_rtp = Instant::now();
            }
        }
    }

    pub(crate) fn agent_audio(&mut self, audio: &[u8]) {
        self.counts.agent_ms += (audio.len() / self.session_format.bytes_per_ms()) as u64;
        match &mut self.session {
            Some((session, phone_format, _)) => {
                session.queue_audio(&convert(self.session_format, *phone_format, audio));
            }
            None => {
                self.pending.extend(audio);
                let max = self.settings.media.max_outgoing * self.session_format.bytes_per_ms() / 8;
                let over = self.pending.len().saturating_sub(max);
                self.pending.drain(..over);
            }
        }
    }

    /// The format the phone's media session takes, once the media is settled.
    pub(crate) fn phone_format(&self) -> Option<Format> {
        self.session.as_ref().map(|(_, format, _)| *format)
    }

    /// Queues a frame of one of the edge's announcements (in the phone's format; not the
    /// agent's audio, not counted as it).
    pub(crate) fn queue_announcement(&mut self, frame: &[u8]) {
        if let Some((session, ..)) = &mut self.session {
            session.queue_audio(frame);
        }
    }

    /// Audio waiting to be sent to the phone, in 8 kHz samples.
    pub(crate) fn queued_audio(&self) -> usize {
        self.queued()
    }

    /// The media session with the phone, taken (the bridge to a person carries it on).
    pub(super) fn take_session(&mut self) -> Option<switchboard_sip::media::session::MediaSession> {
        self.session.take().map(|(session, ..)| session)
    }

    pub(super) fn interrupted(&mut self) {
        self.pending.clear();
        if let Some((session, ..)) = &mut self.session {
            session.clear_audio();
        }
    }

    /// Takes a datagram from the call's RTP port (or its RTCP port, `rtcp`); returns the
    /// caller's frames it made ready for the gateway (in the session's format): forwarded at
    /// once when the jitter buffer forwards, none when it paces ([`Relay::tick`] plays them).
    pub(crate) fn rtp(&mut self, from: SocketAddr, datagram: &[u8], rtcp: bool) -> Vec<Vec<u8>> {
        let Some((session, _, negotiated)) = &mut self.session else {
            self.counts.ignored += 1;
            return Vec::new();
        };
        // Symmetric RTP (RFC 4961) and latching: a phone behind NAT, or one that writes
        // another of its addresses in its SDP (baresip names its default interface), sends
        // from where it can. The media moves to the first RTP source that is the SDP's
        // address or the phone's SIP address, once per offer/answer; any other address
        // stays ignored. On an SRTP call only a packet that authenticates moves it.
        let mut unlatched = None;
        if !rtcp
            && !self.latched
            && from != negotiated.remote
            && (from.ip() == self.signalling_ip || from.ip() == negotiated.remote.ip())
            && switchboard_sip::media::rtp::parse(datagram).is_ok()
        {
            tracing::debug!(sdp = %negotiated.remote, %from, "media latched to where the phone's RTP comes from");
            unlatched = Some(negotiated.remote);
            negotiated.remote = from;
            session.update(negotiated.clone());
            self.latched = true;
        }
        let now = Instant::now();
        let received =
            if rtcp { session.receive_rtcp(now, from, datagram) } else { session.receive(now, from, datagram) };
        if let (Some(previous), Received::Ignored(Ignored::Srtp(_))) = (unlatched, &received) {
            negotiated.remote = previous;
            session.update(negotiated.clone());
            self.latched = false;
        }
        match received {
            Received::Audio => {
                self.last_rtp = now;
                self.counts.rtp_in += 1;
                return self.ready(now);
            }
            Received::Telephone(told) => {
                self.last_rtp = now;
                self.counts.rtp_in += 1;
                self.pressed.extend(told.into_iter().filter_map(|t| match t {
                    switchboard_sip::media::telephone::Telephone::Pressed(event) => Some(event),
                    switchboard_sip::media::telephone::Telephone::Released { .. } => None,
                }));
            }
            Received::Rtcp(_) => {}
            Received::Ignored(why) => {
                if self.counts.ignored == 0 {
                    tracing::debug!(%from, ?why, "first datagram ignored on the call's media port");
                }
                self.counts.ignored += 1;
            }
        }
        Vec::new()
    }

    /// The caller's frames ready at `now` (forwarding: after a datagram, and on each tick
    /// for a gap whose reorder window has passed), in the session's format.
    pub(crate) fn ready(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let Some((session, phone_format, _)) = &mut self.session else { return Vec::new() };
        let mut frames = Vec::new();
        while let Playout::Frame(frame) | Playout::Concealed(frame) = session.ready(now) {
            frames.push(convert(*phone_format, self.session_format, &frame));
        }
        frames
    }

    /// When [`Relay::send_due`] next has a packet for the phone (now or past: at once);
    /// `None` before the media is settled.
    pub(crate) fn next_send(&self) -> Option<Instant> {
        let (session, ..) = self.session.as_ref()?;
        Some(self.pacer.next(Self::queued_for(session)).unwrap_or_else(Instant::now))
    }

    /// What waits for the phone, for the pacer: while keys are pressed the agent's audio
    /// waits, and the keys' packets go on the stream's clock.
    fn queued_for(session: &MediaSession) -> Queued {
        if session.queued() >= FRAME_SAMPLES && !session.is_pressing() { Queued::Frame } else { Queued::Partial }
    }

    /// The packets due to the phone at `now` ([`pacer`]): the agent's audio as it comes, at
    /// most a little ahead of real time; silence (or the hold chime) on the media clock
    /// when there is none; those owed after a busy spell, at once.
    pub(crate) fn send_due(&mut self, now: Instant) -> Vec<Packet> {
        let mut out = Vec::new();
        let Some((session, phone_format, _)) = &mut self.session else { return out };
        // The packets owed (at most `MAX_BEHIND` of audio) and this one; bounded again here.
        for _ in 0..16 {
            if let Some(hold) = &mut self.hold
                && session.queued() < FRAME_SAMPLES
            {
                session.queue_audio(&convert(Format::G711(hold.law()), *phone_format, &hold.frame()));
            }
            if !self.pacer.is_due(now, Self::queued_for(session)) {
                break;
            }
            self.pacer.sent(now, session.queued() > 0 && !session.is_pressing());
            out.extend(session.send());
        }
        out
    }

    /// Every 20 ms, where the packets to the phone keep to a plain tick (the hold
    /// announcement, a brief's person, answering-machine detection; the call's own relay
    /// uses [`Relay::send_due`]): the caller's frames for the gateway (in the session's
    /// format: when the jitter buffer forwards, those a gap held back past its reorder
    /// window; when it paces, this tick's) and the packet for the phone.
    pub(crate) fn tick(&mut self) -> (Vec<Vec<u8>>, Option<Packet>) {
        let mut frames = self.ready(Instant::now());
        let Some((session, phone_format, _)) = &mut self.session else { return (frames, None) };
        if let Some(hold) = &mut self.hold
            && session.queued() < FRAME_SAMPLES
        {
            // The chime is μ-law, and converted for a phone that speaks another format.
            session.queue_audio(&convert(Format::G711(hold.law()), *phone_format, &hold.frame()));
        }
        let tick = session.tick();
        if let Playout::Frame(frame) | Playout::Concealed(frame) = tick.play {
            frames.push(convert(*phone_format, self.session_format, &frame));
        }
        (frames, tick.send)
    }

    /// Whether the phone, which should be sending, has sent nothing for the timeout.
    pub(crate) fn timed_out(&self) -> bool {
        let Some((_, _, media)) = &self.session else { return false };
        let phone_sends = matches!(media.direction, Direction::SendRecv | Direction::RecvOnly)
            && media.remote.port() != 0
            && !media.remote.ip().is_unspecified();
        phone_sends && self.last_rtp.elapsed() > self.settings.timeout
    }

    /// What the call's SRTP did since this was last called (for the metrics); `None` on
    /// plain RTP or before the media is settled.
    pub(super) fn take_srtp_counts(&mut self) -> Option<switchboard_sip::media::srtp::SrtpCounts> {
        self.session.as_mut()?.0.take_srtp_counts()
    }

    /// The statistics of the phone's stream, for the metrics.
    pub(super) fn receiver_stats(&self) -> Option<&switchboard_sip::media::rtcp::ReceiverStats> {
        self.session.as_ref()?.0.receiver_stats()
    }

    pub(crate) fn report(&mut self, cname: &str) -> Option<Packet> {
        let (session, ..) = self.session.as_mut()?;
        let wall = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        session.report(Instant::now(), wall, cname)
    }
}

#[cfg(test)]
mod tests;
