//! What a call hears from the edge itself, the recordings of [`crate::announce`], sent as
//! RTP one 20 ms frame a tick through the call's [`Relay`]:
//!
//! - [`Hold`]: while the call's session waits in the capacity queue, the hold announcement
//!   as early media (`183 Session Progress` with the SDP answer, then RTP), repeated with
//!   [`GAP`] between plays; when the call's turn comes the same media carries the agent.
//! - [`Call::announce_outage`]: outage mode turned the call away and names no person: the
//!   call is answered, hears the outage announcement once, and is hung up. With a person,
//!   the answered call hears it once ([`Call::play_once`]) before it is put through
//!   ([`super::fallback`]).
//! - [`Interrupt`]: a call under way told that its Agent went into outage mode
//!   (`bidi_session_outage`): at the next turn boundary ([`Interjection`]) the agent's audio
//!   stops, the outage announcement plays, and the call goes to the Agent's fallback (its
//!   person, or the end of the call) as the relay's [`End::Outage`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::protocol::FallbackPerson;
use switchboard_sip::call::{Admission, CallEvent, Incoming};
use switchboard_sip::media::format::Format;
use switchboard_sip::media::{FRAME_MS, FRAME_SAMPLES};
use switchboard_sip::sdp::Negotiated;

use super::fallback::Diverted;
use super::{Call, Command, MediaSettings, Relay};
use crate::announce::{Announcements, GAP, Interjection, Player, Purpose, Recording};
use crate::end::End;
use crate::gateway::Fallback;
use crate::ports::PortPair;

/// Gives the relay the next frame of `player` when less than a frame waits to be sent;
/// `false` once the player is over.
fn feed(relay: &mut Relay, player: &mut Player) -> bool {
    if relay.queued_audio() >= FRAME_SAMPLES {
        return true;
    }
    let Some(format) = relay.phone_format() else { return true };
    match player.next_frame(format) {
        Some(frame) => {
            relay.queue_announcement(&frame);
            true
        }
        None => false,
    }
}

fn frame_clock() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    tick
}

/// The hold announcement played while the call waits in the capacity queue.
pub(super) struct Hold {
    relay: Relay,
    player: Player,
    tick: tokio::time::Interval,
}

impl Hold {
    /// The hold of a call waiting for `agent` (`namespace/name` as the gateway names it, or
    /// as dialled where an older gateway does not), when there is a hold announcement for it
    /// and the phone's offer settled the media (early media needs an SDP answer).
    pub(super) fn new(
        settings: &Arc<MediaSettings>,
        incoming: &Incoming,
        session_format: Format,
        agent: &str,
    ) -> Option<Self> {
        let media = incoming.media.clone()?;
        let recording = settings.announcements.for_agent(Purpose::Hold, agent)?;
        let mut relay = Relay::new(Arc::clone(settings), session_format, incoming.source.ip());
        relay.media(media);
        Some(Self { relay, player: Player::repeating(recording, GAP), tick: frame_clock() })
    }

    /// The recording's file name.
    pub(super) fn file(&self) -> &str {
        self.player.file()
    }

    /// Plays the announcement on the call's RTP port (and takes the phone's RTP, to learn
    /// where it really comes from) until dropped; pending forever without a hold.
    pub(super) async fn play(hold: &mut Option<Self>, ports: &PortPair) {
        let Some(hold) = hold else { return std::future::pending().await };
        let mut buf = vec![0u8; 2048];
        loop {
            tokio::select! {
                _ = hold.tick.tick() => {
                    feed(&mut hold.relay, &mut hold.player);
                    if let (_, Some((to, packet))) = hold.relay.tick() {
                        let _ = ports.rtp.send_to(&packet, to).await;
                    }
                }
                received = ports.rtp.recv_from(&mut buf) => {
                    if let Ok((n, from)) = received {
                        hold.relay.rtp(from, &buf[..n], false);
                    }
                }
            }
        }
    }

    /// The call's media, the announcement dropped: the agent's session takes it on.
    pub(super) fn into_relay(mut self) -> Relay {
        self.relay.interrupted();
        self.relay
    }
}

impl Call {
    /// Answers a call that outage mode turned away with no person, plays it `recording` and
    /// hangs up (see the module docs).
    pub(super) async fn announce_outage(&mut self, agent: &str, fallback: &Fallback, recording: Arc<Recording>) {
        tracing::info!(
            call = %self.call_id, agent, cause = fallback.cause, file = recording.file,
            "the agent is in outage mode: answering to play the outage announcement"
        );
        self.admit(Admission::Accept).await;
        self.metrics.announced_outage();
        let played = match self.acknowledged().await {
            Ok(media) => self.play_once(media, recording).await,
            Err(diverted) => Err(diverted),
        };
        let outcome = match &played {
            Ok(()) => "announced",
            Err(diverted) => diverted.outcome(),
        };
        tracing::info!(call = %self.call_id, agent, outcome, "outage fallback ended");
        self.metrics.fallback(outcome);
        if played != Err(Diverted::CallerLeft) {
            let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
        }
    }

