//! One WebRTC call as a machine without I/O, over one [`str0m::Rtc`] (ICE-lite, DTLS, SRTP,
//! SCTP): events in, effects out, as `quinn-proto`'s `Connection`.
//!
//! - Made by [`Call::accept`] from a checked [`Offer`], which also gives the SDP answer.
//! - Inputs (`handle_*` and mutators): [`Call::handle_datagram`] (a datagram with its source
//!   and destination), [`Call::handle_timeout`] (the time passed), [`Call::send_audio`] (the
//!   agent's PCM at the runtime's output rate), [`Call::flush_audio`] (barge-in: queued reply
//!   audio dropped at once), [`Call::send_text`] (a session-protocol message for the client),
//!   [`Call::patch`] (trickle ICE or an ICE restart), [`Call::close`].
//! - Outputs, polled after every input until empty: [`Call::poll_transmit`] (datagrams to
//!   send), [`Call::poll_event`] ([`CallEvent`]: connected, the path media takes, the data
//!   channel open, messages and the caller's PCM at the runtime's input rate,
//!   disconnected, closed), then
//!   [`Call::poll_timeout`] (when to call [`Call::handle_timeout`] next).
//!
//! What str0m reports is turned into these outputs in `drive`.

mod drive;
mod ice;
mod path;

pub use drive::MOST_AUDIO_MS;
pub use path::Path;

/// The tracing target of the events that time a call's audio through the edge, at `trace`
/// level (off unless asked for: `SWITCHBOARD_LOG=warn,switchboard_webrtc::latency=trace`):
/// each caller packet decoded (its sequence number, samples and loudness), each reply frame
/// handed to str0m (its RTP time and how late it went against its due time), and in the
/// gateway's edge each piece of caller audio fed to the session and each reply chunk from
/// it. The log lines' own timestamps are the measurement (the `webrtc` benchmark's
/// breakdown of the latency the edge adds).
pub const LATENCY_TARGET: &str = "switchboard_webrtc::latency";

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::channel::ChannelId;
use str0m::config::DtlsCert;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Input, Rtc};
use switchboard_core::protocol::{AudioFormat, AudioSettings};

use crate::audio::{AudioError, Inbound, InboundStats, Outbound};
use crate::channel::{ChannelError, DEFAULT_MAX_MESSAGE_BYTES};
use crate::offer::{Offer, OfferError, OfferRules};
use ice::{pwd_of, ufrag_of};

/// How a call is set up.
#[derive(Clone, Debug)]
pub struct CallConfig {
    /// The gateway's UDP addresses as clients reach them (its advertised address and the one
    /// multiplexed port): each a host candidate in the answer. Received datagrams must name
    /// one of them as their destination, and datagrams to send name one as their source:
    /// where the socket is bound to another address (the pod's, behind a 1:1 NAT or a load
    /// balancer), the socket task maps its own address to the advertised one both ways.
    pub udp: Vec<SocketAddr>,
    /// Addresses for ICE-TCP (passive host candidates), the fallback where UDP is blocked.
    pub tcp: Vec<SocketAddr>,
    /// The caller's PCM rate towards the runtime (`session_start.audio.input`): 16 kHz.
    pub input_rate: u32,
    /// The agent's PCM rate from the runtime (`session_start.audio.output`): 24 kHz.
    pub output_rate: u32,
    /// The largest data-channel message (the WebSocket's `max_message_bytes`).
    pub max_message_bytes: usize,
    /// What an offer must hold.
    pub rules: OfferRules,
    /// Audio packets str0m holds back to put reordered ones in order before it gives up on a
    /// missing one (then concealed).
    pub reorder_packets: usize,
    /// The longest a packet waits for one missing before it.
    pub reorder_wait: Duration,
    /// How long ICE may stay disconnected (no consent) before the call ends; an ICE restart
    /// within it keeps the call.
    pub disconnect_grace: Duration,
    /// The DTLS certificate, shared by the calls of a gateway ([`generate_dtls_cert`]); none:
    /// each call makes its own (a key pair per call: CPU the gateway can save).
    pub dtls_cert: Option<DtlsCert>,
    /// The reply encoder's complexity, 0-10 ([`crate::audio::DEFAULT_COMPLEXITY`]: 5).
    pub opus_complexity: u8,
}

