//! Workflow lines: a workflow node's `say` line (a legal disclosure, a notice before a
//! payment) is said aloud, word for word, each time the session moves into the node.
//!
//! The move is read off the `workflow_transition` the session sends; the line is asked for
//! once the agent's turn is over (the session is `ready`), so it is not spoken over the
//! reply under way and is the next thing the caller hears. It is asked for as the call
//! clock's lines are ([`super::turns::say_prompt`]: an interactive text asking the model
//! to say it now, whose echo is not the caller's). A line marked `uninterruptible` is played
//! whole: while it is spoken the caller's audio does not reach the model (the barge-in
//! gate's rule for lines played whole, as for the Persona's greeting: speech over it is
//! counted as an interruption ignored, and sent to the model once the line is over).
//!
//! How each line went is sent to the client as a `workflow_line` message (which the
//! gateway keeps in the session's record) and written to the session's transcript as a
//! `workflow_line` entry: the node, the text, whether it was uninterruptible and `played`:
//! `whole` (a FINAL text with its words came), `cut` (the caller interrupted it) or `abandoned` with a
//! `reason`. A line is abandoned when it has not ended within its time limit
//! ([`time_limit`]: the time a reply takes to start plus twice a slow speaker's time for its
//! words), so a model that never says it, or never finishes it, does not hold back the
//! lines of the nodes after it.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{LinePlayed, ServerMessage, SessionState};
use switchboard_core::{Effect, Input, Session, TranscriptEntry, VoiceInput};
use switchboard_crds::workflow::WorkflowSpec;

use super::super::agent::Exit;
use super::Voice;
use super::turns::say_prompt;

/// Why the model is asked to say the line.
const WHY: &str = "The conversation moved to a step that opens with a line the caller must hear.";

/// How long a line may take to start: a reply's usual wait, with room for a slow model.
pub const START_PATIENCE: Duration = Duration::from_secs(10);
/// A slow speaker's time per character (about 13 characters a second), doubled below.
const SLOW_MS_PER_CHAR: u64 = 75;

/// How long the line `text` may take from being asked for to its end before it is
/// abandoned: [`START_PATIENCE`] plus twice a slow speaker's time for its words (a 512
/// character line, the longest a Workflow allows: about 87 s).
pub fn time_limit(text: &str) -> Duration {
    let chars = text.chars().count() as u64;
    START_PATIENCE + Duration::from_millis(chars.saturating_mul(2 * SLOW_MS_PER_CHAR))
}

/// How a line ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The line.
    pub line: Line,
    /// How it went.
    pub played: LinePlayed,
    /// Why it was abandoned.
    pub reason: Option<String>,
}

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
    /// The line asked for, and when it is abandoned if it has not ended, until its reply
    /// ends.
    asked: Option<(Line, Instant)>,
    /// The line that ended, until it is told.
    ended: Option<Ended>,
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

    /// The line to ask for now (`now`) that the session is in `state`: the one due, once
    /// the session is ready and no line is being said (nor one that ended is still to be
    /// told).
    pub fn ask(&mut self, state: Option<SessionState>, now: Instant) -> Option<Line> {
        if state != Some(SessionState::Ready) || self.asked.is_some() || self.ended.is_some() {
            return None;
        }
        let line = self.due.take()?;
        self.asked = Some((line.clone(), now + time_limit(&line.text)));
        Some(line)
    }

    /// When the line being said is abandoned if it has not ended.
    pub fn deadline(&self) -> Option<Instant> {
        self.asked.as_ref().map(|(_, by)| *by)
    }

    /// The line being said has not ended by `now`, past its time limit: it is abandoned
    /// (true), and [`Lines::ended`] tells it.
    pub fn overdue(&mut self, now: Instant) -> bool {
        if self.deadline().is_none_or(|by| now < by) {
            return false;
        }
        let Some((line, _)) = self.asked.take() else { return false };
        let limit = time_limit(&line.text).as_secs();
        let reason = format!("the line was not said to the end within its time limit ({limit} s)");
        self.ended = Some(Ended { line, played: LinePlayed::Abandoned, reason: Some(reason) });
        true
    }

    /// A model input: the line being said ends with its FINAL text (played whole) or an
    /// interruption (cut).
    pub fn heard(&mut self, input: &Input) {
        let played = match input {
            // Another reply's FINAL (the caller spoke before the line came, and was
            // answered) is not the line's.
            Input::Voice(VoiceInput::AssistantFinal(said)) => match &self.asked {
                Some((line, _)) if says(said, &line.text) => LinePlayed::Whole,
                _ => return,
            },
            Input::Voice(VoiceInput::Interrupted) => LinePlayed::Cut,
            _ => return,
        };
        if let Some((line, _)) = self.asked.take() {
            self.ended = Some(Ended { line, played, reason: None });
        }
    }

    /// The line that ended, once.
    pub fn ended(&mut self) -> Option<Ended> {
        self.ended.take()
    }
}