    /// Plays `recording` once to its end on the answered call's `media` (counted as an
    /// outage announcement); `Err` when the caller hangs up first or the edge shuts down.
    pub(super) async fn play_once(&mut self, media: Negotiated, recording: Arc<Recording>) -> Result<(), Diverted> {
        let format = Format::of(media.codec);
        let mut relay = Relay::new(Arc::clone(&self.settings), format, self.incoming.source.ip());
        relay.media(media);
        tracing::info!(call = %self.call_id, file = recording.file, "playing the outage announcement");
        self.metrics.announcement(Purpose::Outage);
        let mut player = Player::once(recording);
        let mut tick = frame_clock();
        let mut buf = vec![0u8; 2048];
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let more = feed(&mut relay, &mut player);
                    if let (_, Some((to, packet))) = relay.tick() {
                        let _ = self.ports.rtp.send_to(&packet, to).await;
                    }
                    if !more && relay.queued_audio() == 0 {
                        return Ok(());
                    }
                }
                received = self.ports.rtp.recv_from(&mut buf) => {
                    if let Ok((n, from)) = received {
                        relay.rtp(from, &buf[..n], false);
                    }
                }
                event = self.events.recv() => match event {
                    Some(CallEvent::MediaChanged(media)) => relay.media(media),
                    Some(CallEvent::Ended(_)) | None => return Err(Diverted::CallerLeft),
                    Some(_) => {}
                },
                () = self.shutdown.cancelled() => return Err(Diverted::Shutdown),
            }
        }
    }

    /// After the outage announcement of a call under way: the Agent's fallback — put
    /// through to its person, or hung up.
    pub(super) async fn after_outage(&mut self, person: Option<&FallbackPerson>) {
        let outcome = match person {
            Some(person) => {
                tracing::info!(call = %self.call_id, person = person.name, "outage: putting the caller through to the fallback person");
                match self.refer(person).await {
                    Diverted::Transfer(outcome, _) => outcome,
                    Diverted::CallerLeft => return self.metrics.fallback("caller_left"),
                    _ => "shutdown",
                }
            }
            None => "announced",
        };
        tracing::info!(call = %self.call_id, outcome, "outage fallback ended");
        self.metrics.fallback(outcome);
        let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
    }
}

/// A call under way told that its Agent is in outage mode (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Interrupt(Option<Pending>);

#[derive(Debug)]
struct Pending {
    turn: Interjection,
    recording: Arc<Recording>,
    player: Option<Player>,
    person: Option<FallbackPerson>,
}

impl Interrupt {
    /// The gateway told the call that `agent` is in outage mode: with an outage
    /// announcement for it, it plays at the next turn boundary; without one the call goes
    /// on as before (the notice is only logged).
    pub(crate) fn told(
        &mut self,
        announcements: &Announcements,
        call_id: &str,
        agent: &str,
        person: Option<FallbackPerson>,
    ) {
        if self.0.is_some() {
            return;
        }
        let Some(recording) = announcements.for_agent(Purpose::Outage, agent) else {
            tracing::info!(call = %call_id, agent, "the agent went into outage mode; no outage announcement: the call goes on");
            return;
        };
        tracing::info!(call = %call_id, agent, file = recording.file, "the agent went into outage mode: announcing it at the next turn boundary");
        self.0 = Some(Pending { turn: Interjection::new(Instant::now()), recording, player: None, person });
    }

    /// Whether the announcement is playing (the agent's audio and interruptions are
    /// dropped, the caller's audio no longer goes to the agent).
    pub(crate) fn announcing(&self) -> bool {
        self.0.as_ref().is_some_and(|p| p.player.is_some())
    }

    /// The agent's audio came: whether to relay it.
    pub(crate) fn agent_audio(&mut self) -> bool {
        match &mut self.0 {
            Some(pending) if pending.player.is_some() => false,
            Some(pending) => {
                pending.turn.agent_audio(Instant::now());
                true
            }
            None => true,
        }
    }

    /// Each 20 ms, before the relay's tick: starts the announcement at a turn boundary and
    /// feeds it; once it has played, the relay ends for the fallback ([`End::Outage`]).
    pub(crate) fn tick(&mut self, relay: &mut Relay, call_id: &str, metrics: &crate::metrics::Metrics) -> Option<End> {
        let pending = self.0.as_mut()?;
        if pending.player.is_none() {
            if !pending.turn.may_start(Instant::now(), relay.queued_audio()) {
                return None;
            }
            tracing::info!(call = %call_id, file = pending.recording.file, "playing the outage announcement");
            metrics.announcement(Purpose::Outage);
            relay.interrupted();
            pending.player = Some(Player::once(Arc::clone(&pending.recording)));
        }
        let player = pending.player.as_mut()?;
        let more = feed(relay, player);
        (!more && relay.queued_audio() == 0).then(|| End::Outage(pending.person.take()))
    }
}
