//! One call's task: asks the gateway for a session with the agent the call is for (the
//! Request-URI's user part names it), gives the answer to the SIP task, then relays media
//! until either side ends: the caller's RTP through the jitter buffer to the gateway as
//! binary frames, each as it comes (in order, a gap waiting at most [`REORDER_WINDOW`]);
//! the agent's reply audio from binary frames back as RTP as it comes, never ahead of real
//! time by more than a little (`media::pacer`), its queue dropped at once on `bidi_interruption`; RTCP reports
//! every 5 s; each key pressed (RFC 4733 or SIP INFO) as one `bidi_dtmf`; the keys the
//! agent presses (`digits_request`) as RFC 4733 telephone events to the phone, answered
//! with a `digits_result` ([`crate::digits`]). The caller's
//! BYE closes the session; the session ending sends BYE (once the agent's last words queued for
//! the phone are played out: [`play_out`]); RTP that stops for longer than
//! the media timeout ends the call. A connection to the gateway that drops mid-call (lost,
//! or its replica going away) is not the session ending: the session is resumed
//! ([`gateway::resume`]) and the call goes on. While the gateway holds the session in its capacity
//! queue, the phone gets `182 Queued` with the hold message (again at each new place, and
//! every half minute: [`switchboard_sip::call::Timers::provisional`]); the call is answered
//! when its turn comes, or refused 503 with `Retry-After` when the gateway refuses it for
//! capacity; a caller who hangs up (CANCEL) leaves the queue.
//!
//! The call's parts: [`route`] (which agent the call is for, what the edge vouches for about
//! it) and [`media`] (the media state apart from the sockets); this module owns the task
//! that moves bytes between the sockets, the gateway and the SIP task. A call to an Agent
//! in outage mode whose fallback is a person is answered and put through to that person
//! ([`fallback`]). The edge's own recordings ([`announced`]): the hold announcement as early
//! media while the call waits in the queue (the Agent's own, which the gateway names), the
//! outage announcement to a call outage mode turns away (before its person, or with none)
//! or interrupts. A warm transfer's hold chime and brief are [`warm`]'s.

mod announced;
mod bridge;
mod fallback;
mod media;
mod play_out;
mod resuming;
mod route;
pub(crate) mod warm;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use switchboard_core::protocol::ServerMessage;
use switchboard_sip::call::{Admission, CallEvent, EndReason, Incoming};
use switchboard_sip::media::format::Format;
use switchboard_sip::media::g711::Law;
use switchboard_sip::media::jitter::JitterConfig;
use switchboard_sip::media::session::MediaConfig;
use switchboard_sip::media::{FRAME_MS, rtcp};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::announce::Purpose;
use crate::gateway::{self, GatewayConfig, Queued, Refused, Session};
use crate::ports::PortPair;
use announced::{Hold, Interrupt};
pub(crate) use media::Relay;

use resuming::{Resuming, counted, next_frame, resumed};
use route::{agent_of, phone_call};

pub(crate) use crate::command::Command;
use crate::end::End;

/// How long the caller's audio after a gap waits for the missing packet before it is
/// concealed and the audio goes on to the agent (a packet reordered on the way comes within
/// a frame or two).
pub const REORDER_WINDOW: Duration = Duration::from_millis(40);

/// How calls' media behave.
#[derive(Clone, Debug)]
pub struct MediaSettings {
    /// The jitter buffer and the reply audio queue. The jitter buffer forwards the caller's
    /// audio to the agent as it comes, waiting at most [`REORDER_WINDOW`] on a gap.
    pub media: MediaConfig,
    /// RTP silent this long (while the phone should send) ends the call.
    pub timeout: Duration,
    /// Frames to the gateway queued at most; past it a frame is dropped (a slow gateway
    /// must not grow memory).
    pub gateway_queue: usize,
    /// The recordings the edge plays to callers itself (hold, outage; none by default).
    pub announcements: crate::announce::Announcements,
}

