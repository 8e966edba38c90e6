//! Consent in words, and its timeout. While a `consent_request` waits, what the user types
//! or says is read by [`classify`]: a clear yes runs the tool, a clear no declines it, and
//! anything else leaves it waiting and asks again — the core decides, not the model, and
//! the tool runs only on a clear yes. `tool_consent` still answers by id. A request nobody
//! answers for the tool's `consentTimeoutSeconds` ends with a `consent_timeout` result the
//! model can explain, and a `tool_error` for the client.
//!
//! A spoken or typed answer goes to the earliest request still waiting (the one the agent
//! asked first); `tool_consent` names the one it answers.
//!
//! This module owns the reading of words ([`classify`]); the requests themselves, their
//! deadlines and answers are the session's tool calls' (`session::calls::consent`).

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
