//! Opening runtime sessions: the request the task carries out (memory and history, or a
//! handoff's context), and what each purpose does with the result — a new session is
//! routed, a handoff counted, a move told to the client (`bidi_connection_restart`), a
//! resumed session caught up; a failure is refused, told, or tried again.

use std::net::SocketAddr;

use switchboard_core::handoff::HandoffContext;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use tokio_tungstenite::tungstenite::Message as UpMessage;

use super::state::Retry;
use super::{Cx, Effect, Ending, Machine, Note, OpenError, OpenRequest, Purpose};

impl Machine {
    /// Asks the task to open a runtime session on the current target.
    pub(super) fn open(&mut self, purpose: Purpose, avoid: Option<SocketAddr>, handoff: Option<HandoffContext>) {
        // A handed-over session carries memory and history inside the handoff context;
        // one that stays with its agent goes on where it was in the workflow.
        let carried = match handoff {
            Some(handoff) => self.kept.carried_by(handoff),
            None => self.kept.carried(),
        };
        let variant = self.settings.variant_for(&self.target, &self.stickiness(&carried));
        let region = self.settings.placed_for(&self.target).map(|(region, _)| region.to_owned());
        self.state.open(OpenRequest { target: self.target.clone(), avoid, carried, variant, region }, purpose);
    }

    /// What the session's variant of the current Agent is picked by: the verified caller
    /// the session carries, so a caller keeps their variant across sessions (while the
    /// weights stay); else the session's id (a random pick by weight). With the Agent's
    /// name, so one caller's variants of two Agents are picked independently.
    fn stickiness(&self, carried: &switchboard_core::grant::Carried) -> String {
        let handed = carried.handoff.as_ref().map(|handoff| &handoff.memory);
        let caller = [Some(&carried.memory), handed]
            .into_iter()
            .flatten()
            .find_map(|memory| memory.get(switchboard_core::assertion::IDENTITY_KEY))
            .filter(|caller| !caller.is_null());
        match caller {
            Some(caller) => format!("{}\ncaller:{caller}", self.target.key()),
            None => format!("{}\nsession:{}", self.target.key(), self.id),
        }
    }

    pub(super) fn opened(&mut self, result: Result<SocketAddr, OpenError>, cx: &Cx<'_>) {
        let Some((request, purpose)) = self.state.opened() else {
            // Not asked for: nothing to do with it.
            return;
        };
        match result {
            Ok(addr) => {
                self.attached(addr, request.carried.handoff.is_some(), cx);
                self.identity_granted(cx);
                self.opened_for(purpose, cx);
            }
            Err(error) => self.open_failed(purpose, error, cx),
        }
    }

    /// A runtime session is open on `addr`: what was waiting goes to it.
    fn attached(&mut self, addr: SocketAddr, handed_over: bool, cx: &Cx<'_>) {
        for message in self.runtime.attach(addr, cx.now) {
            self.push(Effect::Runtime { message, keep: false });
        }
        for frame in self.kept.replay() {
            self.out.push_back(Effect::Runtime { message: UpMessage::text(frame), keep: false });
        }
        // A new pod: whether the last one was handing off no longer matters (nor whether
        // it drained: the relay starts again with a pod that serves, `state::State::opened`).
        self.kept.handoff_expected = false;
        if handed_over {
            // The target's position comes with its own transitions.
            self.kept.workflow = None;
            // It answers the request that brought the caller, within the same turn: until
            // its reply is complete the session is not between turns (a client gone now
            // lets it answer before parking, as mid-turn; parked at once, the answer was lost).
            self.kept.turn_open = true;
        }
        self.kept.agent.clone_from(&self.target.route.name);
    }

    fn opened_for(&mut self, purpose: Purpose, cx: &Cx<'_>) {
        match purpose {
            Purpose::Start { pending } => {
                self.push(Effect::Note(Note::Routed));
                if let Some(pending) = pending {
                    self.forward_text(pending.into());
                }
            }
            Purpose::Handoff { from, return_to, resumed, .. } => {
                self.kept.return_to = return_to;
                let to = self.target.key();
                match resumed {
                    Some(missed) => self.resumed(missed),
                    None => {
                        self.push(Effect::Note(Note::Handoff { from: from.clone(), to: to.clone() }));
                        self.hops.began(cx.now, from, to);
                    }
                }
            }
            Purpose::Reopen(Retry { reason, .. }) => {
                let generation = self.runtime.next_generation();
                let restart = ServerMessage::BidiConnectionRestart { reason, generation };
                self.deliver(restart.into());
            }
            Purpose::Resume { missed } => self.resumed(missed),
        }
    }

    fn open_failed(&mut self, purpose: Purpose, error: OpenError, cx: &Cx<'_>) {
        match purpose {
            Purpose::Start { .. } => {
                // A close reason is at most 123 bytes: the bidi_error has the details.
                self.push(Effect::Note(Note::Refused("no_runtime")));
                self.push(Effect::Client(ServerMessage::error(ErrorCode::NoRuntime, error.to_string(), false).into()));
                self.state.finish(Ending::Close((close_code::TRY_AGAIN_LATER, "no runtime".into())));
            }
            Purpose::Handoff { to, previous, resumed, .. } => {
                self.target = *previous;
                match resumed {
                    Some(missed) => {
                        self.kept.handoff_failed(&to, &format!("agent {to} could not take the session"));
                        self.reopen_resumed(missed);
                    }
                    None => self.handoff_failed(&to, error.into(), cx),
                }
            }
            Purpose::Reopen(retry) => self.reopen_failed(retry, error, cx),
            Purpose::Resume { .. } => self.state.finish(Ending::ResumeFailed(error)),
        }
    }
}