impl Default for MediaSettings {
    fn default() -> Self {
        Self {
            media: MediaConfig { jitter: JitterConfig::forwarding(REORDER_WINDOW), ..MediaConfig::default() },
            timeout: Duration::from_secs(30),
            gateway_queue: 64,
            announcements: crate::announce::Announcements::default(),
        }
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
    /// The edge's metrics.
    pub metrics: crate::metrics::Metrics,
    /// How transfers to a person are made.
    pub dialling: Arc<crate::dialling::Dialling>,
    /// Which way the call went (the record's `hung_up_by` names its phone so).
    pub direction: crate::metrics::Direction,
}

impl Call {
    /// Runs the call to its end.
    pub(crate) async fn run(mut self) {
        let agent = match agent_of(&self.incoming) {
            Ok(agent) => agent,
            Err(reason) => {
                tracing::info!(call = %self.call_id, outcome = "not_found", "call refused: {reason}");
                self.metrics.refused_not_found();
                return self.admit(Admission::NotFound(reason)).await;
            }
        };
        // The session's format: the phone's codec's when its offer settled one, else μ-law (a
        // delayed offer: the answer may settle any codec, and G.711 converts to all).
        let session_format = self.incoming.media.as_ref().map_or(Format::G711(Law::Ulaw), |m| Format::of(m.codec));
        let gateway = Arc::clone(&self.gateway);
        let shutdown = self.shutdown.clone();
        let phone = phone_call(&self.incoming);
        // The gateway's capacity queue: each new place becomes a 182 Queued to the phone.
        let (queued_tx, mut queued_rx) = tokio::sync::watch::channel(None::<Queued>);
        let mut on_queued = move |queued: Queued| {
            queued_tx.send_replace(Some(queued));
        };
        let open = gateway::open(&gateway, &agent, session_format, &phone, &mut on_queued);
        tokio::pin!(open);
        // The hold announcement, as early media, once the call is queued (if there is one).
        let mut hold: Option<Hold> = None;
        let opened = loop {
            tokio::select! {
                opened = &mut open => break opened,
                Ok(()) = queued_rx.changed() => {
                    let queued = queued_rx.borrow_and_update().clone();
                    if let Some(queued) = queued {
                        tracing::info!(
                            call = %self.call_id, agent, waiting_for = queued.agent, position = queued.position,
                            estimated_wait_seconds = queued.estimated_wait_seconds,
                            "call queued: the agent's model quota is full"
                        );
                        let waiting_for = queued.agent_or(&agent);
                        if hold.is_none() && let Some(started) = Hold::new(&self.settings, &self.incoming, session_format, waiting_for) {
                            tracing::info!(call = %self.call_id, file = started.file(), "playing the hold announcement");
                            self.metrics.announcement(crate::announce::Purpose::Hold);
                            hold = Some(started);
                        }
                        let (call_id, reason) = (self.call_id.clone(), queued.phrase());
                        let command = if hold.is_some() { Command::EarlyMedia { call_id, reason } } else { Command::Queued { call_id, reason } };
                        let _ = self.commands.send(command).await;
                    }
                }
                () = Hold::play(&mut hold, &self.ports) => {}
                () = wait_for_end(&mut self.events) => {
                    tracing::info!(call = %self.call_id, agent, "the caller gave up before the call was answered");
                    return self.metrics.cancelled();
                }
                () = shutdown.cancelled() => {
                    self.metrics.refused_shutdown();
                    return self.admit(Admission::Refuse(503, "The edge is shutting down".into())).await;
                }
            }
        };
        let session = match opened {
            Ok(session) => session,
            Err(refused) => {
                if let Refused::Outage(fallback) = &refused
                    && let Some(person) = &fallback.person
                {
                    return self.divert(&agent, fallback, person).await;
                }
                if let Refused::Outage(fallback) = &refused
                    && let Some(recording) = self.settings.announcements.for_agent(Purpose::Outage, &fallback.agent)
                {
                    return self.announce_outage(&agent, fallback, recording).await;
                }
                tracing::info!(call = %self.call_id, agent, outcome = refused.label(), "call refused: {refused}");
                self.metrics.refused_by_gateway(&refused);
                return self.admit(refused.admission()).await;
            }
        };
        tracing::info!(call = %self.call_id, agent, session = %session.id, "call answered");
        self.admit(Admission::Accept).await;
        let id = session.id.clone();
        let live = self.metrics.answered(crate::metrics::Direction::Inbound);
        let end = match hold {
            Some(hold) => self.relay_from(session, hold.into_relay(), None).await,
            None => self.relay(session, session_format).await,
        };
        live.ended(&end);
        tracing::info!(call = %self.call_id, agent, session = %id, end = end.describe(), "call ended");
    }

    async fn admit(&self, admission: Admission) {
        let _ = self.commands.send(Command::Admit { call_id: self.call_id.clone(), admission }).await;
    }

