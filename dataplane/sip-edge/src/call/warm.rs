//! A warm transfer's media on the caller's task: the sans-I/O rules are
//! [`switchboard_sip::call::bridge::Transfer`]'s; this module carries out its media steps.
//!
//! - [`Step::Hold`]: the caller hears the hold chime ([`switchboard_sip::media::hold`])
//!   wherever the agent says nothing, while the person's phone rings.
//! - [`Step::Brief`]: the person answered. Their leg takes the caller's place on the
//!   agent's session: the agent's audio goes to the person (through a [`Relay`] of its
//!   own, in the person's codec), the person's RTP to the session as the caller's did; the
//!   caller hears only the chime and is not heard. The brief may last [`BRIEF_LIMIT`]; past
//!   it the edge ends the session itself.
//! - [`Step::Unhold`]: the transfer did not happen (or the person hung up during the
//!   brief): the chime stops and the caller is with the agent again.
//! - The session ending during the brief bridges the legs as a cold dial does
//!   ([`Call::bridged`](super::Call::bridged)), once the agent's last words reached the person
//!   ([`Warm::drain`], at most [`DRAIN_LIMIT`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_sip::call::CallEvent;
use switchboard_sip::call::bridge::Step;
use switchboard_sip::media::FRAME_MS;
use switchboard_sip::media::format::Format;
use switchboard_sip::sdp::Negotiated;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::{MediaSettings, Relay};
use crate::ports::PortPair;
use crate::transfer::Transfers;

/// The longest brief: past it the edge ends the agent's session and puts the caller through.
pub const BRIEF_LIMIT: Duration = Duration::from_secs(120);
/// The longest the agent's last words to the person are played out before the bridge.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(12);

/// The person on the agent's session during a brief.
struct Person {
    relay: Relay,
    ports: Arc<PortPair>,
    until: Instant,
}

/// A call's warm-transfer media (none while no warm transfer is under way).
#[derive(Default)]
pub(crate) struct Warm {
    person: Option<Person>,
}

impl Warm {
    /// Carries out the media `steps` (see the module docs); returns the person's media
    /// when the legs are to be bridged.
    pub(crate) fn apply(
        &mut self,
        steps: Vec<Step>,
        caller: &mut Relay,
        transfers: &Transfers,
        settings: &Arc<MediaSettings>,
        session_format: Format,
    ) -> Option<Negotiated> {
        let mut bridge = None;
        for step in steps {
            match step {
                Step::Hold => caller.hold(true),
                Step::Brief(media) => {
                    let Some((ports, peer)) = transfers.leg_media() else { continue };
                    let mut relay = Relay::new(Arc::clone(settings), session_format, peer.ip());
                    relay.media(media);
                    self.person = Some(Person { relay, ports, until: Instant::now() + BRIEF_LIMIT });
                }
                Step::Unhold => {
                    caller.hold(false);
                    self.person = None;
                }
                Step::Bridge(media) => bridge = Some(media),
                Step::Refer | Step::Dial | Step::Report(_) | Step::HangUp(_) => {}
            }
        }
        bridge
    }

    /// Whether the person is on the session (the caller neither heard nor hearing the agent).
    pub(crate) fn briefing(&self) -> bool {
        self.person.is_some()
    }

    /// Whether the brief went on past [`BRIEF_LIMIT`].
    pub(crate) fn too_long(&self) -> bool {
        self.person.as_ref().is_some_and(|p| Instant::now() >= p.until)
    }

    /// The agent's audio: to the person during the brief, else to the caller.
    pub(crate) fn agent_audio(&mut self, caller: &mut Relay, audio: &[u8]) {
        match &mut self.person {
            Some(person) => person.relay.agent_audio(audio),
            None => caller.agent_audio(audio),
        }
    }

    /// The agent was interrupted: whoever hears it stops hearing it.
    pub(crate) fn interrupted(&mut self, caller: &mut Relay) {
        match &mut self.person {
            Some(person) => person.relay.interrupted(),
            None => caller.interrupted(),
        }
    }

    /// What happened on the person's leg that changes its media.
    pub(crate) fn person_event(&mut self, event: &CallEvent) {
        if let (Some(person), CallEvent::MediaChanged(media)) = (&mut self.person, event) {
            person.relay.media(media.clone());
        }
    }

    /// A datagram on the person's RTP (`rtcp` false) or RTCP port: the person's audio goes
    /// to the session as it comes.
    pub(crate) fn receive(
        &mut self,
        from: SocketAddr,
        datagram: &[u8],
        rtcp: bool,
        to_gateway: &mpsc::Sender<Message>,
    ) {
        if let Some(person) = &mut self.person {
            for frame in person.relay.rtp(from, datagram, rtcp) {
                person.relay.frame_to_gateway(frame, to_gateway);
            }
        }
    }

    /// The next datagram on the person's RTP port, or RTCP with `rtcp`; pending with no
    /// person on the session.
    pub(crate) async fn recv(&self, buf: &mut [u8], rtcp: bool) -> std::io::Result<(usize, SocketAddr)> {
        match &self.person {
            Some(person) if rtcp => person.ports.rtcp.recv_from(buf).await,
            Some(person) => person.ports.rtp.recv_from(buf).await,
            None => std::future::pending().await,
        }
    }

    /// Every 20 ms of a brief: the person's frame to the session, the agent's to the person.
    pub(crate) async fn tick(&mut self, to_gateway: &mpsc::Sender<Message>) {
        let Some(person) = &mut self.person else { return };
        let (play, send) = person.relay.tick();
        for frame in play {
            person.relay.frame_to_gateway(frame, to_gateway);
        }
        if let Some((to, packet)) = send {
            let _ = person.ports.rtp.send_to(&packet, to).await;
        }
    }

    /// The session is over: plays what the agent still had for the person (at most
    /// [`DRAIN_LIMIT`]), keeping the caller's chime going meanwhile, then lets the brief go.
    pub(crate) async fn drain(&mut self, caller: &mut Relay, caller_rtp: &tokio::net::UdpSocket) {
        let Some(mut person) = self.person.take() else { return };
        let until = Instant::now() + DRAIN_LIMIT;
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        while person.relay.queued() > 0 && Instant::now() < until {
            tick.tick().await;
            if let (_, Some((to, packet))) = person.relay.tick() {
                let _ = person.ports.rtp.send_to(&packet, to).await;
            }
            if let (_, Some((to, packet))) = caller.tick() {
                let _ = caller_rtp.send_to(&packet, to).await;
            }
        }
        caller.hold(false);
    }
}
