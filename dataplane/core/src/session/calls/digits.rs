//! The calls of `send_digits` (see [`crate::digits`]): checked (a phone call, one sequence
//! at a time, keys that read), planned into a `digits_request` for the client, then waiting
//! like a running tool for its `digits_result` — `sent` answers the call with the keys,
//! anything else with a `digits_<outcome>` error for the model — or for its deadline, past
//! which it ends as a `timeout`.

use std::time::Instant;

use crate::events::Effect;
use crate::protocol::{DigitsOutcome, ErrorCode, ServerMessage};
use crate::tools::{FailureKind, ToolFailure};

use super::plan::Step;
use super::{Calls, Cx};

impl Calls {
    /// Plans a call of the tool: refused on a session that is no phone call (the tool is
    /// not offered there: a model that calls it anyway is told why), while other keys are
    /// being sent, or for keys that do not read.
    pub(super) fn plan_digits(&mut self, input: &serde_json::Value, cx: &mut Cx<'_>) -> Step {
        let refuse = |message: &str| Step::Done(Err(ToolFailure::new(FailureKind::NotAllowed, message)));
        if !crate::digits::is_phone_call(cx.common.memory()) {
            return refuse("keys can be pressed only on a phone call, and this session is not one");
        }
        if self.calls.iter().any(|c| c.digits.is_some() && c.result.is_none()) {
            return refuse("other keys are being pressed in this reply; wait for their result, then press these");
        }
        // The id is filled in by `request_digits`, which knows the call.
        match crate::digits::plan("", input) {
            Ok(planned) => Step::Digits(planned),
            Err(refused) => Step::Done(Err(refused)),
        }
    }

    /// Call `index` asks the client to press its keys, and waits for its answer.
    pub(super) fn request_digits(
        &mut self,
        index: usize,
        planned: crate::digits::Planned,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let call = self.wait_for_client(index, planned.patience, now);
        call.digits = Some(planned.digits.clone());
        let mut request = planned.request;
        if let ServerMessage::DigitsRequest { tool_use_id, .. } = &mut request {
            tool_use_id.clone_from(&call.id);
        }
        let entry = serde_json::json!({ "id": call.id, "digits": planned.digits, "outcome": "requested" });
        vec![cx.common.transcript("digits", entry), Effect::Send(request)]
    }

    /// The client's `digits_result` for call `id`: `None` when no keys with that id wait
    /// (the caller answers with `no_digits_pending`).
    pub(crate) fn digits_result(
        &mut self,
        id: &str,
        outcome: DigitsOutcome,
        sent: u32,
        message: &str,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Option<Vec<Effect>> {
        let index = self.calls.iter().position(|c| c.id == id && c.digits.is_some() && c.result.is_none())?;
        let message: String = message.chars().filter(|c| !c.is_control()).take(300).collect();
        let digits = self.calls[index].digits.clone().unwrap_or_default();
        let keys = digits.chars().filter(|c| *c != 'w').count();
        // The client's count, bounded by what it was asked for.
        let sent = if outcome == DigitsOutcome::Sent { keys } else { (sent as usize).min(keys) };
        let entry = serde_json::json!({
            "id": id, "digits": digits, "outcome": outcome.as_str(), "sent": sent, "message": message
        });
        let mut effects = vec![cx.common.transcript("digits", entry)];
        let result = match crate::digits::failure(outcome, sent as u32, keys, &message) {
            None => Ok(serde_json::json!({ "pressed": digits, "keys": keys })),
            Some(failure) => Err(failure),
        };
        effects.extend(self.finish_call(index, result, cx, now));
        Some(effects)
    }

    /// Keys whose client did not answer by their deadline end as a `timeout`.
    pub(super) fn expire_digits(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let expired = self.overdue(now, |c| c.digits.is_some() && c.result.is_none());
        let mut effects = Vec::new();
        for index in expired {
            let call = &self.calls[index];
            let waited = call.started.map_or(0, |s| now.saturating_duration_since(s).as_secs());
            let entry = serde_json::json!({
                "id": call.id, "digits": call.digits, "outcome": "timeout", "message": "no digits_result"
            });
            effects.push(cx.common.transcript("digits", entry));
            let message = format!(
                "the call did not say within {waited} s whether the keys were pressed; listen to where the menu is \
                 before pressing them again"
            );
            effects.extend(self.finish_call(index, Err(ToolFailure::new(FailureKind::Timeout, message)), cx, now));
        }
        effects
    }
}

/// The refusal of a `digits_result` for no keys being pressed.
pub(crate) fn no_digits_pending(id: &str) -> Effect {
    Effect::Send(ServerMessage::error(
        ErrorCode::NoDigitsPending,
        format!("no keys wait for a result with tool_use_id {id:?}"),
        true,
    ))
}
