//! The calls of `transfer_to_person` (see [`crate::transfer`]): planned into a
//! `transfer_request` for the client, then waiting like a running tool for its
//! `transfer_result` — `transferred` answers the call and the session ends (the session's
//! part), anything else answers it with a `transfer_<outcome>` error for the model — or
//! for its deadline, past which it ends as `transfer_no_answer`.
//!
//! A warm transfer's `transferred` means the person answered and now hears the agent
//! instead of the caller: the call's result tells the model to brief them ([`BRIEF`]), and
//! the session ends when that reply is over ([`Calls::briefing`]; the session's part). A
//! failure reported for it afterwards (the person hung up during the brief) is
//! [`Reported::PersonLeft`]: the session goes on with the caller.

use std::time::Instant;

use crate::events::Effect;
use crate::protocol::{ErrorCode, ServerMessage, TransferOutcome};
use crate::tools::{FailureKind, ToolFailure};

use super::plan::Step;
use super::{Calls, Cx};

/// What the model is told when a warm transfer's person answers.
pub const BRIEF: &str = "The person answered and is on the line with you now; the caller is on hold and cannot hear \
     either of you. Tell the person briefly who is calling and why, from the conversation so far (a sentence or \
     two), then stop: when you finish, the caller is put through to them and the call leaves you.";

/// A warm transfer whose person the agent is briefing.
#[derive(Clone, Debug)]
pub(crate) struct Briefing {
    /// The transfer's tool call.
    id: String,
    /// Whom.
    pub(crate) person: String,
}

/// What a `transfer_result` did.
#[derive(Debug)]
pub(crate) enum Reported {
    /// The caller is with this person: the session ends.
    Transferred(String),
    /// A warm transfer's person answered: the agent briefs them (the session ends after).
    Briefing,
    /// A warm transfer's person hung up during the brief: the caller is back with the
    /// agent, which is told so (this text).
    PersonLeft(String),
    /// It failed: the call has its error result.
    Failed,
}

impl Calls {
    /// Plans a call of the transfer tool: refused while a handoff or another transfer is
    /// under way, or for a person the Agent does not list.
    pub(super) fn plan_transfer(&mut self, input: &serde_json::Value, cx: &mut Cx<'_>) -> Step {
        let busy =
            self.pending_handoff.is_some() || self.calls.iter().any(|c| c.transfer.is_some() && c.result.is_none());
        if busy {
            let message = "a transfer or handoff is already under way in this reply; wait for its result";
            return Step::Done(Err(ToolFailure::new(FailureKind::NotAllowed, message)));
        }
        // The id is filled in by `request_transfer`, which knows the call.
        match crate::transfer::plan(&cx.common.core().spec().telephony, "", input) {
            Ok(planned) => Step::Transfer(planned),
            Err(refused) => Step::Done(Err(refused)),
        }
    }

    /// Call `index` asks the client to transfer the caller, and waits for its answer.
    pub(super) fn request_transfer(
        &mut self,
        index: usize,
        planned: crate::transfer::Planned,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let call = self.wait_for_client(index, planned.patience, now);
        call.transfer = Some(planned.person.clone());
        let mut request = planned.request;
        if let ServerMessage::TransferRequest { tool_use_id, warm, .. } = &mut request {
            tool_use_id.clone_from(&call.id);
            call.warm = *warm;
        }
        let mode = if call.warm { "warm" } else { "cold" };
        let entry =
            serde_json::json!({ "id": call.id, "person": planned.person, "outcome": "requested", "mode": mode });
        vec![cx.common.transcript("transfer", entry), Effect::Send(request)]
    }

