//! One call's task: asks the gateway for a session with the agent the call is for (the
//! Request-URI's user part names it), gives the answer to the SIP task, then relays media
//! until either side ends: the caller's RTP through the jitter buffer to the gateway as
//! binary frames, one every 20 ms; the agent's reply audio from binary frames back as RTP
//! paced in real time, its queue dropped at once on `bidi_interruption`; RTCP reports
//! every 5 s; each key pressed (RFC 4733 or SIP INFO) as one `bidi_dtmf`. The caller's
//! BYE closes the session; the session ending sends BYE; RTP that stops for longer than
//! the media timeout ends the call.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::phone::PhoneCall;
use switchboard_core::protocol::ServerMessage;
use switchboard_sip::call::{Admission, CallEvent, EndReason, Incoming};
use switchboard_sip::media::g711::Law;
use switchboard_sip::media::jitter::Playout;
use switchboard_sip::media::session::{MediaConfig, MediaSession, Received};
use switchboard_sip::media::{FRAME_MS, rtcp};
use switchboard_sip::sdp::{Codec, Direction, Negotiated};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::gateway::{self, GatewayConfig, Session};
use crate::ports::PortPair;

/// What a call's task asks of the SIP task.
#[derive(Debug)]
pub(crate) enum Command {
    /// The answer to the call's INVITE.
    Admit {
        /// The call.
        call_id: String,
        /// Accept, or the refusal.
        admission: Admission,
    },
    /// The session ended: send BYE.
    HangUp {
        /// The call.
        call_id: String,
    },
    /// The agent puts the caller through to a person: send REFER (see [`crate::transfer`]).
    Transfer {
        /// The call.
        call_id: String,
        /// The SIP URI of the person.
        target: String,
        /// How long it may ring.
        timeout: Duration,
    },
}

/// How calls' media behave.
#[derive(Clone, Debug)]
pub struct MediaSettings {
    /// The jitter buffer and the reply audio queue.
    pub media: MediaConfig,
    /// RTP silent this long (while the phone should send) ends the call.
    pub timeout: Duration,
    /// Frames to the gateway queued at most; past it a frame is dropped (a slow gateway
    /// must not grow memory).
    pub gateway_queue: usize,
}

impl Default for MediaSettings {
    fn default() -> Self {
        Self { media: MediaConfig::default(), timeout: Duration::from_secs(30), gateway_queue: 64 }
    }
}

/// Everything a call's task needs.
pub(crate) struct Call {
    pub call_id: String,
    pub incoming: Incoming,
    pub ports: PortPair,
    pub gateway: Arc<GatewayConfig>,
    pub settings: Arc<MediaSettings>,
    pub events: mpsc::Receiver<CallEvent>,
    pub commands: mpsc::Sender<Command>,
    pub shutdown: CancellationToken,
}

/// The longest agent name taken from a Request-URI (a Kubernetes name is at most 253).
const MAX_AGENT: usize = 253;

/// The agent a call is for: the Request-URI's user part, a Kubernetes name (lowercase
/// letters, digits, `-` and `.`) or an E.164 number (the gateway routes it to the Agent
/// that claims it), or why no agent can answer it.
pub(crate) fn agent_of(incoming: &Incoming) -> Result<String, String> {
    let Some(user) = incoming.dialled.as_deref().filter(|u| !u.is_empty()) else {
        return Err("the Request-URI names no agent (call sip:<agent>@host)".to_owned());
    };
    if let Some(digits) = user.strip_prefix('+') {
        // A number: the gateway finds the Agent that claims it (spec.telephony.numbers).
        let e164 =
            (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
        if !e164 {
            return Err(
                "no agent answers this number (a dialled number is E.164: '+' and at most 15 digits)".to_owned()
            );
        }
        return Ok(user.to_owned());
    }
    let valid = user.len() <= MAX_AGENT
        && user.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        return Err("no agent has that name (agent names are lowercase letters, digits, '-' and '.')".to_owned());
    }
    Ok(user.to_owned())
}

/// What the edge vouches for to the gateway about a call: the caller's number only when
/// the call came through an authenticated trunk, and the number dialled.
pub(crate) fn phone_call(incoming: &Incoming) -> PhoneCall {
    PhoneCall::of(
        incoming.caller.as_deref(),
        incoming.caller_asserted,
        incoming.dialled.as_deref(),
        incoming.caller_private,
    )
}