/// Whether the words `said` include the line `text` (case, punctuation and spacing aside).
fn says(said: &str, text: &str) -> bool {
    fn words(text: &str) -> String {
        let letters: String =
            text.chars().map(|c| if c.is_alphanumeric() { c.to_ascii_lowercase() } else { ' ' }).collect();
        letters.split_whitespace().collect::<Vec<_>>().join(" ")
    }
    words(said).contains(&words(text))
}

impl Ended {
    /// The `workflow_line` message for the client (and the gateway's record).
    pub fn message(&self) -> ServerMessage {
        ServerMessage::WorkflowLine {
            node: self.line.node.clone(),
            text: self.line.text.clone(),
            uninterruptible: self.line.uninterruptible,
            played: self.played,
            reason: self.reason.clone(),
        }
    }

    /// The transcript entry, in `session_id` of `agent`.
    pub fn entry(&self, session_id: &str, agent: &str) -> TranscriptEntry {
        let mut data = serde_json::json!({
            "node": self.line.node,
            "text": self.line.text,
            "uninterruptible": self.line.uninterruptible,
            "played": self.played.as_str(),
        });
        if let Some(reason) = &self.reason {
            data["reason"] = serde_json::json!(reason);
        }
        TranscriptEntry {
            session_id: session_id.to_owned(),
            agent: agent.to_owned(),
            event: "workflow_line".to_owned(),
            data,
        }
    }
}

