//! Consent requests of the calls under way: asking (voice: the model is asked to put the
//! question in words), answers in words (read by [`crate::consent::classify`]: a clear yes
//! runs the tool, a clear no declines it, anything else leaves it waiting and asks again),
//! and the timeout — a request nobody answers for the tool's `consentTimeoutSeconds` ends
//! with a `consent_timeout` result the model can explain, and a `tool_error` for the client.
//!
//! A spoken or typed answer goes to the earliest request still waiting (the one the agent
//! asked first); `tool_consent` names the one it answers.

use std::time::{Duration, Instant};

use crate::agent::AgentCore;
use crate::consent::{Answer, classify};
use crate::events::Effect;
use crate::protocol::{ErrorCode, ServerMessage, TranscriptRole};
use crate::tools::{FailureKind, ToolFailure};

use super::super::say::{final_text, refused_input};
use super::{Call, Calls, Cx};

/// How long a consent request waits for `call`'s tool.
fn patience(core: &AgentCore, call: &Call) -> Duration {
    let seconds = core.tool(&call.name).map_or(60, |t| t.consent_timeout_seconds);
    Duration::from_secs(u64::from(seconds.max(1)))
}

impl Calls {
    /// The consent request of call `index` goes out now; it expires after the tool's
    /// `consentTimeoutSeconds`. Voice: the model is asked to put the question to the caller
    /// in words (a voice model does not speak while it waits for a tool result).
    pub(super) fn ask_consent(&mut self, index: usize, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let core = cx.common.core();
        let call = &self.calls[index];
        let deadline = now + patience(core, call);
        let description = core.tool(&call.name).map(|t| t.description.clone()).unwrap_or_default();
        let request = ServerMessage::ConsentRequest {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            description: description.clone(),
            input: call.input.clone(),
        };
        let mut effects = vec![Effect::Send(request)];
        effects.extend(cx.drive.ask_caller(|| {
            format!(
                "(Before the {} tool runs, the caller must allow it: {}. Ask the caller in one short question whether to go ahead, and wait for a yes or a no.)",
                call.name,
                description.trim_end_matches('.')
            )
        }));
        self.calls[index].deadline = Some(deadline);
        effects
    }

    /// The earliest call waiting for consent.
    fn pending_consent(&self) -> Option<usize> {
        self.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.awaiting_consent)
            .min_by_key(|(_, c)| c.deadline)
            .map(|(index, _)| index)
    }

    /// Typed text while a consent request waits (text sessions): a clear answer answers it
    /// (and the line is shown as the user's), anything else is refused and the request
    /// asked again. `None`: no request waits; the text is an ordinary input.
    pub(crate) fn typed_consent(
        &mut self,
        text: &str,
        id: Option<String>,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Option<Vec<Effect>> {
        let index = self.pending_consent()?;
        match classify(text) {
            Answer::Unclear => Some(self.ask_again(index, Some(id), cx)),
            answer => {
                let mut effects = vec![
                    Effect::Send(final_text(TranscriptRole::User, text, id)),
                    cx.common.transcript("user", serde_json::json!({ "text": text })),
                ];
                let tool_use_id = self.calls[index].id.clone();
                effects.extend(self.consent(&tool_use_id, answer == Answer::Yes, cx, now));
                Some(effects)
            }
        }
    }

    /// The user's words (spoken or typed, already recorded) in a voice session: a clear
    /// answer answers the waiting request; unclear ones leave it waiting and show it again
    /// (the model heard the words too, and asks again in its own).
    pub(crate) fn spoken_consent(&mut self, text: &str, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let Some(index) = self.pending_consent() else { return Vec::new() };
        match classify(text) {
            Answer::Unclear => self.ask_again(index, None, cx),
            answer => {
                let tool_use_id = self.calls[index].id.clone();
                self.consent(&tool_use_id, answer == Answer::Yes, cx, now)
            }
        }
    }

    /// An unclear answer: the request stays (its deadline too) and is shown again; a typed
    /// input (`Some(id)`) is refused by id.
    fn ask_again(&self, index: usize, typed: Option<Option<String>>, cx: &Cx<'_>) -> Vec<Effect> {
        let call = &self.calls[index];
        let mut effects = Vec::new();
        if let Some(id) = typed {
            let message = format!(
                "the {} tool waits for your approval: answer yes or no (your message was not taken as either)",
                call.name
            );
            effects.push(Effect::Send(refused_input(ErrorCode::ConsentUnclear, message, id)));
        }
        let description = cx.common.core().tool(&call.name).map(|t| t.description.clone()).unwrap_or_default();
        effects.push(Effect::Send(ServerMessage::ConsentRequest {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            description,
            input: call.input.clone(),
        }));
        effects
    }

    /// Time passed: consent requests past their deadline end without running their tool.
    pub(super) fn expire_consents(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let expired = self.overdue(now, |c| c.awaiting_consent);
        let mut effects = Vec::new();
        for index in expired {
            let seconds = patience(cx.common.core(), &self.calls[index]).as_secs();
            self.calls[index].awaiting_consent = false;
            let message = format!(
                "the user did not answer the consent request within {seconds} s, so the tool did not run; ask again if it is still needed"
            );
            let failure = ToolFailure::new(FailureKind::ConsentTimeout, message);
            effects.extend(self.finish_call(index, Err(failure), cx, now));
        }
        effects.extend(self.expire_transfers(cx, now));
        effects
    }
}