impl CallConfig {
    /// The audio a call's session asks the runtime for (`session_start.audio`): PCM16 at
    /// [`CallConfig::input_rate`] in and [`CallConfig::output_rate`] out, as binary frames.
    /// The client's `session_start` names none (its audio is the Opus track): the edge sets
    /// this one when it opens the session, so the runtime speaks what the call transcodes.
    pub fn audio_settings(&self) -> AudioSettings {
        let pcm = |rate| Some(AudioFormat { encoding: "pcm16".to_owned(), sample_rate: Some(rate) });
        AudioSettings { input: pcm(self.input_rate), output: pcm(self.output_rate), binary_output: true }
    }
}

/// A self-signed DTLS certificate for [`CallConfig::dtls_cert`]; `None` if the crypto
/// backend cannot make one.
pub fn generate_dtls_cert() -> Option<DtlsCert> {
    str0m::crypto::from_feature_flags().dtls_provider.generate_certificate()
}

impl Default for CallConfig {
    fn default() -> Self {
        Self {
            udp: Vec::new(),
            tcp: Vec::new(),
            input_rate: 16_000,
            output_rate: 24_000,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            rules: OfferRules::default(),
            reorder_packets: 3,
            reorder_wait: Duration::from_millis(60),
            disconnect_grace: Duration::from_secs(15),
            dtls_cert: None,
            opus_complexity: crate::audio::DEFAULT_COMPLEXITY,
        }
    }
}

/// Why a call could not be set up, or a change to it refused.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The offer (HTTP 400).
    #[error(transparent)]
    Offer(#[from] OfferError),
    /// A fragment (HTTP 400).
    #[error(transparent)]
    Fragment(#[from] crate::trickle::FragmentError),
    /// The codec (HTTP 500).
    #[error(transparent)]
    Audio(#[from] AudioError),
    /// A local address that makes no candidate (the gateway's configuration).
    #[error("the address {address} makes no ICE candidate: {source}")]
    Candidate {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: str0m::error::IceError,
    },
    /// The answer has no Opus audio to send on (str0m did not take the offer's audio).
    #[error("the answer has no Opus audio track")]
    NoAudioTrack,
    /// The data channel is not open yet.
    #[error("the data channel is not open")]
    ChannelNotOpen,
    /// The data channel's send buffer is full: the client does not read.
    #[error("the data channel's send buffer is full")]
    ChannelFull,
    /// str0m refused an operation.
    #[error("WebRTC: {0}")]
    Rtc(#[source] str0m::RtcError),
    /// WHIP's `If-Match` names an ICE session that is not the call's current one (HTTP 412).
    #[error(
        "If-Match {found} is not this call's ICE session (it was restarted since): PATCH under the ETag of the latest answer, or If-Match: * to restart ICE"
    )]
    StaleIceSession {
        /// The `If-Match` value (shortened).
        found: String,
    },
}

/// A datagram to send, or one received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// UDP, or TCP (RFC 4571 framing is the socket task's).
    pub proto: Protocol,
    /// Sent from.
    pub source: SocketAddr,
    /// Sent to.
    pub destination: SocketAddr,
    /// The bytes.
    pub contents: Vec<u8>,
}

/// Why a call ended.
#[derive(Debug)]
pub enum CloseReason {
    /// [`Call::close`].
    Local,
    /// The client closed it (DTLS close, or the data channel closed).
    Remote,
    /// ICE stayed disconnected past the grace period.
    IceFailed,
    /// A data-channel message over the limit.
    TooLarge(ChannelError),
    /// DTLS, SRTP or SCTP failed (a failed handshake among them).
    Failed(str0m::RtcError),
}

/// What a call reports.
#[derive(Debug)]
pub enum CallEvent {
    /// ICE and DTLS are up.
    Connected,
    /// Media goes a new way: the first path ICE nominated, or another after an ICE restart
    /// or a network change ([`Call::path`]).
    Path(Path),
    /// The data channel is open: the client may send `session_start`.
    ChannelOpen,
    /// A message from the client (checked JSON text within the limit).
    Text(String),
    /// A message from the client was refused; the call told the client (a `bidi_error`).
    Refused(ChannelError),
    /// The caller's PCM16 at the runtime's input rate, at most [`MOST_AUDIO_MS`] of it (a
    /// gap filled comes in several).
    Audio(Vec<i16>),
    /// ICE lost the client (no consent); it may come back, or restart ICE.
    Disconnected,
    /// ICE found the client again after [`CallEvent::Disconnected`].
    Reconnected,
    /// The call is over; nothing more comes.
    Closed(CloseReason),
}