pub(crate) fn law(codec: Codec) -> Law {
    match codec {
        Codec::Pcmu => Law::Ulaw,
        Codec::Pcma => Law::Alaw,
    }
}

/// G.711 from one law to the other (only when the phone's law changed mid-call, or a
/// delayed offer settled on the other law than the session's).
fn convert(from: Law, to: Law, audio: &[u8]) -> Vec<u8> {
    if from == to { audio.to_vec() } else { audio.iter().map(|c| to.encode(from.decode(*c))).collect() }
}

/// Why the relay stopped.
#[derive(Debug)]
pub(crate) enum End {
    Caller(EndReason),
    Session(String),
    MediaTimeout,
    Shutdown,
}

impl End {
    /// Who ended the call and why, for the log.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Caller(reason) => format!("the phone side: {reason:?}"),
            Self::Session(why) => format!("the session ended ({why})"),
            Self::MediaTimeout => "no RTP from the phone for the media timeout".to_owned(),
            Self::Shutdown => "the edge is shutting down".to_owned(),
        }
    }
}

impl Call {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self) {
        let agent = match agent_of(&self.incoming) {
            Ok(agent) => agent,
            Err(reason) => {
                tracing::info!(call = %self.call_id, outcome = "not_found", "call refused: {reason}");
                return self.admit(Admission::NotFound(reason)).await;
            }
        };
        // The session's law: the phone's when its offer settled one, else μ-law (a delayed
        // offer: the edge offers PCMU first).
        let session_law = self.incoming.media.as_ref().map_or(Law::Ulaw, |m| law(m.codec));
        let gateway = Arc::clone(&self.gateway);
        let shutdown = self.shutdown.clone();
        let phone = phone_call(&self.incoming);
        let opened = tokio::select! {
            opened = gateway::open(&gateway, &agent, session_law, &phone) => opened,
            () = wait_for_end(&mut self.events) => return,
            () = shutdown.cancelled() => {
                return self.admit(Admission::Refuse(503, "The edge is shutting down".into())).await;
            }
        };
        let session = match opened {
            Ok(session) => session,
            Err(refused) => {
                tracing::info!(call = %self.call_id, agent, outcome = refused.label(), "call refused: {refused}");
                return self.admit(refused.admission()).await;
            }
        };
        tracing::info!(call = %self.call_id, agent, session = %session.id, "call answered");
        self.admit(Admission::Accept).await;
        let id = session.id.clone();
        let end = self.relay(session, session_law).await;
        tracing::info!(call = %self.call_id, agent, session = %id, end = end.describe(), "call ended");
    }

    async fn admit(&self, admission: Admission) {
        let _ = self.commands.send(Command::Admit { call_id: self.call_id.clone(), admission }).await;
    }

    /// Relays media between the call and its open session until either ends (an outbound
    /// call's task too, once answered: [`crate::outbound`]).
    pub(crate) async fn relay(&mut self, session: Session, session_law: Law) -> End {
        let (sink, mut stream) = session.socket.split();
        let (to_gateway, outgoing) = mpsc::channel::<Message>(self.settings.gateway_queue);
        let writer = tokio::spawn(write(sink, outgoing));
        let mut relay = Relay::new(self.settings.clone(), session_law, self.incoming.source.ip());
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut report = tokio::time::interval(Duration::from_secs(5));
        let cname =
            format!("switchboard-sip@{}", self.ports.rtp.local_addr().map(|a| a.ip().to_string()).unwrap_or_default());
        let mut transfer = crate::transfer::Transfers::default();
        let mut rtp_buf = vec![0u8; 2048];
        let mut rtcp_buf = vec![0u8; rtcp::MAX_PACKET];
        let end = loop {
            tokio::select! {
                event = self.events.recv() => match event {
                    Some(CallEvent::Established(media)) | Some(CallEvent::MediaChanged(media)) => relay.media(media),
                    Some(CallEvent::Digit(event)) => {
                        relay.pressed.push(event);
                        relay.forward_keys(&to_gateway);
                    }
                    Some(CallEvent::Transfer(progress)) => {
                        if let Some(result) = transfer.progress(&self.call_id, progress) {
                            let _ = to_gateway.send(Message::text(result)).await;
                        }
                    }
                    Some(CallEvent::Ended(reason)) => break End::Caller(reason),
                    None => break End::Caller(EndReason::LocalHangUp),
                    Some(_) => {}
                },
                frame = stream.next() => match frame {
                    Some(Ok(Message::Binary(audio))) => relay.agent_audio(&audio),
                    Some(Ok(Message::Text(text))) => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                        Ok(ServerMessage::BidiInterruption {}) => relay.interrupted(),
                        Ok(ServerMessage::TransferRequest { tool_use_id, person, address, timeout_seconds, .. }) => {
                            match transfer.start(&self.call_id, tool_use_id, person, &address, self.incoming.source, timeout_seconds) {
                                Ok(command) => { let _ = self.commands.send(command).await; }
                                Err(result) => { let _ = to_gateway.send(Message::text(result)).await; }
                            }
                        }
                        Ok(ServerMessage::BidiConnectionClose { reason }) => tracing::debug!(call = %self.call_id, reason, "the session is closing"),
                        Ok(ServerMessage::BidiError { code, message, recoverable: false, .. }) => {
                            tracing::warn!(call = %self.call_id, %code, message, "the session failed");
                        }
                        _ => {}
                    },
                    Some(Ok(Message::Close(frame))) => {
                        break End::Session(frame.map(|f| format!("{} {}", u16::from(f.code), f.reason)).unwrap_or_default());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => break End::Session(error.to_string()),
                    None => break End::Session("the gateway closed the connection".into()),
                },
                received = self.ports.rtp.recv_from(&mut rtp_buf) => {
                    if let Ok((n, from)) = received {
                        relay.rtp(from, &rtp_buf[..n], false);
                    }
                    relay.forward_keys(&to_gateway);
                }
                received = self.ports.rtcp.recv_from(&mut rtcp_buf) => {
                    if let Ok((n, from)) = received {
                        relay.rtp(from, &rtcp_buf[..n], true);
                    }
                }
                _ = tick.tick(), if relay.session.is_some() => {
                    let (play, send) = relay.tick();
                    if let Some(frame) = play {
                        match to_gateway.try_send(Message::binary(frame)) {
                            Ok(()) => relay.counts.frames_to_gateway += 1,
                            Err(_) => relay.counts.dropped_to_gateway += 1,
                        }
                    }
                    if let Some((to, packet)) = send {
                        let _ = self.ports.rtp.send_to(&packet, to).await;
                    }
                    if relay.timed_out() {
                        break End::MediaTimeout;
                    }
                }
                _ = report.tick(), if relay.session.is_some() => {
                    if let Some((to, packet)) = relay.report(&cname) {
                        let _ = self.ports.rtcp.send_to(&packet, to).await;
                    }
                }
                () = self.shutdown.cancelled() => break End::Shutdown,
            }
        };
        tracing::info!(
            call = %self.call_id,
            rtp_in = relay.counts.rtp_in,
            ignored = relay.counts.ignored,
            frames_to_gateway = relay.counts.frames_to_gateway,
            dropped_to_gateway = relay.counts.dropped_to_gateway,
            agent_audio_ms = relay.counts.agent_bytes / 8,
            keys = relay.counts.keys,
            dropped_keys = relay.counts.dropped_keys,
            "media relayed"
        );
        match &end {
            End::Caller(_) => {
                // The caller hung up: the session ends as a client ends it.
                let close =
                    serde_json::to_string(&switchboard_core::protocol::ClientMessage::Close {}).unwrap_or_default();
                let _ = to_gateway.send(Message::text(close)).await;
                let _ = to_gateway.send(Message::Close(None)).await;
            }
            End::Session(_) | End::MediaTimeout | End::Shutdown => {
                let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
                if !matches!(end, End::Session(_)) {
                    let _ = to_gateway.send(Message::Close(None)).await;
                }
            }
        }
        drop(to_gateway);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
        end
    }
}

