//! Handoffs: a runtime that hands off sends `handoff` (with the context) and closes with
//! 4000; the session opens on a pod of the target Agent with that context signed, on the
//! same client socket. A handoff goes only where the source Agent may send it — an Agent of
//! its namespace it declares, or back to the agent that transferred the session
//! ([`crate::Directory::for_handoff`]) — and at most [`MAX_HANDOFFS_PER_TURN`] times in
//! one user turn (agents that pass a caller back and forth are stopped). When the target
//! cannot take it, the client is told (`bidi_error` `handoff_failed`), the source agent
//! reads why as the last line of its conversation, and the session goes on with the source
//! Agent on a fresh runtime session.

use switchboard_core::handoff::HandoffContext;
use switchboard_core::protocol::{ErrorCode, ServerMessage};

use super::{Cx, HandoffError, Machine, Note, Purpose};
use crate::resume::Missed;

/// Handoffs within one user turn after which the next is refused.
pub const MAX_HANDOFFS_PER_TURN: u32 = 4;

impl Machine {
    /// Moves the session to `to` with `context`. `resumed`: the handoff a runtime made
    /// while the client was away, performed on resume.
    pub(super) fn hand_off(&mut self, to: String, context: HandoffContext, resumed: Option<Missed>, cx: &Cx<'_>) {
        let from = self.target.key();
        let may_return_to = self.kept.return_to.clone();
        let return_to = self.kept.hand_over(&context);
        let turn = self.kept.turn;
        let routed = if self.hops.hop(turn) > MAX_HANDOFFS_PER_TURN {
            Err(HandoffError::TooMany { limit: MAX_HANDOFFS_PER_TURN })
        } else {
            let reach = self.settings.reach();
            cx.directory
                .for_handoff(&self.target.route, &to, may_return_to.as_deref(), reach)
                .map_err(HandoffError::from)
        };
        match routed {
            Ok(target) => {
                let previous = Box::new(std::mem::replace(&mut self.target, target));
                self.open(Purpose::Handoff { from, to, previous, return_to, resumed }, None, Some(context));
            }
            Err(error) => match resumed {
                Some(missed) => {
                    self.kept.handoff_failed(&to, &error.to_string());
                    self.reopen_resumed(missed);
                }
                None => self.handoff_failed(&to, error, cx),
            },
        }
    }

    /// The handoff to `to` did not happen: the client and the source agent are told, and
    /// the session reopens with the source.
    pub(super) fn handoff_failed(&mut self, to: &str, error: HandoffError, cx: &Cx<'_>) {
        let from = self.target.key();
        self.note(Note::Refused("handoff_failed"));
        self.note(Note::HandoffFailed { from, to: to.to_owned(), error: error.clone() });
        self.kept.handoff_failed(to, &error.to_string());
        let message =
            format!("the handoff to {to} failed ({error}); you are still talking to {}", self.target.route.name);
        self.deliver(ServerMessage::error(ErrorCode::HandoffFailed, message, true).into());
        self.reopen("handoff_failed", None, cx);
    }
}