/// One call. See the module docs for the order of calls.
#[derive(Debug)]
pub struct Call {
    rtc: Rtc,
    config: CallConfig,
    audio_mid: Mid,
    opus_pt: Pt,
    channel: Option<ChannelId>,
    inbound: Inbound,
    outbound: Outbound,
    /// The offer (as last restarted) and its ICE ufrag and password.
    offer_text: String,
    remote_ufrag: String,
    remote_pwd: String,
    /// The edge's ICE ufrag, new with each ICE restart: what names the ICE session.
    local_ufrag: String,
    transmits: VecDeque<Datagram>,
    events: VecDeque<CallEvent>,
    rtc_timeout: Option<Instant>,
    /// Since when ICE is disconnected.
    disconnected_since: Option<Instant>,
    /// The client's candidates and the way media goes.
    paths: path::Paths,
    connected: bool,
    closed: bool,
}

impl Call {
    /// Answers `offer`: a call and the SDP answer (`201 Created`, `application/sdp`).
    pub fn accept(offer: Offer, config: CallConfig, now: Instant) -> Result<(Self, String), CallError> {
        let audio_mid = offer
            .sdp
            .media_lines
            .iter()
            .find(|m| m.typ.to_string() == "audio" && !m.disabled && m.direction() != Direction::Inactive)
            .map(|m| m.mid())
            .ok_or(OfferError::NoAudio)?;
        let dtx = offer.sdp.media_lines.iter().flat_map(|m| m.rtp_params()).any(|p| {
            let spec = p.spec();
            spec.codec == Codec::Opus && spec.format.use_dtx == Some(true)
        });
        let mut builder = Rtc::builder();
        if let Some(cert) = &config.dtls_cert {
            builder = builder.set_dtls_cert(cert.clone());
        }
        let mut rtc = builder
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            .set_reordering_size_audio(config.reorder_packets)
            .set_reordering_timeout_audio(Some(config.reorder_wait))
            .set_sctp_max_message_size(u32::try_from(config.max_message_bytes).unwrap_or(u32::MAX))
            .build(now);
        for &address in &config.udp {
            let candidate =
                Candidate::host(address, "udp").map_err(|source| CallError::Candidate { address, source })?;
            rtc.add_local_candidate(candidate);
        }
        for &address in &config.tcp {
            let candidate = Candidate::builder()
                .tcp()
                .host(address)
                .tcptype(str0m::net::TcpType::Passive)
                .build()
                .map_err(|source| CallError::Candidate { address, source })?;
            rtc.add_local_candidate(candidate);
        }
        let remote_ufrag = ufrag_of(&offer.text);
        let remote_pwd = pwd_of(&offer.text);
        let mut paths = path::Paths::default();
        paths.learn_sdp(&offer.text);
        let answer = rtc.sdp_api().accept_offer(offer.sdp).map_err(OfferError::Refused)?.to_sdp_string();
        let opus_pt = rtc
            .writer(audio_mid)
            .and_then(|w| w.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()))
            .ok_or(CallError::NoAudioTrack)?;
        let call = Self {
            inbound: Inbound::new(config.input_rate)?,
            outbound: Outbound::with_complexity(config.output_rate, dtx, config.opus_complexity)?,
            rtc,
            config,
            audio_mid,
            opus_pt,
            channel: None,
            offer_text: offer.text,
            remote_ufrag,
            remote_pwd,
            local_ufrag: ufrag_of(&answer),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            rtc_timeout: None,
            disconnected_since: None,
            paths,
            connected: false,
            closed: false,
        };
        Ok((call, answer))
    }

    /// Whether `datagram` belongs to this call (a STUN request for its ICE credentials, or
    /// DTLS/SRTP from its client's address): how a socket task on one port finds the call.
    pub fn accepts(
        &self,
        now: Instant,
        proto: Protocol,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> bool {
        let Ok(contents) = contents.try_into() else { return false };
        self.rtc.accepts(&Input::Receive(now, Receive { proto, source, destination, contents }))
    }

    /// A datagram from the network. One that is no WebRTC packet is ignored.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        proto: Protocol,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) {
        if self.closed {
            return;
        }
        let Ok(contents) = contents.try_into() else { return };
        let input = Input::Receive(now, Receive { proto, source, destination, contents });
        if let Err(error) = self.rtc.handle_input(input) {
            tracing::debug!(%error, "a datagram was refused");
        }
        self.drive(now);
    }

    /// Time passed: due reply audio goes out, str0m's timers run.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
            tracing::debug!(%error, "a timeout was refused");
        }
        self.write_audio(now);
        self.drive(now);
    }

    /// The agent's PCM16 at the runtime's output rate, to be sent in real time: a first frame
    /// at once when none is under way, the rest as time passes.
    pub fn send_audio(&mut self, now: Instant, pcm: &[i16]) {
        if self.closed {
            return;
        }
        self.outbound.push(pcm);
        self.write_audio(now);
        self.drive(now);
    }

    /// Barge-in: drops all queued reply audio at once.
    pub fn flush_audio(&mut self) {
        self.outbound.flush();
    }

    /// 48 kHz samples of reply audio queued.
    pub fn queued_audio(&self) -> usize {
        self.outbound.queued()
    }

    /// What happened to the caller's audio so far.
    pub fn inbound_stats(&self) -> InboundStats {
        self.inbound.stats()
    }

    /// Time spent resampling and encoding the reply so far.
    pub fn outbound_transcoding(&self) -> std::time::Duration {
        self.outbound.transcoding()
    }

    /// A session-protocol message (JSON text) for the client, on the data channel.
    pub fn send_text(&mut self, now: Instant, text: &str) -> Result<(), CallError> {
        let id = self.channel.ok_or(CallError::ChannelNotOpen)?;
        let mut channel = self.rtc.channel(id).ok_or(CallError::ChannelNotOpen)?;
        let written = channel.write(false, text.as_bytes()).map_err(CallError::Rtc)?;
        self.drive(now);
        if written { Ok(()) } else { Err(CallError::ChannelFull) }
    }

    /// Ends the call (`DELETE`, or the session ended), telling the client: its data channel
    /// is closed (an SCTP stream reset: the browser's `close` event), then the association
    /// (SCTP shutdown, RTCP BYE) and DTLS (`close_notify`); the datagrams that say so are
    /// the last [`Call::poll_transmit`] gives.
    pub fn close(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.drive(now);
        if let Some(id) = self.channel {
            self.rtc.direct_api().close_data_channel(id);
        }
        if let Err(error) = self.rtc.close() {
            tracing::debug!(%error, "the call's close was refused");
        }
        self.drain_transmits();
        self.finish(CloseReason::Local);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Datagram> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CallEvent> {
        self.events.pop_front()
    }

    /// When to call [`Call::handle_timeout`] next; `None` once closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let grace = self.disconnected_since.map(|since| since + self.config.disconnect_grace);
        [self.rtc_timeout, self.outbound.timeout(), grace].into_iter().flatten().min()
    }

    /// The way media goes, once ICE nominated one.
    pub fn path(&self) -> Option<Path> {
        self.paths.current()
    }

    /// Whether the call is over.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Due frames of reply audio to str0m, and out: str0m sends what was written only once
    /// time has passed for it (its pacer takes a new snapshot of its queues on a timeout),
    /// so each frame written is followed by one at once, not by the wake-up of the call's
    /// task for the timeout str0m asks for (a millisecond later with tokio's timers: a
    /// wake-up and a millisecond per frame).
    fn write_audio(&mut self, now: Instant) {
        let mut written = false;
        loop {
            let frame = match self.outbound.poll(now) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "reply audio could not be encoded");
                    break;
                }
            };
            if !self.connected {
                continue;
            }
            let rtp_time = MediaTime::new(frame.rtp_time, Frequency::FORTY_EIGHT_KHZ);
            let Some(writer) = self.rtc.writer(self.audio_mid) else { break };
            written = true;
            let bytes = frame.packet.len();
            if let Err(error) = writer.write(self.opus_pt, frame.due, rtp_time, frame.packet) {
                tracing::debug!(%error, "reply audio was not sent");
            }
            tracing::trace!(
                target: LATENCY_TARGET,
                rtp_time = frame.rtp_time,
                bytes,
                late_us = now.saturating_duration_since(frame.due).as_micros() as u64,
                queued = self.outbound.queued(),
                "reply frame to str0m"
            );
        }
        if written && let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
            tracing::debug!(%error, "a timeout was refused");
        }
    }

    fn finish(&mut self, reason: CloseReason) {
        if !self.closed {
            self.closed = true;
            // Stops str0m too (a no-op where it already stopped): nothing more is sent.
            self.rtc.disconnect();
            self.outbound.flush();
            self.events.push_back(CallEvent::Closed(reason));
        }
    }
}
