//! What the runner saw: the messages of one turn with the time each arrived ([`Turn`]),
//! how the turn ended, the consent requests it answered, and the session as the messages
//! describe it ([`SessionView`]: the serving agent, memory, workflow node). Pure: the
//! runner ([`super::run`]) feeds it, the expectations ([`super::expect`]) read it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, TranscriptRole};

use super::file::{ConsentAnswer, Memory};

/// A protocol message could not be read (the one error of this module).
#[derive(Debug, thiserror::Error)]
#[error("the server sent a frame that is not a session protocol message: {0}")]
pub struct ObserveError(pub String);

/// One message and when it arrived, counted from the moment the caller's text was sent.
#[derive(Clone, Debug)]
pub struct Event {
    /// Since the turn began.
    pub at: Duration,
    /// The message; `None` for a frame of a type this runner does not know (kept as text).
    pub message: Option<ServerMessage>,
    /// The frame's text when it is not a known message.
    pub raw: Option<String>,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The agent finished answering (`bidi_response_complete` after any handoffs), or
    /// reported an error and went quiet.
    Answered,
    /// The server closed the connection.
    Closed {
        /// The close code.
        code: u16,
        /// The close reason.
        reason: String,
    },
    /// Nothing ended the turn within the scenario's turn timeout.
    TimedOut(Duration),
}

/// A consent request of the turn and the answer the runner gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsentSeen {
    /// The tool asking.
    pub tool: String,
    /// The answer given.
    pub answer: ConsentAnswer,
}

/// Everything one turn produced.
#[derive(Clone, Debug)]
pub struct Turn {
    /// What the caller said (empty for the opening).
    pub said: String,
    /// The messages, in order.
    pub events: Vec<Event>,
    /// How it ended.
    pub end: TurnEnd,
    /// When the message that ended it arrived.
    pub ended_at: Option<Duration>,
    /// Consent requests answered during the turn.
    pub consents: Vec<ConsentSeen>,
}

impl Turn {
    /// A turn that has just begun.
    pub fn new(said: impl Into<String>) -> Self {
        Self { said: said.into(), events: Vec::new(), end: TurnEnd::Answered, ended_at: None, consents: Vec::new() }
    }

    /// The known messages of the turn.
    pub fn messages(&self) -> impl Iterator<Item = &ServerMessage> {
        self.events.iter().filter_map(|e| e.message.as_ref())
    }

    /// The agent's complete messages (final assistant transcripts), in order.
    pub fn replies(&self) -> Vec<&str> {
        self.messages()
            .filter_map(|m| match m {
                ServerMessage::BidiTranscriptStream {
                    role: TranscriptRole::Assistant, text, is_final: true, ..
                } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// When the agent's first streamed text (or audio) arrived.
    pub fn first_token(&self) -> Option<Duration> {
        self.events.iter().find_map(|e| match &e.message {
            Some(ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, .. })
            | Some(ServerMessage::BidiAudioStream { .. }) => Some(e.at),
            _ => None,
        })
    }

    /// When the agent's first complete message arrived.
    pub fn first_text(&self) -> Option<Duration> {
        self.events.iter().find_map(|e| match &e.message {
            Some(ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, is_final: true, .. }) => {
                Some(e.at)
            }
            _ => None,
        })
    }

    /// The turn as transcript lines a person reads: what was said and done, without the
    /// streamed pieces.
    pub fn lines(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match (&e.message, &e.raw) {
                (Some(message), _) => describe(message).map(|line| format!("{:>6} ms  {line}", e.at.as_millis())),
                (None, Some(raw)) => Some(format!("{:>6} ms  [unknown message] {raw}", e.at.as_millis())),
                (None, None) => None,
            })
            .collect()
    }
}

/// One line for a message worth showing, as `switchboard chat` prints it.
pub fn describe(message: &ServerMessage) -> Option<String> {
    Some(match message {
        ServerMessage::BidiConnectionStart { agent, candidate: true, .. } => {
            format!("[connected to {agent} (candidate)]")
        }
        ServerMessage::BidiConnectionStart { agent, .. } => format!("[connected to {agent}]"),
        ServerMessage::BidiTranscriptStream { role, text, is_final: true, .. } => match role {
            TranscriptRole::User => format!("> {text}"),
            TranscriptRole::Assistant => format!("< {text}"),
        },
        ServerMessage::ToolStart { name, input, .. } => format!("[tool {name} {input}]"),
        ServerMessage::ToolComplete { name, result, cached, .. } => {
            format!("[tool {name} -> {result}{}]", if *cached { " (cached)" } else { "" })
        }
        ServerMessage::ToolError { name, kind, message, .. } => format!("[tool {name} failed ({kind}): {message}]"),
        ServerMessage::ConsentRequest { name, input, .. } => format!("[consent asked: {name} {input}]"),
        ServerMessage::Handoff { from, to, kind, .. } => format!("[handoff {kind:?}: {from} -> {to}]"),
        ServerMessage::MemoryUpdate { key, value } => format!("[memory {key} = {value}]"),
        ServerMessage::WorkflowTransition { from, to, by } => format!("[step {from} -> {to} ({by})]"),
        ServerMessage::WorkflowLine { node, played, .. } => format!("[line of {node}: {}]", played.as_str()),
        ServerMessage::BidiError { message, code, .. } => format!("[error {code}: {message}]"),
        ServerMessage::BidiConnectionClose { reason } => format!("[session closed: {reason}]"),
        ServerMessage::BidiConnectionRestart { reason, .. } => format!("[connection restarted: {reason}]"),
        _ => return None,
    })
}