    /// The client's `transfer_result` for call `id`: `None` when no transfer with that id
    /// waits (the caller answers with `no_transfer_pending`).
    pub(crate) fn transfer_result(
        &mut self,
        id: &str,
        outcome: TransferOutcome,
        message: &str,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Option<(Vec<Effect>, Reported)> {
        let message: String = message.chars().filter(|c| !c.is_control()).take(300).collect();
        let Some(index) = self.calls.iter().position(|c| c.id == id && c.transfer.is_some() && c.result.is_none())
        else {
            return self.person_left(id, outcome, &message, cx);
        };
        let person = self.calls[index].transfer.clone().unwrap_or_default();
        let warm = self.calls[index].warm;
        let mode = if warm { "warm" } else { "cold" };
        let entry = serde_json::json!({
            "id": id, "person": person, "outcome": outcome.as_str(), "message": message, "mode": mode
        });
        let mut effects = vec![cx.common.transcript("transfer", entry)];
        let Some(kind) = FailureKind::of_transfer(outcome) else {
            if warm {
                let result = serde_json::json!({ "answered": true, "person": person, "now": BRIEF });
                effects.extend(self.finish_call(index, Ok(result), cx, now));
                self.briefing = Some(Briefing { id: id.to_owned(), person });
                return Some((effects, Reported::Briefing));
            }
            let result = serde_json::json!({ "transferred": true, "person": person });
            effects.extend(self.finish_call(index, Ok(result), cx, now));
            return Some((effects, Reported::Transferred(person)));
        };
        let said = if message.is_empty() { String::new() } else { format!(" ({message})") };
        let failure = ToolFailure::new(
            kind,
            format!(
                "the caller was not put through to {person}: {}{said}; the caller is still with you: tell them and offer what you can (try again later, a call back)",
                outcome.as_str().replace('_', " ")
            ),
        );
        effects.extend(self.finish_call(index, Err(failure), cx, now));
        Some((effects, Reported::Failed))
    }

    /// A failure reported for the warm transfer being briefed: the person left, the brief is
    /// off and the caller back. `None` for any other id or outcome.
    fn person_left(
        &mut self,
        id: &str,
        outcome: TransferOutcome,
        message: &str,
        cx: &mut Cx<'_>,
    ) -> Option<(Vec<Effect>, Reported)> {
        if outcome == TransferOutcome::Transferred || self.briefing.as_ref().is_none_or(|b| b.id != id) {
            return None;
        }
        let person = self.briefing.take().map(|b| b.person).unwrap_or_default();
        let entry = serde_json::json!({
            "id": id, "person": person, "outcome": outcome.as_str(), "message": message, "mode": "warm"
        });
        let text = format!(
            "(From the system, not the caller's words.) {person} hung up before the caller was put through ({message}). \
             The caller is back on the line with you and heard none of it: tell them, and offer what you can \
             (try again later, a call back)."
        );
        Some((vec![cx.common.transcript("transfer", entry)], Reported::PersonLeft(text)))
    }

    /// Transfers whose client did not answer by their deadline end as unanswered.
    pub(super) fn expire_transfers(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let expired = self.overdue(now, |c| c.transfer.is_some() && c.result.is_none());
        let mut effects = Vec::new();
        for index in expired {
            let call = &self.calls[index];
            let person = call.transfer.clone().unwrap_or_default();
            let waited = call.started.map_or(0, |s| now.saturating_duration_since(s).as_secs());
            let entry = serde_json::json!({ "id": call.id, "person": person, "outcome": "no_answer", "message": "no transfer_result" });
            effects.push(cx.common.transcript("transfer", entry));
            let message = format!(
                "the caller was not put through to {person}: no answer in {waited} s (the client did not report the transfer); the caller is still with you"
            );
            effects.extend(self.finish_call(
                index,
                Err(ToolFailure::new(FailureKind::TransferNoAnswer, message)),
                cx,
                now,
            ));
        }
        effects
    }
}

/// The refusal of a `transfer_result` for no transfer under way.
pub(crate) fn no_transfer_pending(id: &str) -> Effect {
    Effect::Send(ServerMessage::error(
        ErrorCode::NoTransferPending,
        format!("no transfer to a person waits for a result with tool_use_id {id:?}"),
        true,
    ))
}
