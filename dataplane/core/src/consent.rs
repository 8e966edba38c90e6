//! Consent in words, and its timeout. While a `consent_request` waits, what the user types
//! or says is read by [`classify`]: a clear yes runs the tool, a clear no declines it, and
//! anything else leaves it waiting and asks again — the core decides, not the model, and
//! the tool runs only on a clear yes. `tool_consent` still answers by id. A request nobody
//! answers for the tool's `consentTimeoutSeconds` ends with a `consent_timeout` result the
//! model can explain, and a `tool_error` for the client.
//!
//! A spoken or typed answer goes to the earliest request still waiting (the one the agent
//! asked first); `tool_consent` names the one it answers.

use std::time::{Duration, Instant};

use super::calls::Call;
use super::session::{Effect, Session, final_text, refused_input};
use super::tools::{FailureKind, ToolFailure};
use crate::protocol::{ErrorCode, ServerMessage, TranscriptRole};

/// How the user's words answer a consent request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A clear yes.
    Yes,
    /// A clear no.
    No,
    /// Neither, or both: ask again.
    Unclear,
}

/// Phrases that say yes (matched on whole words, before single words).
const YES_PHRASES: &[&str] = &[
    "go ahead",
    "do it",
    "please do",
    "yes please",
    "that's fine",
    "that is fine",
    "of course",
    "no problem",
    "no worries",
    "i agree",
    "i approve",
    "i consent",
    "sounds good",
    "that's right",
    "that is right",
    "let's do it",
    "alright",
    "all right",
];
/// Phrases that say no.
const NO_PHRASES: &[&str] = &[
    "don't",
    "do not",
    "not now",
    "never mind",
    "nevermind",
    "no thanks",
    "no thank you",
    "i decline",
    "i refuse",
    "hold off",
    "wait",
];
/// Single words that say yes.
const YES_WORDS: &[&str] = &[
    "yes",
    "yeah",
    "yep",
    "yup",
    "yea",
    "sure",
    "ok",
    "okay",
    "approve",
    "approved",
    "confirm",
    "confirmed",
    "correct",
    "affirmative",
    "absolutely",
    "definitely",
    "certainly",
    "proceed",
];
/// Single words that say no.
const NO_WORDS: &[&str] = &["no", "nope", "nah", "stop", "cancel", "decline", "declined", "negative", "don't"];
/// Words that make any answer unclear: doubt, a question, a condition.
const HEDGES: &[&str] =
    &["maybe", "perhaps", "not", "unsure", "if", "but", "what", "why", "how", "which", "who", "when", "later", "think"];
/// Longest answer read as one (in words): a longer reply is a conversation, not an answer.
const MAX_ANSWER_WORDS: usize = 8;

/// Reads the user's words as an answer to a consent request: `Yes` or `No` only when the
/// words say one of them and nothing else — no question, no doubt, not both.
pub fn classify(text: &str) -> Answer {
    if text.contains('?') {
        return Answer::Unclear;
    }
    let lowered = text.to_lowercase().replace('’', "'");
    let words: Vec<&str> = lowered
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() || words.len() > MAX_ANSWER_WORDS {
        return Answer::Unclear;
    }
    let mut rest = format!(" {} ", words.join(" "));
    let (mut yes, mut no) = (false, false);
    for (phrases, said) in [(YES_PHRASES, &mut yes), (NO_PHRASES, &mut no)] {
        for phrase in phrases {
            let phrase = format!(" {phrase} ");
            if rest.contains(&phrase) {
                *said = true;
                rest = rest.replace(&phrase, " ");
            }
        }
    }
    for word in rest.split_whitespace() {
        if HEDGES.contains(&word) {
            return Answer::Unclear;
        }
        yes |= YES_WORDS.contains(&word);
        no |= NO_WORDS.contains(&word);
    }
    match (yes, no) {
        (true, false) => Answer::Yes,
        (false, true) => Answer::No,
        _ => Answer::Unclear,
    }
}

/// How long a consent request waits for `call`'s tool.
fn patience(session: &Session, call: &Call) -> Duration {
    let seconds = session.core.tool(&call.name).map_or(60, |t| t.consent_timeout_seconds);
    Duration::from_secs(u64::from(seconds.max(1)))
}