/// The session as the messages so far describe it.
#[derive(Clone, Debug, Default)]
pub struct SessionView {
    /// The agent serving the session.
    pub agent: Option<String>,
    /// Session memory.
    pub memory: Memory,
    /// The workflow node; `None` when unknown.
    pub node: Option<String>,
    /// Each agent's workflow entry node, when the agents are known.
    entries: BTreeMap<String, String>,
    /// The agents a test of held rollouts expects at their candidate pods (`--candidate`).
    candidates: BTreeSet<String>,
    /// The first of those its live pods served instead.
    pub off_candidate: Option<String>,
}

impl SessionView {
    /// A view that knows each agent's entry node (`agent -> node`), and the agents that
    /// must be served by their candidate pods.
    pub fn new(entries: BTreeMap<String, String>, candidates: BTreeSet<String>) -> Self {
        Self { entries, candidates, ..Self::default() }
    }

    /// Takes in one message.
    pub fn observe(&mut self, message: &ServerMessage) {
        match message {
            ServerMessage::BidiConnectionStart { agent, candidate, .. } => {
                let name = bare(agent);
                self.node = self.entries.get(name).cloned();
                self.agent = Some(name.to_owned());
                if !candidate && self.candidates.contains(name) && self.off_candidate.is_none() {
                    self.off_candidate = Some(name.to_owned());
                }
            }
            ServerMessage::MemoryUpdate { key, value } if value.is_null() => {
                self.memory.remove(key);
            }
            ServerMessage::MemoryUpdate { key, value } => {
                self.memory.insert(key.clone(), value.clone());
            }
            ServerMessage::WorkflowTransition { to, .. } => self.node = Some(to.clone()),
            _ => {}
        }
    }
}

/// An agent's name without its namespace (`bank/triage` -> `triage`).
pub fn bare(agent: &str) -> &str {
    agent.rsplit_once('/').map_or(agent, |(_, name)| name)
}

/// Parses one text frame; a frame of an unknown type is kept as text, so a newer server's
/// messages do not stop the runner.
pub fn parse(text: &str) -> Result<(Option<ServerMessage>, Option<String>), ObserveError> {
    match serde_json::from_str::<ServerMessage>(text) {
        Ok(message) => Ok((Some(message), None)),
        Err(_) if serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("type").is_some()) => {
            Ok((None, Some(text.to_owned())))
        }
        Err(_) => Err(ObserveError(text.chars().take(200).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_expected_at_its_candidate_is_noted_only_when_its_live_pods_serve_it() {
        let mut view = SessionView::new(BTreeMap::new(), ["banking".to_owned()].into());
        let start = |agent: &str, candidate: bool| ServerMessage::BidiConnectionStart {
            session_id: "s".into(),
            agent: agent.into(),
            mode: "text".into(),
            model: "m".into(),
            resume_token: None,
            seq: None,
            candidate,
        };
        view.observe(&start("triage", false));
        view.observe(&start("bank/banking", true));
        assert_eq!(view.off_candidate, None, "triage has no candidate; banking's served");
        assert_eq!(describe(&start("banking", true)).as_deref(), Some("[connected to banking (candidate)]"));
        view.observe(&start("banking", false));
        assert_eq!(view.off_candidate.as_deref(), Some("banking"));
    }

    #[test]
    fn the_view_follows_agents_memory_and_nodes() {
        let mut view = SessionView::new([("idv".to_owned(), "collect".to_owned())].into(), ["idv".to_owned()].into());
        let start = |agent: &str| {
            let json = serde_json::json!({"type": "bidi_connection_start", "session_id": "s", "agent": agent, "mode": "text", "model": "m"});
            serde_json::from_value::<ServerMessage>(json).expect("a connection start")
        };
        view.observe(&start("bank/idv"));
        assert_eq!((view.agent.as_deref(), view.node.as_deref()), (Some("idv"), Some("collect")));
        // idv was to be served by its candidate pods, and its live pods were.
        assert_eq!(view.off_candidate.as_deref(), Some("idv"));
        view.observe(&ServerMessage::MemoryUpdate { key: "k".into(), value: serde_json::json!(1) });
        view.observe(&ServerMessage::WorkflowTransition {
            from: "collect".into(),
            to: "verify".into(),
            by: "model".into(),
        });
        assert_eq!(view.node.as_deref(), Some("verify"));
        view.observe(&start("triage"));
        assert_eq!((view.agent.as_deref(), view.node.as_deref()), (Some("triage"), None), "no entry known");
        assert_eq!(view.memory.get("k"), Some(&serde_json::json!(1)), "memory follows the session");
        view.observe(&ServerMessage::MemoryUpdate { key: "k".into(), value: serde_json::Value::Null });
        assert!(view.memory.is_empty());
    }

    #[test]
    fn unknown_message_types_are_kept_and_garbage_is_an_error() {
        assert!(matches!(parse(r#"{"type":"bidi_interruption"}"#), Ok((Some(_), None))));
        assert!(matches!(parse(r#"{"type":"from_the_future","x":1}"#), Ok((None, Some(_)))));
        assert!(parse("not json").is_err());
    }
}
