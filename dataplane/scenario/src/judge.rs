//! Judged expectations (`expect.judge.rubric`): what exact matching cannot express — "the
//! agent refuses politely and offers another way", "it never promises a refund" — checked
//! by a model reading the conversation so far. Only with a judge model
//! (`switchboard test --judge-model`, real Bedrock or any Converse endpoint); without one a
//! judged expectation is not checked, and the report says so. A judged result is marked as
//! such wherever it is shown: a model's verdict, not a match.
//!
//! The judge answers `PASS` or `FAIL` on its first line and why on the next; anything
//! else is an error of the step (a judge that cannot be read is no verdict).

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::protocol::ServerMessage;
use switchboard_models::TextModel;
use switchboard_models::judge::{Question, ask};

use super::expect::Divergence;
use super::observe::describe;

/// The judge's instructions.
const INSTRUCTIONS: &str = "You are a strict judge of a test of a customer-service AI agent. You get the \
conversation so far (lines starting '>' are the caller's, '<' the agent's, '[...]' what the system did) and a \
rubric about the agent's latest turn, the last block. Decide only whether the rubric holds. Answer with exactly \
PASS or FAIL on the first line, then one sentence saying why.";
/// The most conversation the judge reads, in bytes (the end is kept: the turn judged).
const MAX_CONVERSATION_BYTES: usize = 24 * 1024;
/// How long a verdict may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A model that judges rubrics.
#[derive(Clone, Debug)]
pub struct Judge {
    model: Arc<dyn TextModel>,
    model_id: String,
}

/// A judge's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The rubric holds.
    pub passed: bool,
    /// Why, in the judge's words.
    pub reason: String,
}

impl Judge {
    /// A judge asking `model_id` through `model`.
    pub fn new(model: Arc<dyn TextModel>, model_id: impl Into<String>) -> Self {
        Self { model, model_id: model_id.into() }
    }

    /// The judge's model id (reports name it).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The divergence of a judged expectation, `None` when the judge finds `rubric` holds
    /// for `turn` after `earlier`; marked as judged, naming the model.
    pub async fn check(&self, rubric: &str, earlier: &[String], turn: &[String]) -> Option<Divergence> {
        let expected = format!("(judged by {}) {}", self.model_id, rubric.trim());
        let actual = match self.verdict(rubric, earlier, turn).await {
            Ok(Verdict { passed: true, .. }) => return None,
            Ok(Verdict { passed: false, reason }) => format!("the judge says FAIL: {reason}"),
            Err(error) => format!("no verdict: {error}"),
        };
        Some(Divergence { expectation: "judge".to_owned(), expected, actual })
    }

    /// Whether `rubric` holds for the last turn of `earlier` and `turn` (transcript lines).
    pub async fn verdict(&self, rubric: &str, earlier: &[String], turn: &[String]) -> Result<Verdict, String> {
        let question = Question {
            model_id: &self.model_id,
            instructions: INSTRUCTIONS,
            prompt: prompt(rubric, earlier, turn),
            max_tokens: 200,
            timeout: TIMEOUT,
        };
        let reply = ask(self.model.as_ref(), question).await.map_err(|error| error.to_string())?;
        parse(&reply.text).map_err(|e| format!("the judge model {}: {e}", self.model_id))
    }
}

/// A turn's messages as the transcript lines a judge reads (as `switchboard chat` prints
/// them: `> caller`, `< agent`, `[what happened]`).
pub fn transcript<'a>(messages: impl Iterator<Item = &'a ServerMessage>) -> Vec<String> {
    messages.filter_map(describe).collect()
}

/// What the judge reads: the conversation before the turn, the turn, the rubric.
pub fn prompt(rubric: &str, earlier: &[String], turn: &[String]) -> String {
    let mut before = earlier.join("\n");
    let room = MAX_CONVERSATION_BYTES.saturating_sub(turn.iter().map(|l| l.len() + 1).sum());
    if before.len() > room {
        let mut cut = before.len() - room;
        while !before.is_char_boundary(cut) {
            cut += 1;
        }
        before = format!("[earlier lines left out]\n{}", &before[cut..]);
    }
    format!(
        "Conversation before the latest turn:\n{}\n\nThe latest turn:\n{}\n\nRubric: {}",
        if before.is_empty() { "(none)" } else { &before },
        turn.join("\n"),
        rubric.trim()
    )
}

/// The verdict in a judge's reply: `PASS` or `FAIL` first (any case, a trailing `.` or `:`
/// allowed), the rest the reason.
pub fn parse(reply: &str) -> Result<Verdict, String> {
    let reply = reply.trim();
    let (first, rest) = reply.split_once(char::is_whitespace).unwrap_or((reply, ""));
    let word = first.trim_end_matches(['.', ':', ',']).to_ascii_uppercase();
    let passed = match word.as_str() {
        "PASS" => true,
        "FAIL" => false,
        _ => {
            let shown: String = reply.chars().take(200).collect();
            return Err(format!("its answer does not start with PASS or FAIL: {shown:?}"));
        }
    };
    let reason: String = rest.trim().chars().take(500).collect();
    Ok(Verdict { passed, reason: if reason.is_empty() { "no reason given".to_owned() } else { reason } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_pass_or_fail_first_and_the_reason_after() {
        let pass = parse("PASS\nThe agent asked for identity first.").expect("a verdict");
        assert_eq!(pass, Verdict { passed: true, reason: "The agent asked for identity first.".into() });
        assert!(!parse("fail: it gave the balance at once").expect("a verdict").passed);
        assert_eq!(parse("Pass.").expect("a verdict").reason, "no reason given");
        let unreadable = parse("I think the agent did well").expect_err("no verdict");
        assert!(unreadable.contains("does not start with PASS or FAIL"), "{unreadable}");
        assert!(parse("").is_err() && parse("PASSED").is_err());
    }

    #[test]
    fn the_prompt_holds_the_turn_whole_and_the_most_recent_earlier_lines() {
        let earlier: Vec<String> = (0..5000).map(|n| format!("> line {n}")).collect();
        let turn = vec!["> the question".to_owned(), "< the answer".to_owned()];
        let text = prompt("  The agent answers.  ", &earlier, &turn);
        assert!(text.len() <= MAX_CONVERSATION_BYTES + 200, "bounded: {}", text.len());
        assert!(text.contains("[earlier lines left out]") && text.contains("> line 4999\n"));
        assert!(!text.contains("> line 0\n"));
        assert!(text.ends_with("The latest turn:\n> the question\n< the answer\n\nRubric: The agent answers."));
        assert!(prompt("r", &[], &turn).contains("before the latest turn:\n(none)"));
    }
}