/// Resolves when the caller gives up before the call is answered (CANCEL).
async fn wait_for_end(events: &mut mpsc::Receiver<CallEvent>) {
    while let Some(event) = events.recv().await {
        if matches!(event, CallEvent::Ended(_)) {
            return;
        }
    }
}

/// Sends what the call queues to the gateway, in order, until the queue closes.
async fn write(
    mut sink: futures_util::stream::SplitSink<gateway::Socket, Message>,
    mut outgoing: mpsc::Receiver<Message>,
) {
    while let Some(message) = outgoing.recv().await {
        let closing = matches!(message, Message::Close(_));
        if sink.send(message).await.is_err() || closing {
            break;
        }
    }
}

/// A datagram for the phone and where to send it.
type Packet = (SocketAddr, Vec<u8>);

/// The media state of a call, apart from the sockets.
struct Relay {
    settings: Arc<MediaSettings>,
    session_law: Law,
    session: Option<(MediaSession, Law, Negotiated)>,
    /// The phone's SIP address: RTP from it (another port) may move the media there.
    signalling_ip: IpAddr,
    /// Whether the media moved to where the phone's RTP really comes from.
    latched: bool,
    /// The agent's audio that came before the media was settled (its greeting).
    pending: VecDeque<u8>,
    last_rtp: Instant,
    /// Keys pressed and not yet forwarded (RFC 4733 events, SIP INFO digits).
    pressed: Vec<switchboard_sip::media::telephone::Event>,
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
    /// Bytes of the agent's audio (G.711: 8 a millisecond).
    agent_bytes: u64,
    /// Keys forwarded to the gateway (`bidi_dtmf`; the keys themselves are never logged).
    keys: u64,
    /// Keys dropped because the gateway did not read.
    dropped_keys: u64,
}

