//! Client tools: calls the client runs (an Agent tool with `client`). Once a call passed the
//! pipeline (authorised, allowed, valid input, consent), the client is sent a
//! `client_tool_call`; its `client_tool_result` ends the call — a `result` (checked against
//! the tool's `outputSchema`: one that does not match ends as `client_bad_result`) or an
//! `error` (`client_error`). A call nobody answers within the tool's `timeoutSeconds` (a
//! client with no handler for it) ends as `client_timeout`. The model gets each outcome as
//! a result or a typed error and goes on; the client gets `tool_complete` or `tool_error`.
//!
//! A client's answer comes from outside the cluster: it is never cached nor remembered (see
//! `plan`), and an answer for a call that does not wait for one is refused with
//! `no_client_tool_pending` and changes nothing.

use std::time::{Duration, Instant};

use switchboard_crds::agent::ClientTool;

use crate::events::Effect;
use crate::protocol::{ErrorCode, ServerMessage};
use crate::tools::{FailureKind, ToolFailure};

use super::{Calls, Cx};

/// What a client answered for a call: its result, or why it could not run the tool.
type ClientAnswer = Result<serde_json::Value, String>;

/// The most characters of a client's `error` that reach the model.
pub(crate) const MAX_CLIENT_ERROR_CHARS: usize = 1000;

impl Calls {
    /// The client is asked to run call `index` (already marked running); its answer is
    /// awaited for the tool's `timeoutSeconds`.
    pub(super) fn ask_client(&mut self, index: usize, client: &ClientTool, now: Instant) -> Vec<Effect> {
        let wait = Duration::from_secs(u64::from(client.timeout_seconds.clamp(1, 300)));
        let call = &mut self.calls[index];
        call.awaiting_client = true;
        call.deadline = Some(now + wait);
        vec![Effect::Send(ServerMessage::ClientToolCall {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            timeout_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        })]
    }

    /// The client answered call `id`: its result (when it matches the tool's output schema)
    /// or its error ends the call. An answer for no waiting call is refused.
    pub(crate) fn client_answered(
        &mut self,
        id: &str,
        answer: ClientAnswer,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.id == id && c.awaiting_client) else {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::NoClientToolPending,
                format!(
                    "no client tool call waits for an answer with tool_use_id {id:?} (unknown, answered already, or past its timeout)"
                ),
                true,
            ))];
        };
        let name = self.calls[index].name.clone();
        let outcome = match answer {
            Ok(result) => cx.common.core().validate_output(&name, &result).map(|()| result).map_err(|errors| {
                ToolFailure::new(
                    FailureKind::ClientBadResult,
                    format!("the client's result for {name} does not match the tool's output schema: {errors}"),
                )
            }),
            Err(error) => {
                let said: String = error.chars().take(MAX_CLIENT_ERROR_CHARS).collect();
                Err(ToolFailure::new(FailureKind::ClientReported, format!("the client could not run {name}: {said}")))
            }
        };
        self.finish_call(index, outcome, cx, now)
    }

    /// Time passed: client calls past their deadline end as `client_timeout`.
    pub(super) fn expire_client_calls(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let expired = self.overdue(now, |c| c.awaiting_client);
        let mut effects = Vec::new();
        for index in expired {
            let call = &self.calls[index];
            let seconds = call.started.map_or(0, |started| now.saturating_duration_since(started).as_secs());
            let message = format!(
                "the client did not answer the {} call within {seconds} s (it may have no handler for this tool); the tool did not run as far as the session knows",
                call.name
            );
            effects.extend(self.finish_call(
                index,
                Err(ToolFailure::new(FailureKind::ClientTimeout, message)),
                cx,
                now,
            ));
        }
        effects
    }

    /// Whether a call waits for the client's answer.
    pub(crate) fn awaits_client(&self) -> bool {
        self.calls.iter().any(|c| c.awaiting_client)
    }
}