impl Session {
    /// The earliest moment something is due ([`crate::Input::Tick`] then): the deadline of
    /// the consent request that expires first.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.calls.iter().filter(|c| c.awaiting_consent).filter_map(|c| c.deadline).min()
    }

    /// The consent request of call `index` goes out now; it expires after the tool's
    /// `consentTimeoutSeconds`. Voice: the model is asked to put the question to the caller
    /// in words (a voice model does not speak while it waits for a tool result).
    pub(super) fn ask_consent(&mut self, index: usize, now: Instant) -> Vec<Effect> {
        let call = &self.calls[index];
        let deadline = now + patience(self, call);
        let description = self.core.tool(&call.name).map(|t| t.description.clone()).unwrap_or_default();
        let request = ServerMessage::ConsentRequest {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            description: description.clone(),
            input: call.input.clone(),
        };
        let mut effects = vec![Effect::Send(request)];
        if self.voice {
            let ask = format!(
                "(Before the {} tool runs, the caller must allow it: {}. Ask the caller in one short question whether to go ahead, and wait for a yes or a no.)",
                call.name,
                description.trim_end_matches('.')
            );
            self.remember_typed(&ask);
            effects.push(Effect::SendVoiceText(ask));
        }
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
    pub(super) fn typed_consent(&mut self, text: &str, id: Option<String>, now: Instant) -> Option<Vec<Effect>> {
        let index = self.pending_consent()?;
        match classify(text) {
            Answer::Unclear => Some(self.ask_again(index, Some(id))),
            answer => {
                let mut effects = vec![
                    Effect::Send(final_text(TranscriptRole::User, text, id)),
                    self.transcript("user", serde_json::json!({ "text": text })),
                ];
                let tool_use_id = self.calls[index].id.clone();
                effects.extend(self.consent(&tool_use_id, answer == Answer::Yes, now));
                Some(effects)
            }
        }
    }

    /// The user's words (spoken or typed, already recorded) in a voice session: a clear
    /// answer answers the waiting request; unclear ones leave it waiting and show it again
    /// (the model heard the words too, and asks again in its own).
    pub(super) fn spoken_consent(&mut self, text: &str, now: Instant) -> Vec<Effect> {
        let Some(index) = self.pending_consent() else { return Vec::new() };
        match classify(text) {
            Answer::Unclear => self.ask_again(index, None),
            answer => {
                let tool_use_id = self.calls[index].id.clone();
                self.consent(&tool_use_id, answer == Answer::Yes, now)
            }
        }
    }

    /// An unclear answer: the request stays (its deadline too) and is shown again; a typed
    /// input (`Some(id)`) is refused by id.
    fn ask_again(&mut self, index: usize, typed: Option<Option<String>>) -> Vec<Effect> {
        let call = &self.calls[index];
        let mut effects = Vec::new();
        if let Some(id) = typed {
            let message = format!(
                "the {} tool waits for your approval: answer yes or no (your message was not taken as either)",
                call.name
            );
            effects.push(Effect::Send(refused_input(ErrorCode::ConsentUnclear, message, id)));
        }
        let description = self.core.tool(&call.name).map(|t| t.description.clone()).unwrap_or_default();
        effects.push(Effect::Send(ServerMessage::ConsentRequest {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            description,
            input: call.input.clone(),
        }));
        effects
    }

    /// Time passed: consent requests past their deadline end without running their tool.
    pub(super) fn tick(&mut self, now: Instant) -> Vec<Effect> {
        let expired: Vec<usize> = (0..self.calls.len())
            .filter(|&i| self.calls[i].awaiting_consent && self.calls[i].deadline.is_some_and(|d| d <= now))
            .collect();
        let mut effects = Vec::new();
        for index in expired {
            let seconds = patience(self, &self.calls[index]).as_secs();
            self.calls[index].awaiting_consent = false;
            let message = format!(
                "the user did not answer the consent request within {seconds} s, so the tool did not run; ask again if it is still needed"
            );
            let failure = ToolFailure::new(FailureKind::ConsentTimeout, message);
            effects.extend(self.finish_call(index, Err(failure), now));
        }
        if !effects.is_empty() {
            effects.extend(self.maybe_done());
        }
        effects
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_answers_are_read_and_nothing_else() {
        for yes in ["yes", "Yes.", "yeah go ahead", "Sure, do it", "OK", "yes please", "that's fine", "no problem"] {
            assert_eq!(classify(yes), Answer::Yes, "{yes:?}");
        }
        for no in ["no", "No thanks.", "nope", "don't do that", "do not", "cancel", "not now", "never mind"] {
            assert_eq!(classify(no), Answer::No, "{no:?}");
        }
        for unclear in [
            "",
            "hmm",
            "yes no",
            "not sure",
            "maybe",
            "yes?",
            "what does it do",
            "yes but first tell me my balance",
            "ok wait",
            "I think so",
            "sure if it is free",
            "tell me about the weather in London tomorrow morning please",
            "sorry?",
        ] {
            assert_eq!(classify(unclear), Answer::Unclear, "{unclear:?}");
        }
    }
}
