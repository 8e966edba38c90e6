//! A call's media apart from its sockets ([`Relay`]): the media session with the phone
//! (settled, changed, latched to where the phone's RTP really comes from), the agent's
//! audio held until the media is settled, keys pressed not yet forwarded, the format each
//! side speaks (G.711 in a law, or 16 kHz PCM16 for a G.722 phone), the hold chime while a warm transfer holds the caller, and what the media did
//! ([`Counts`], for the call's last log line).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

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
}

impl Relay {
    pub(crate) fn new(settings: Arc<MediaSettings>, session_format: Format, signalling_ip: IpAddr) -> Self {
        Self {
            settings,
            session_format,
            session: None,
            signalling_ip,
            latched: false,
            pending: VecDeque::new(),
            last_rtp: Instant::now(),
            pressed: Vec::new(),
            hold: None,
            counts: Counts::default(),
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
                let mut session = MediaSession::new(
                    self.settings.media,
                    media.clone(),
                    fastrand::u32(..),
                    fastrand::u16(..),
                    fastrand::u32(..),
                );
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

    pub(crate) fn rtp(&mut self, from: SocketAddr, datagram: &[u8], rtcp: bool) {
        let Some((session, _, negotiated)) = &mut self.session else {
            self.counts.ignored += 1;
            return;
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
    }

    /// The caller's frame for the gateway (in the session's format) and the packet for the
    /// phone.
    pub(crate) fn tick(&mut self) -> (Option<Vec<u8>>, Option<Packet>) {
        let Some((session, phone_format, _)) = &mut self.session else { return (None, None) };
        if let Some(hold) = &mut self.hold
            && session.queued() < FRAME_SAMPLES
        {
            // The chime is μ-law, and converted for a phone that speaks another format.
            session.queue_audio(&convert(Format::G711(hold.law()), *phone_format, &hold.frame()));
        }
        let tick = session.tick();
        let play = match tick.play {
            Playout::Frame(frame) | Playout::Concealed(frame) => {
                Some(convert(*phone_format, self.session_format, &frame))
            }
            Playout::Waiting => None,
        };
        (play, tick.send)
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
mod tests {
    use std::time::Duration;

    use switchboard_sip::sdp::Codec;

    use super::*;

    const ULAW: Format = Format::G711(Law::Ulaw);

    #[test]
    fn laws_convert_only_when_they_differ() {
        let ulaw = [0xFF, 0x80, 0x00, 0x7F];
        assert_eq!(convert(ULAW, ULAW, &ulaw), ulaw);
        let alaw = convert(ULAW, Format::G711(Law::Alaw), &ulaw);
        let back = convert(Format::G711(Law::Alaw), ULAW, &alaw);
        for (a, b) in ulaw.iter().zip(&back) {
            let (a, b) = (i32::from(Law::Ulaw.decode(*a)), i32::from(Law::Ulaw.decode(*b)));
            assert!((a - b).abs() <= a.abs() / 8 + 16, "{a} vs {b}");
        }
    }

    fn negotiated(direction: Direction) -> Negotiated {
        Negotiated {
            remote: "127.0.0.1:4000".parse().expect("addr"),
            codec: Codec::Pcmu,
            payload_type: 0,
            telephone_event: None,
            telephone_event_clock: 8000,
            opus: None,
            remote_ptime: None,
            direction,
            rtcp_mux: false,
            srtp: None,
            proto: "RTP/AVP".to_owned(),
        }
    }

    #[test]
    fn a_g722_phone_speaks_16_khz_pcm_with_the_session_both_ways() {
        use switchboard_sip::media::g722::{Decoder, Encoder};
        let mut relay =
            Relay::new(Arc::new(MediaSettings::default()), Format::Wideband, "127.0.0.1".parse().expect("ip"));
        // The agent's greeting (16 kHz PCM16) comes before the media is settled.
        let tone: Vec<i16> = (0..320).map(|i| if i % 32 < 16 { 6000 } else { -6000 }).collect();
        relay.agent_audio(&Format::Wideband.from_16k(&tone.repeat(5)));
        assert_eq!(relay.queued(), 800, "100 ms, in 8 kHz samples");
        relay.media(Negotiated { codec: Codec::G722, payload_type: 9, ..negotiated(Direction::SendRecv) });
        let mut decoder = Decoder::new();
        let mut heard = Vec::new();
        for _ in 0..5 {
            let (_, send) = relay.tick();
            let (_, packet) = send.expect("a packet");
            let rtp = switchboard_sip::media::rtp::parse(&packet).expect("RTP");
            assert_eq!((rtp.payload_type, rtp.payload.len()), (9, 160), "G.722 to the phone");
            decoder.decode(rtp.payload, &mut heard);
        }
        assert!(heard[320..].iter().any(|s| s.abs() > 3000), "the phone hears the greeting");
        // The phone's G.722 reaches the session as 640 bytes of PCM16 a frame.
        let mut encoder = Encoder::new();
        let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
        let mut frames = Vec::new();
        for _ in 0..6 {
            let mut codes = Vec::new();
            encoder.encode(&tone, &mut codes);
            relay.rtp("127.0.0.1:4000".parse().expect("addr"), &phone.media(9, false, &codes, 160), false);
            frames.extend(relay.tick().0);
        }
        assert!(
            !frames.is_empty() && frames.iter().all(|f| f.len() == 640),
            "{:?}",
            frames.iter().map(Vec::len).collect::<Vec<_>>()
        );
        let last = Format::Wideband.to_16k(frames.last().expect("a frame"));
        assert!(last.iter().any(|s| s.abs() > 3000), "the agent hears the caller, wideband");
    }

    #[test]
    fn silent_rtp_times_the_call_out_unless_the_phone_is_not_sending() {
        let settings = MediaSettings { timeout: Duration::from_millis(50), ..MediaSettings::default() };
        let mut relay = Relay::new(Arc::new(settings), ULAW, "127.0.0.1".parse().expect("ip"));
        assert!(!relay.timed_out(), "no media yet");
        relay.media(negotiated(Direction::SendRecv));
        assert!(!relay.timed_out());
        std::thread::sleep(Duration::from_millis(80));
        assert!(relay.timed_out(), "nothing from the phone for longer than the timeout");
        let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
        relay.rtp("127.0.0.1:4000".parse().expect("addr"), &phone.media(0, false, &[0xFF; 160], 160), false);
        assert!(!relay.timed_out(), "a packet from the phone resets it");
        relay.media(negotiated(Direction::SendOnly));
        std::thread::sleep(Duration::from_millis(80));
        assert!(!relay.timed_out(), "a phone on hold (the edge only sends) is not expected to send");
    }

    #[test]
    fn rtp_from_a_stranger_is_ignored_and_never_latched() {
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "10.0.0.1".parse().expect("ip"));
        relay.media(negotiated(Direction::SendRecv));
        let mut stranger = switchboard_sip::media::rtp::RtpSender::new(9, 1, 1);
        relay.rtp("192.0.2.77:4000".parse().expect("addr"), &stranger.media(0, false, &[0x00; 160], 160), false);
        assert_eq!((relay.counts.rtp_in, relay.counts.ignored, relay.latched), (0, 1, false));
        // The phone's SIP address on another port: latched once.
        relay.rtp("10.0.0.1:5000".parse().expect("addr"), &stranger.media(0, false, &[0xFF; 160], 160), false);
        assert_eq!((relay.counts.rtp_in, relay.latched), (1, true));
    }

    #[test]
    fn a_key_press_is_forwarded_once_however_its_packets_repeat() {
        use switchboard_sip::media::telephone::{Payload, packets};
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
        let mut media = negotiated(Direction::SendRecv);
        media.telephone_event = Some(101);
        relay.media(media);
        let (to_gateway, mut sent) = mpsc::channel(16);
        let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
        for (key, start) in [('4', 8000u32), ('#', 16000)] {
            for planned in packets(switchboard_sip::media::telephone::Event::Digit(key), 120, 8000) {
                let payload = Payload::to_bytes(planned.payload);
                let packet = phone.packet(101, planned.marker, start, &payload);
                relay.rtp("127.0.0.1:4000".parse().expect("addr"), &packet, false);
                relay.forward_keys(&to_gateway);
            }
        }
        let mut keys = Vec::new();
        while let Ok(Message::Text(text)) = sent.try_recv() {
            keys.push(text.to_string());
        }
        assert_eq!(keys, [r#"{"type":"bidi_dtmf","digits":"4"}"#, r##"{"type":"bidi_dtmf","digits":"#"}"##]);
        assert_eq!(relay.counts.keys, 2);
    }

    #[test]
    fn on_hold_the_chime_fills_what_the_agent_leaves_silent() {
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
        relay.media(negotiated(Direction::SendRecv));
        relay.hold(true);
        let mut chime = HoldTone::new(Law::Ulaw);
        let (_, send) = relay.tick();
        assert_eq!(send.expect("a packet").1[12..], chime.frame()[..], "the chime's first frame");
        relay.agent_audio(&[0x10; 160]);
        let (_, send) = relay.tick();
        let (_, packet) = send.expect("a packet");
        assert!(packet[12..].iter().all(|b| *b == 0x10), "the agent's audio first, the chime after");
        relay.hold(false);
        let (_, send) = relay.tick();
        assert!(send.expect("silence").1[12..].iter().all(|b| *b == 0xFF), "off hold: silence again");
        assert_eq!(relay.queued(), 0);
    }

    #[test]
    fn an_interruption_drops_the_queued_reply_at_once() {
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
        relay.agent_audio(&[0x10; 1600]);
        assert_eq!(relay.pending.len(), 1600, "held until the media is settled");
        relay.interrupted();
        assert!(relay.pending.is_empty());
        let media = negotiated(Direction::SendRecv);
        relay.agent_audio(&[0x10; 800]);
        relay.media(media);
        let (_, send) = relay.tick();
        let (to, packet) = send.expect("a packet");
        assert_eq!((to.port(), packet[12..].iter().all(|b| *b == 0x10)), (4000, true), "the greeting is played first");
        relay.agent_audio(&[0x20; 1600]);
        relay.interrupted();
        let (_, send) = relay.tick();
        assert!(send.expect("silence").1[12..].iter().all(|b| *b == 0xFF), "silence after the interruption");
    }
}