    /// Relays media between the call and its open session until either ends (an outbound
    /// call's task too, once answered: [`crate::outbound`]).
    pub(crate) async fn relay(&mut self, session: Session, session_format: Format) -> End {
        let relay = Relay::new(self.settings.clone(), session_format, self.incoming.source.ip());
        self.relay_from(session, relay, None).await
    }

    /// [`Call::relay`] with the call's media already under way in `relay` (an outbound
    /// call listened to for answering-machine detection first); `heard` is told when the
    /// agent's first audio comes, the moment the phone starts hearing it.
    pub(crate) async fn relay_from(
        &mut self,
        session: Session,
        mut relay: Relay,
        mut heard: Option<tokio::sync::oneshot::Sender<std::time::Instant>>,
    ) -> End {
        let Session { socket, mut position, .. } = session;
        let (sink, mut stream) = socket.split();
        let (mut to_gateway, outgoing) = mpsc::channel::<Message>(self.settings.gateway_queue);
        let mut writer = tokio::spawn(gateway::write(sink, outgoing));
        // A connection to the gateway that drops mid-call is resumed (`gateway::resume`):
        // while it is, the caller's audio is not heard; what the gateway replays before the
        // resumed start waits in `replayed`, read before the new socket.
        let mut resuming: Option<Resuming> = None;
        let mut replayed: VecDeque<Message> = VecDeque::new();
        let mut lost = String::new();
        // The caller's audio goes to the gateway as it comes; the tick moves on a gap whose
        // reorder window has passed, and drives the rest (announcements, a brief, timeouts).
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        // The packets to the phone go when the relay's media clock says (the agent's audio
        // as it comes, silence on the clock): this timer is set to its next one.
        let send = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(send);
        // The caller's audio goes to the agent as it comes (answering-machine detection may
        // have paced it).
        relay.pace(false);
        let mut report = tokio::time::interval(Duration::from_secs(5));
        let cname =
            format!("switchboard-sip@{}", self.ports.rtp.local_addr().map(|a| a.ip().to_string()).unwrap_or_default());
        let mut transfer = crate::transfer::Transfers::new(self.metrics.clone());
        let mut warm = warm::Warm::default();
        let mut rtp = crate::metrics::RtpReadings::default();
        let mut outage = Interrupt::default();
        let mut rtp_buf = vec![0u8; 2048];
        let mut rtcp_buf = vec![0u8; rtcp::MAX_PACKET];
        let (mut person_rtp, mut person_rtcp) = (vec![0u8; 2048], vec![0u8; rtcp::MAX_PACKET]);
        let session_format = relay.session_format();
        // The media steps of a transfer: a warm one's hold and brief now, the bridge at the end.
        let mut bridge_media = None;
        macro_rules! perform {
            ($steps:expr) => {{
                let steps = self.perform(&mut transfer, $steps, &to_gateway).await;
                let settings = Arc::clone(&self.settings);
                if let Some(media) = warm.apply(steps, &mut relay, &transfer, &settings, session_format) {
                    bridge_media = Some(media);
                }
            }};
        }
        let end = loop {
            if let Some(at) = relay.next_send().map(tokio::time::Instant::from_std)
                && send.deadline() != at
            {
                send.as_mut().reset(at);
            }
            tokio::select! {
                () = &mut send, if relay.is_settled() => {
                    for (to, packet) in relay.send_due(std::time::Instant::now()) {
                        let _ = self.ports.rtp.send_to(&packet, to).await;
                    }
                    if let Some((result, outcome)) = relay.keys_done() {
                        tracing::info!(call = %self.call_id, outcome = outcome.as_str(), "keys pressed");
                        let _ = to_gateway.send(result).await;
                    }
                }
                event = self.events.recv() => match event {
                    Some(CallEvent::Established(media)) | Some(CallEvent::MediaChanged(media)) => relay.media(media),
                    Some(CallEvent::Digit(event)) => {
                        relay.pressed(event);
                        relay.forward_keys(&to_gateway);
                    }
                    Some(CallEvent::Transfer(progress)) => {
                        let steps = transfer.progress(&self.call_id, progress);
                        perform!(steps);
                    }
                    Some(CallEvent::Ended(reason)) => break End::Caller(reason),
                    None => break End::Caller(EndReason::LocalHangUp),
                    Some(_) => {}
                },
                resumed = resumed(&mut resuming) => {
                    resuming = None;
                    match resumed {
                        Ok(gateway::Resumed { session, early }) => {
                            tracing::info!(call = %self.call_id, session = %session.id, replayed = early.len(), "the call's session is resumed");
                            self.metrics.gateway_resume("resumed");
                            position = session.position;
                            let (sink, resumed_stream) = session.socket.split();
                            stream = resumed_stream;
                            let (sender, outgoing) = mpsc::channel::<Message>(self.settings.gateway_queue);
                            (to_gateway, writer) = (sender, tokio::spawn(gateway::write(sink, outgoing)));
                            replayed.extend(early);
                        }
                        Err(why) => {
                            tracing::warn!(call = %self.call_id, why, "the call's session could not be resumed");
                            self.metrics.gateway_resume("failed");
                            break End::Session(format!("{lost}; not resumed: {why}"));
                        }
                    }
                }
                frame = next_frame(&mut replayed, &mut stream), if resuming.is_none() => match frame {
                    Some(Ok(Message::Binary(_))) if !outage.agent_audio() => position.binary(),
                    Some(Ok(Message::Binary(audio))) => {
                        position.binary();
                        // Sent by the `send` timer, at once when the media clock allows.
                        warm.agent_audio(&mut relay, &audio);
                        if let Some(heard) = heard.take_if(|_| !audio.is_empty()) {
                            let _ = heard.send(std::time::Instant::now());
                        }
                    }
                    Some(Ok(Message::Text(text))) => match counted(&mut position, serde_json::from_str::<ServerMessage>(text.as_str())) {
                        Ok(ServerMessage::BidiInterruption {}) if !outage.announcing() => warm.interrupted(&mut relay),
                        Ok(ServerMessage::BidiSessionOutage { agent, active: true, person, .. }) => {
                            outage.told(&self.settings.announcements, &self.call_id, &agent, person);
                        }
                        Ok(ServerMessage::TransferRequest { tool_use_id, person, address, timeout_seconds, warm: is_warm, .. }) => {
                            let method = self.dialling.method;
                            match transfer.start(&self.call_id, tool_use_id, person, address, method, is_warm, timeout_seconds) {
                                Ok(steps) => perform!(steps),
                                Err(result) => { let _ = to_gateway.send(Message::text(result)).await; }
                            }
                        }
                        Ok(ServerMessage::DigitsRequest { tool_use_id, digits }) => match relay.press(&tool_use_id, &digits) {
                            Ok(ms) => tracing::info!(call = %self.call_id, characters = digits.len(), ms, "pressing keys"),
                            Err(result) => {
                                tracing::info!(call = %self.call_id, "keys not pressed: {}", result.to_text().unwrap_or_default());
                                let _ = to_gateway.send(result).await;
                            }
                        },
                        Ok(ServerMessage::BidiConnectionClose { reason }) => tracing::debug!(call = %self.call_id, reason, "the session is closing"),
                        Ok(ServerMessage::BidiError { code, message, recoverable: false, .. }) => {
                            tracing::warn!(call = %self.call_id, %code, message, "the session failed");
                        }
                        _ => {}
                    },
                    Some(Ok(Message::Close(frame))) => {
                        let code = frame.as_ref().map(|f| u16::from(f.code));
                        let why = frame.map(|f| format!("{} {}", u16::from(f.code), f.reason)).unwrap_or_default();
                        match self.resume(&position, code, session_format) {
                            Some(started) => (resuming, lost) = (Some(started), why),
                            None => break End::Session(why),
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => match self.resume(&position, None, session_format) {
                        Some(started) => (resuming, lost) = (Some(started), error.to_string()),
                        None => break End::Session(error.to_string()),
                    },
                    None => match self.resume(&position, None, session_format) {
                        Some(started) => (resuming, lost) = (Some(started), "the gateway closed the connection".into()),
                        None => break End::Session("the gateway closed the connection".into()),
                    },
                },
                event = transfer.person_event() => {
                    warm.person_event(&event);
                    let steps = transfer.person(&event);
                    perform!(steps);
                }
                received = warm.recv(&mut person_rtp, false) => if let Ok((n, from)) = received {
                    warm.receive(from, &person_rtp[..n], false, &to_gateway);
                },
                received = warm.recv(&mut person_rtcp, true) => if let Ok((n, from)) = received {
                    warm.receive(from, &person_rtcp[..n], true, &to_gateway);
                },
                received = self.ports.rtp.recv_from(&mut rtp_buf) => {
                    if let Ok((n, from)) = received {
                        // The caller's audio goes to the agent as it comes, except during a
                        // brief (the caller is on hold) or an announcement.
                        for frame in relay.rtp(from, &rtp_buf[..n], false) {
                            if !outage.announcing() && !warm.briefing() {
                                relay.frame_to_gateway(frame, &to_gateway);
                            }
                        }
                    }
                    if !warm.briefing() {
                        relay.forward_keys(&to_gateway);
                    }
                }
                received = self.ports.rtcp.recv_from(&mut rtcp_buf) => {
                    if let Ok((n, from)) = received {
                        let _ = relay.rtp(from, &rtcp_buf[..n], true);
                    }
                }
                _ = tick.tick(), if relay.is_settled() => {
                    if let Some(end) = outage.tick(&mut relay, &self.call_id, &self.metrics) {
                        break end;
                    }
                    // During a brief the caller is on hold: the agent hears the person instead;
                    // during an announcement the caller is not heard.
                    let play = relay.ready(std::time::Instant::now());
                    for frame in play.into_iter().filter(|_| !outage.announcing() && !warm.briefing()) {
                        relay.frame_to_gateway(frame, &to_gateway);
                    }
                    warm.tick(&to_gateway).await;
                    if relay.timed_out() {
                        break End::MediaTimeout;
                    }
                    if warm.too_long() {
                        tracing::info!(call = %self.call_id, "the agent's brief went on too long: the edge puts the caller through");
                        let _ = to_gateway.send(Message::Close(None)).await;
                        break End::Session("the brief went on past its limit".to_owned());
                    }
                }
                _ = report.tick(), if relay.is_settled() => {
                    if let Some((to, packet)) = relay.report(&cname) {
                        let _ = self.ports.rtcp.send_to(&packet, to).await;
                    }
                    rtp.read(&self.metrics, relay.receiver_stats());
                    if let Some(counts) = relay.take_srtp_counts() {
                        self.metrics.srtp(&counts);
                    }
                }
                () = self.shutdown.cancelled() => break End::Shutdown,
            }
        };
        relay.log_counts(&self.call_id);
        rtp.read(&self.metrics, relay.receiver_stats());
        if let Some(counts) = relay.take_srtp_counts() {
            self.metrics.srtp(&counts);
        }
        // A transfer under way: the session's end bridges an answered person's leg; any
        // other end lets the person's leg go.
        let steps = if matches!(end, End::Session(_)) { transfer.session_ended() } else { transfer.caller_ended() };
        perform!(steps);
        if bridge_media.is_some() {
            // A warm transfer's brief is over: the agent's last words reach the person first.
            warm.drain(&mut relay, &self.ports.rtp).await;
        }
        let bridge = match (bridge_media, transfer.take_leg()) {
            (Some(media), Some(leg)) => match relay.take_session() {
                Some(caller) => Some((media, leg, caller)),
                None => {
                    let _ = self.commands.send(Command::HangUp { call_id: leg.call_id.clone() }).await;
                    None
                }
            },
            _ => None,
        };
        // Who hung up goes to the gateway with the session's end, for the record.
        let close = Message::text(switchboard_core::phone::close_text(end.recorded(self.direction)));
        match &end {
            End::Caller(_) | End::Outage(_) => {
                // The caller hung up (or goes to the outage fallback): the session ends as
                // a client ends it.
                let _ = to_gateway.send(close).await;
                let _ = to_gateway.send(Message::Close(None)).await;
            }
            End::Session(_) | End::MediaTimeout | End::Shutdown | End::Bridged(_) => {
                if bridge.is_none() {
                    if matches!(end, End::Session(_)) {
                        // The agent's last words reach the phone before its BYE.
                        self.play_out(&mut relay).await;
                    }
                    let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
                }
                if !matches!(end, End::Session(_)) {
                    let _ = to_gateway.send(close).await;
                    let _ = to_gateway.send(Message::Close(None)).await;
                }
            }
        }
        drop(to_gateway);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
        match bridge {
            Some((media, leg, caller)) => self.bridged(caller, leg, media).await,
            None => {
                if let End::Outage(person) = &end {
                    self.after_outage(person.as_ref()).await;
                }
                end
            }
        }
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
