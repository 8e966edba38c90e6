//! The calls of `transfer_to_person` (see [`crate::transfer`]): planned into a
//! `transfer_request` for the client, then waiting like a running tool for its
//! `transfer_result` — `transferred` answers the call and the session ends (the session's
//! part), anything else answers it with a `transfer_<outcome>` error for the model — or
//! for its deadline, past which it ends as `transfer_no_answer`.

use std::time::Instant;

use crate::events::Effect;
use crate::protocol::{ErrorCode, ServerMessage, TransferOutcome};
use crate::tools::{FailureKind, ToolFailure};

use super::plan::Step;
use super::{Calls, Cx};

/// What a `transfer_result` did.
#[derive(Debug)]
pub(crate) enum Reported {
    /// The caller is with this person: the session ends.
    Transferred(String),
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
        let call = &mut self.calls[index];
        call.running = true;
        call.started = Some(now);
        call.deadline = Some(now + planned.patience);
        call.transfer = Some(planned.person.clone());
        let mut request = planned.request;
        if let ServerMessage::TransferRequest { tool_use_id, .. } = &mut request {
            tool_use_id.clone_from(&call.id);
        }
        let entry = serde_json::json!({ "id": call.id, "person": planned.person, "outcome": "requested" });
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
        let index = self.calls.iter().position(|c| c.id == id && c.transfer.is_some() && c.result.is_none())?;
        let person = self.calls[index].transfer.clone().unwrap_or_default();
        let message: String = message.chars().filter(|c| !c.is_control()).take(300).collect();
        let entry = serde_json::json!({ "id": id, "person": person, "outcome": outcome.as_str(), "message": message });
        let mut effects = vec![cx.common.transcript("transfer", entry)];
        let Some(kind) = FailureKind::of_transfer(outcome) else {
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

    /// Transfers whose client did not answer by their deadline end as unanswered.
    pub(super) fn expire_transfers(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let expired: Vec<usize> = (0..self.calls.len())
            .filter(|&i| {
                let c = &self.calls[i];
                c.transfer.is_some() && c.result.is_none() && c.deadline.is_some_and(|d| d <= now)
            })
            .collect();
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
