//! Parking and resuming ([`crate::resume`] has the store and the replay buffer). A client
//! gone without a goodbye leaves its session settling: the runtime may finish the turn
//! under way or take up the typed inputs waiting (its messages are kept for replay, not
//! sent), within the park grace; then the session is parked for the resume window. A
//! runtime that ends the session meanwhile leaves nothing to park. A resumed session
//! first opens where it was — or performs the handoff its runtime made while the client
//! was away — then sends what the client missed.

use std::time::Instant;

use switchboard_core::protocol::{ErrorCode, ServerKind, ServerMessage, close_code};

use super::runtime::RuntimeSide;
use super::{Cx, Ending, Limits, Machine, Phase, Purpose, RuntimeFrame};
use crate::directory::Target;
use switchboard_core::handoff::HandoffContext;

use crate::resume::{Frame, Missed, Parked, Placement, Replay};
use crate::session::kept::Kept;

impl Machine {
    /// A session taken out of the store, resuming for a client that last received
    /// `last_seq`: it opens at once.
    pub fn resume(
        limits: Limits,
        identity: String,
        parked: Parked,
        target: Target,
        last_seq: Option<u64>,
        cx: &Cx<'_>,
    ) -> Self {
        let model = parked.model.clone();
        let Parked {
            session_id,
            voice,
            modalities,
            audio,
            handoff,
            kept,
            generation,
            replay,
            reach,
            variants,
            text_only,
            placed,
            ..
        } = parked;
        let mut machine = Self::blank(limits, session_id, identity, target, voice, modalities, cx.now);
        // A session placed on a fallback region opens that Agent's streams there again.
        if let Some((placed, cause)) = placed.and_then(|p| p.cause().map(|cause| (p, cause))) {
            machine.settings.place(placed.agent, placed.region, cause);
        }
        if let Some(cause) = text_only {
            machine.resume_text_only(&cause);
        }
        machine.settings.set_audio(audio);
        machine.settings.set_reach(reach);
        machine.settings.set_variants(variants);
        let missed = replay.since(last_seq);
        machine.kept = kept;
        machine.settings.set_model(model);
        machine.replay = replay;
        machine.runtime = RuntimeSide::new(cx.now, generation);
        if let Some(last) = last_seq.filter(|last| *last > machine.replay.seq) {
            // The client received more than the session holds: it was taken from a
            // snapshot (its gateway died). Numbers go on after what the client has.
            machine.client.restored_without(machine.replay.seq + 1, last);
            machine.replay.seq = last;
        }
        match handoff {
            Some((to, context)) => machine.hand_off(to, context, Some(missed), cx),
            None => machine.reopen_resumed(missed),
        }
        machine
    }

    /// Opens a resumed session on its own Agent (one attempt: the client may resume again).
    pub(super) fn reopen_resumed(&mut self, missed: Missed) {
        self.runtime.next_generation();
        self.open(Purpose::Resume { missed }, None, None);
    }

    /// The resumed session is open: what the client missed first, then the rest.
    pub(super) fn resumed(&mut self, missed: Missed) {
        self.note(super::Note::Resumed);
        for frame in missed.frames {
            self.push(super::Effect::Client(frame));
        }
        if let Some((first, last)) = self.client.take_restored() {
            let message = format!(
                "the gateway serving this session stopped; it resumed from its last turn boundary, so the agent \
                 may not know of messages {first} to {last}"
            );
            self.deliver(ServerMessage::error(ErrorCode::SessionRestored, message, true).into());
        }
        if let Some((first, last)) = missed.gap {
            let message = format!("messages {first} to {last} were sent while you were away and are no longer held");
            self.deliver(ServerMessage::error(ErrorCode::ReplayGap, message, true).into());
        }
    }

    /// The client is gone (or moved to another replica): the runtime may finish its turn.
    pub(super) fn client_gone(&mut self, cx: &Cx<'_>) {
        match self.state.phase() {
            Phase::Live if self.runtime.is_open() && self.answering() => {
                self.state.settle(cx.now + self.limits.park_grace);
            }
            Phase::Live | Phase::Opening(_) | Phase::Backoff(_) => self.settled(false),
            Phase::Settling(_) | Phase::Done(_) => {}
        }
    }