impl Relay {
    fn new(settings: Arc<MediaSettings>, session_law: Law, signalling_ip: IpAddr) -> Self {
        Self {
            settings,
            session_law,
            session: None,
            signalling_ip,
            latched: false,
            pending: VecDeque::new(),
            last_rtp: Instant::now(),
            pressed: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// Sends each key pressed since the last call to the gateway, one `bidi_dtmf` each.
    fn forward_keys(&mut self, to_gateway: &mpsc::Sender<Message>) {
        for message in self.pressed.drain(..).filter_map(crate::keys::message) {
            match to_gateway.try_send(message) {
                Ok(()) => self.counts.keys += 1,
                Err(_) => self.counts.dropped_keys += 1,
            }
        }
    }

    fn media(&mut self, media: Negotiated) {
        let phone_law = law(media.codec);
        match &mut self.session {
            Some((session, current, negotiated)) => {
                self.latched = false;
                session.update(media.clone());
                *current = phone_law;
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
                session.queue_audio(&convert(self.session_law, phone_law, &pending));
                self.session = Some((session, phone_law, media));
                self.last_rtp = Instant::now();
            }
        }
    }

    fn agent_audio(&mut self, audio: &[u8]) {
        self.counts.agent_bytes += audio.len() as u64;
        match &mut self.session {
            Some((session, phone_law, _)) => {
                session.queue_audio(&convert(self.session_law, *phone_law, audio));
            }
            None => {
                self.pending.extend(audio);
                let over = self.pending.len().saturating_sub(self.settings.media.max_outgoing);
                self.pending.drain(..over);
            }
        }
    }

    fn interrupted(&mut self) {
        self.pending.clear();
        if let Some((session, ..)) = &mut self.session {
            session.clear_audio();
        }
    }

    fn rtp(&mut self, from: SocketAddr, datagram: &[u8], rtcp: bool) {
        let Some((session, _, negotiated)) = &mut self.session else {
            self.counts.ignored += 1;
            return;
        };
        // Symmetric RTP (RFC 4961) and latching: a phone behind NAT, or one that writes
        // another of its addresses in its SDP (baresip names its default interface), sends
        // from where it can. The media moves to the first RTP source that is the SDP's
        // address or the phone's SIP address, once per offer/answer; any other address
        // stays ignored.
        if !rtcp
            && !self.latched
            && from != negotiated.remote
            && (from.ip() == self.signalling_ip || from.ip() == negotiated.remote.ip())
            && switchboard_sip::media::rtp::parse(datagram).is_ok()
        {
            tracing::debug!(sdp = %negotiated.remote, %from, "media latched to where the phone's RTP comes from");
            negotiated.remote = from;
            session.update(negotiated.clone());
            self.latched = true;
        }
        let now = Instant::now();
        let received =
            if rtcp { session.receive_rtcp(now, from, datagram) } else { session.receive(now, from, datagram) };
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

    /// The caller's frame for the gateway (in the session's law) and the packet for the phone.
    fn tick(&mut self) -> (Option<Vec<u8>>, Option<Packet>) {
        let Some((session, phone_law, _)) = &mut self.session else { return (None, None) };
        let tick = session.tick();
        let play = match tick.play {
            Playout::Frame(frame) | Playout::Concealed(frame) => Some(convert(*phone_law, self.session_law, &frame)),
            Playout::Waiting => None,
        };
        (play, tick.send)
    }

    /// Whether the phone, which should be sending, has sent nothing for the timeout.
    fn timed_out(&self) -> bool {
        let Some((_, _, media)) = &self.session else { return false };
        let phone_sends = matches!(media.direction, Direction::SendRecv | Direction::RecvOnly)
            && media.remote.port() != 0
            && !media.remote.ip().is_unspecified();
        phone_sends && self.last_rtp.elapsed() > self.settings.timeout
    }

    fn report(&mut self, cname: &str) -> Option<Packet> {
        let (session, ..) = self.session.as_mut()?;
        let wall = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        session.report(Instant::now(), wall, cname)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming(dialled: Option<&str>) -> Incoming {
        Incoming {
            call_id: "c".into(),
            dialled: dialled.map(str::to_owned),
            caller: None,
            caller_asserted: false,
            caller_private: false,
            display_name: None,
            source: "127.0.0.1:5080".parse().expect("addr"),
            media: None,
        }
    }

    #[test]
    fn the_request_uri_user_names_the_agent() {
        assert_eq!(agent_of(&incoming(Some("triage"))), Ok("triage".to_owned()));
        assert_eq!(agent_of(&incoming(Some("bank.triage-2"))), Ok("bank.triage-2".to_owned()));
        assert_eq!(agent_of(&incoming(Some("+4930123456"))), Ok("+4930123456".to_owned()), "a number: the gateway's");
        let bad_numbers = [Some("+"), Some("+0301234"), Some("+1234567890123456"), Some("+44 20"), Some("+44x")];
        for bad in bad_numbers.into_iter().chain([None, Some(""), Some("Triage"), Some("a b"), Some("x/../y")]) {
            assert!(agent_of(&incoming(bad)).is_err(), "{bad:?}");
        }
        assert!(agent_of(&incoming(Some(&"a".repeat(254)))).is_err());
    }

    #[test]
    fn the_callers_number_is_vouched_for_only_from_a_trunk() {
        let mut call = Incoming {
            caller: Some("+442079460018".into()),
            caller_asserted: true,
            caller_private: true,
            ..incoming(Some("+442079460000"))
        };
        let header = phone_call(&call).to_header();
        assert_eq!(header, r#"{"caller":"+442079460018","dialled":"+442079460000","withheld":true}"#);
        call.caller_asserted = false;
        assert_eq!(phone_call(&call), PhoneCall { dialled: Some("+442079460000".into()), ..PhoneCall::default() });
        assert!(phone_call(&incoming(Some("triage"))).is_empty(), "a call by the agent's name dialled no number");
    }

    #[test]
    fn laws_convert_only_when_they_differ() {
        let ulaw = [0xFF, 0x80, 0x00, 0x7F];
        assert_eq!(convert(Law::Ulaw, Law::Ulaw, &ulaw), ulaw);
        let alaw = convert(Law::Ulaw, Law::Alaw, &ulaw);
        let back = convert(Law::Alaw, Law::Ulaw, &alaw);
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
            remote_ptime: None,
            direction,
            rtcp_mux: false,
        }
    }

    #[test]
    fn silent_rtp_times_the_call_out_unless_the_phone_is_not_sending() {
        let settings = MediaSettings { timeout: Duration::from_millis(50), ..MediaSettings::default() };
        let mut relay = Relay::new(Arc::new(settings), Law::Ulaw, "127.0.0.1".parse().expect("ip"));
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
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), Law::Ulaw, "10.0.0.1".parse().expect("ip"));
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
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), Law::Ulaw, "127.0.0.1".parse().expect("ip"));
        let mut media = negotiated(Direction::SendRecv);
        media.telephone_event = Some(101);
        relay.media(media);
        let (to_gateway, mut sent) = mpsc::channel(16);
        let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
        for (key, start) in [('4', 8000u32), ('#', 16000)] {
            for planned in packets(switchboard_sip::media::telephone::Event::Digit(key), 120) {
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
    fn an_interruption_drops_the_queued_reply_at_once() {
        let mut relay = Relay::new(Arc::new(MediaSettings::default()), Law::Ulaw, "127.0.0.1".parse().expect("ip"));
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
