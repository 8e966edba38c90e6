//! Workflow lines: a workflow node's `say` line (a legal disclosure, a notice before a
//! payment) is said aloud, word for word, each time the session moves into the node.
//!
//! The move is read off the `workflow_transition` the session sends; the line is asked for
//! once the agent's turn is over (the session is `ready`), so it is not spoken over the
//! reply under way and is the next thing the caller hears. It is asked for as the call
//! clock's lines are ([`super::turns::say_prompt`]: an interactive text asking the model
//! to say it now, whose echo is not the caller's). A line marked `uninterruptible` is played
//! whole: while it is spoken the caller's audio does not reach the model (the barge-in
//! gate's rule for lines played whole, as for the Persona's greeting), and speech over it
//! is counted as an interruption ignored.
//!
//! How each line went is written to the session's transcript: a `workflow_line` entry
//! with the node, the text, whether it was uninterruptible and `played`: `whole` (its
//! FINAL text came) or `cut` (the caller interrupted it).

use std::time::Instant;

use switchboard_core::protocol::{ServerMessage, SessionState};
use switchboard_core::{Effect, Input, Session, TranscriptEntry, VoiceInput};
use switchboard_crds::workflow::WorkflowSpec;

use super::super::agent::Exit;
use super::Voice;
use super::turns::say_prompt;

/// Why the model is asked to say the line.
const WHY: &str = "The conversation moved to a step that opens with a line the caller must hear.";

/// One node's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The node entered.
    pub node: String,
    /// What the agent says.
    pub text: String,
    /// Whether it is played whole.
    pub uninterruptible: bool,
}

/// The lines of workflow nodes due, and the one being said.
#[derive(Debug, Default)]
pub struct Lines {
    /// The line of the node last entered, until it is asked for.
    due: Option<Line>,
    /// The line asked for, until its reply ends.
    asked: Option<Line>,
    /// The line whose reply ended, and whether it was played whole, until it is written down.
    ended: Option<(Line, bool)>,
}

impl Lines {
    /// A message the session sends: a move into a node with a line makes it due (in place
    /// of one not asked for yet: the session has left that node).
    pub fn sent(&mut self, message: &ServerMessage, workflow: &WorkflowSpec) {
        if let ServerMessage::WorkflowTransition { to, .. } = message {
            self.due = workflow.node(to).and_then(|node| {
                let say = node.say.as_ref()?;
                Some(Line {
                    node: node.id.clone(),
                    text: say.text.trim().to_owned(),
                    uninterruptible: say.uninterruptible,
                })
            });
        }
    }

    /// The line to ask for now that the session is in `state`: the one due, once the
    /// session is ready and no line is being said.
    pub fn ask(&mut self, state: Option<SessionState>) -> Option<Line> {
        if state != Some(SessionState::Ready) || self.asked.is_some() {
            return None;
        }
        let line = self.due.take()?;
        self.asked = Some(line.clone());
        Some(line)
    }

    /// A model input: the line being said ends with its FINAL text (played whole) or an
    /// interruption (cut).
    pub fn heard(&mut self, input: &Input) {
        let whole = match input {
            Input::Voice(VoiceInput::AssistantFinal(_)) => true,
            Input::Voice(VoiceInput::Interrupted) => false,
            _ => return,
        };
        if let Some(line) = self.asked.take() {
            self.ended = Some((line, whole));
        }
    }

    /// The line that ended (`true`: played whole), once.
    pub fn ended(&mut self) -> Option<(Line, bool)> {
        self.ended.take()
    }
}

/// The transcript entry of `line`, said whole or cut, in `session_id` of `agent`.
pub fn entry(session_id: &str, agent: &str, line: &Line, whole: bool) -> TranscriptEntry {
    TranscriptEntry {
        session_id: session_id.to_owned(),
        agent: agent.to_owned(),
        event: "workflow_line".to_owned(),
        data: serde_json::json!({
            "node": line.node,
            "text": line.text,
            "uninterruptible": line.uninterruptible,
            "played": if whole { "whole" } else { "cut" },
        }),
    }
}

impl Voice<'_> {
    /// Asks the model to say the line due, when the session is ready for it.
    pub(super) async fn say_line(&mut self, session: &Session) -> Option<Exit> {
        let line = self.lines.ask(session.state_now())?;
        if line.uninterruptible {
            self.turns.protect(Instant::now());
        }
        let prompt = say_prompt(WHY, &line.text);
        self.stream.send_text(prompt).await.err().map(|_| Exit::Closed("the voice model session ended".into()))
    }

    /// Once the line being said is over (after the core took the model's inputs that ended
    /// it), how it went is written down.
    pub(super) async fn line_ended(&mut self, session: &mut Session) -> Option<Exit> {
        let (line, whole) = self.lines.ended()?;
        let entry = entry(session.id(), self.agent.core.name(), &line, whole);
        self.apply(session, vec![Effect::Transcript(entry)]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::protocol::StopReason;

    fn workflow() -> WorkflowSpec {
        serde_json::from_value(serde_json::json!({
            "entry": "start",
            "nodes": [
                {"id": "start"},
                {"id": "disclose", "say": {"text": " Calls are recorded. ", "uninterruptible": true}},
                {"id": "plain"}
            ],
            "edges": [{"from": "start", "to": "disclose"}, {"from": "disclose", "to": "plain"}]
        }))
        .expect("a workflow")
    }

    fn moved(to: &str) -> ServerMessage {
        ServerMessage::WorkflowTransition { from: "start".into(), to: to.into(), by: "model".into() }
    }

    #[test]
    fn a_line_is_asked_for_once_the_session_is_ready_and_its_end_is_told_once() {
        let mut lines = Lines::default();
        lines.sent(&moved("disclose"), &workflow());
        assert_eq!(lines.ask(Some(SessionState::Speaking)), None, "not over the reply under way");
        let line = lines.ask(Some(SessionState::Ready)).expect("due");
        assert_eq!(line.text, "Calls are recorded.");
        assert!(line.uninterruptible);
        assert_eq!(lines.ask(Some(SessionState::Ready)), None, "asked once");
        lines.heard(&Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }));
        assert_eq!(lines.ended(), None, "still being said");
        let said = Input::Voice(VoiceInput::AssistantFinal("Calls are recorded.".into()));
        lines.heard(&said);
        assert_eq!(lines.ended(), Some((line, true)));
        lines.heard(&said);
        assert_eq!(lines.ended(), None, "told once");
    }

    #[test]
    fn a_cut_line_is_told_and_leaving_a_node_before_its_line_drops_it() {
        let mut lines = Lines::default();
        lines.sent(&moved("disclose"), &workflow());
        let line = lines.ask(Some(SessionState::Ready)).expect("due");
        lines.heard(&Input::Voice(VoiceInput::Interrupted));
        assert_eq!(lines.ended(), Some((line, false)));

        lines.sent(&moved("disclose"), &workflow());
        lines.sent(&moved("plain"), &workflow());
        assert_eq!(lines.ask(Some(SessionState::Ready)), None, "the node with the line was left");
        lines.heard(&Input::Voice(VoiceInput::Interrupted));
        assert_eq!(lines.ended(), None, "no line was being said");
        let entry = entry("s1", "triage", &Line { node: "n".into(), text: "t".into(), uninterruptible: false }, false);
        assert_eq!(entry.event, "workflow_line");
        assert_eq!(entry.data["played"], "cut");
    }
}