    /// The runtime answers a turn or has typed inputs to take up.
    fn answering(&self) -> bool {
        self.kept.turn_open || !self.kept.in_flight.is_empty()
    }

    /// A runtime frame while the client is away: kept for replay.
    pub(super) fn settle_frame(&mut self, frame: RuntimeFrame) {
        let frame = match frame {
            RuntimeFrame::Text(text) => {
                let kind = ServerKind::peek(text.as_str());
                if kind == Some(ServerKind::ConnectionClose) {
                    return self.runtime.hold_close(text);
                }
                self.new_reply(kind);
                self.kept.observe(text.as_str()).map_or(Frame::Text(text), Frame::from)
            }
            RuntimeFrame::Binary(data) => Frame::Binary(data),
            RuntimeFrame::Closed { code, .. } => {
                self.runtime.detach();
                // A handoff stays pending (performed on resume); a drain or loss is
                // recovered on resume; any other close ends the session.
                let ended = !matches!(code, close_code::HANDOFF | close_code::GOING_AWAY | close_code::TRY_AGAIN_LATER);
                return self.settled(ended);
            }
            RuntimeFrame::Lost => {
                self.runtime.detach();
                return self.settled(false);
            }
            RuntimeFrame::Control => return,
        };
        self.record(&frame);
        self.replay.record(frame, self.limits.replay_messages, self.limits.replay_bytes);
        if !self.answering() {
            self.settled(false);
        }
    }

    /// Settling is over: `ended` when the agent ended the session meanwhile.
    pub(super) fn settled(&mut self, ended: bool) {
        self.state.finish(if ended { Ending::Detach } else { Ending::Park });
    }

    /// What the store keeps of a session that parks (its memory, history and replay
    /// buffer move out of the machine).
    pub fn take_parked(&mut self) -> Parked {
        let handoff = self.kept.pending_handoff.take();
        let kept = std::mem::take(&mut self.kept);
        let replay = std::mem::take(&mut self.replay);
        self.parked(kept, handoff, replay)
    }

    /// The session as it stands, for a resume should this gateway die holding it (the
    /// store's snapshot): with `handoff` when one is under way. Reply audio is left out.
    pub fn snapshot(&self, handoff: Option<(String, HandoffContext)>) -> Parked {
        self.parked(self.kept.clone(), handoff, self.replay.without_audio())
    }

    /// Asks for a snapshot now ([`super::Effect::Snapshot`]), where a shared store keeps one.
    pub(super) fn snapshot_now(&mut self, handoff: Option<(String, HandoffContext)>) {
        if self.limits.movable {
            self.client.snapshot_taken(self.replay.seq);
            let snapshot = self.snapshot(handoff);
            self.push(super::Effect::Snapshot(Box::new(snapshot)));
        }
    }

    /// What continuing the session later needs (`session_start.continue_from`): what is
    /// kept of it, without the messages kept for replay (another session: its own trace).
    pub fn continuation(&self) -> Parked {
        let continued = self.parked(self.kept.clone(), self.kept.pending_handoff.clone(), Replay::default());
        Parked { traceparent: None, ..continued }
    }

    fn parked(&self, kept: Kept, handoff: Option<(String, HandoffContext)>, replay: Replay) -> Parked {
        Parked {
            session_id: self.id.clone(),
            namespace: self.target.route.namespace.clone(),
            agent: self.target.route.name.clone(),
            voice: self.settings.voice().clone(),
            modalities: self.settings.modalities().to_vec(),
            model: self.settings.model().clone(),
            audio: self.settings.audio().cloned(),
            handoff,
            kept,
            generation: self.runtime.generation(),
            replay,
            traceparent: self.traceparent.clone(),
            reach: self.settings.reach(),
            variants: self.settings.variants().clone(),
            text_only: self.settings.text_only().map(str::to_owned),
            placed: self.settings.placement().map(|(agent, region, cause)| Placement {
                agent: agent.to_owned(),
                region: region.to_owned(),
                cause: cause.to_owned(),
            }),
        }
    }

    /// When the settle phase ends, if settling.
    pub fn settle_deadline(&self) -> Option<Instant> {
        match self.state.phase() {
            Phase::Settling(deadline) => Some(deadline),
            _ => None,
        }
    }
}