impl Voice<'_> {
    /// Asks the model to say the line due, when the session is ready for it.
    pub(super) async fn say_line(&mut self, session: &Session) -> Option<Exit> {
        let line = self.lines.ask(session.state_now(), Instant::now())?;
        if line.uninterruptible {
            self.turns.protect(Instant::now());
        }
        let prompt = say_prompt(WHY, &line.text);
        self.stream.send_text(prompt).await.err().map(|_| Exit::model_gone())
    }

    /// Once the line being said is over (after the core took the model's inputs that ended
    /// it), how it went is written down.
    pub(super) async fn line_ended(&mut self, session: &mut Session) -> Option<Exit> {
        let ended = self.lines.ended()?;
        let entry = ended.entry(session.id(), self.agent.core.name());
        self.apply(session, vec![Effect::Send(ended.message()), Effect::Transcript(entry)]).await
    }

    /// The line being said passed its time limit: it is abandoned (and no longer shuts
    /// the caller out), told, and the next line due may be asked for.
    pub(super) async fn line_overdue(&mut self, session: &mut Session) -> Option<Exit> {
        let now = Instant::now();
        if !self.lines.overdue(now) {
            return None;
        }
        tracing::warn!(
            agent = self.agent.core.name(),
            session_id = self.trace.session_id(),
            "a workflow line did not end within its time limit; abandoned"
        );
        self.turns.unprotect();
        if let Some(exit) = self.release_withheld().await {
            return Some(exit);
        }
        self.line_ended(session).await
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
                {"id": "plain", "say": {"text": "Next."}}
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
        let (mut lines, now) = (Lines::default(), Instant::now());
        lines.sent(&moved("disclose"), &workflow());
        assert_eq!(lines.ask(Some(SessionState::Speaking), now), None, "not over the reply under way");
        let line = lines.ask(Some(SessionState::Ready), now).expect("due");
        assert_eq!(line.text, "Calls are recorded.");
        assert!(line.uninterruptible);
        assert_eq!(lines.ask(Some(SessionState::Ready), now), None, "asked once");
        lines.heard(&Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }));
        assert_eq!(lines.ended(), None, "still being said");
        lines.heard(&Input::Voice(VoiceInput::AssistantFinal("Noted.".into())));
        assert_eq!(lines.ended(), None, "another reply's FINAL is not the line's");
        let said = Input::Voice(VoiceInput::AssistantFinal("calls are  recorded".into()));
        lines.heard(&said);
        let ended = lines.ended().expect("ended");
        assert_eq!((&ended.line, ended.played, &ended.reason), (&line, LinePlayed::Whole, &None));
        lines.heard(&said);
        assert_eq!(lines.ended(), None, "told once");
        assert_eq!(lines.deadline(), None, "nothing being said");
    }

    #[test]
    fn a_cut_line_is_told_and_leaving_a_node_before_its_line_drops_it() {
        let (mut lines, now) = (Lines::default(), Instant::now());
        lines.sent(&moved("disclose"), &workflow());
        let line = lines.ask(Some(SessionState::Ready), now).expect("due");
        lines.heard(&Input::Voice(VoiceInput::Interrupted));
        let ended = lines.ended().expect("ended");
        assert_eq!((ended.line, ended.played), (line, LinePlayed::Cut));

        lines.sent(&moved("disclose"), &workflow());
        lines.sent(&moved("start"), &workflow());
        assert_eq!(lines.ask(Some(SessionState::Ready), now), None, "the node with the line was left");
        lines.heard(&Input::Voice(VoiceInput::Interrupted));
        assert_eq!(lines.ended(), None, "no line was being said");
    }

    #[test]
    fn a_line_that_does_not_end_in_time_is_abandoned_and_the_next_is_said() {
        let (mut lines, now) = (Lines::default(), Instant::now());
        lines.sent(&moved("disclose"), &workflow());
        let first = lines.ask(Some(SessionState::Ready), now).expect("due");
        let limit = time_limit(&first.text);
        assert_eq!(lines.deadline(), Some(now + limit));
        lines.sent(&moved("plain"), &workflow());
        assert_eq!(lines.ask(Some(SessionState::Ready), now), None, "one line at a time");
        assert!(!lines.overdue(now + limit - Duration::from_millis(1)), "not before its limit");
        assert!(lines.overdue(now + limit));
        let ended = lines.ended().expect("abandoned");
        assert_eq!((&ended.line, ended.played), (&first, LinePlayed::Abandoned));
        let reason = ended.reason.clone().expect("a reason");
        assert!(reason.contains(&format!("({} s)", limit.as_secs())), "{reason}");
        let later = lines.ask(Some(SessionState::Ready), now + limit).expect("the next line is said");
        assert_eq!(later.text, "Next.");
        // The second line ends with its FINAL as any line.
        lines.heard(&Input::Voice(VoiceInput::AssistantFinal("Next.".into())));
        assert_eq!(lines.ended().map(|e| e.played), Some(LinePlayed::Whole));

        let message = ended.message();
        let text = message.to_json();
        assert!(text.starts_with(r#"{"type":"workflow_line""#), "{text}");
        assert!(text.contains(r#""played":"abandoned""#) && text.contains("time limit"), "{text}");
        let entry = ended.entry("s1", "triage");
        assert_eq!(entry.event, "workflow_line");
        assert_eq!((entry.data["played"].as_str(), entry.data["reason"].as_str()), (Some("abandoned"), Some(&*reason)));
    }

    #[test]
    fn the_time_limit_grows_with_the_line_and_stays_bounded() {
        assert_eq!(time_limit(""), START_PATIENCE);
        assert!(time_limit("Calls are recorded.") < time_limit(&"word ".repeat(40)));
        let longest = "a".repeat(switchboard_crds::workflow::MAX_NODE_LINE_CHARS);
        assert!(time_limit(&longest) < Duration::from_secs(90), "{:?}", time_limit(&longest));
        assert!(time_limit(&longest) > Duration::from_secs(60), "twice 30 s of speech and more");
    }
}
