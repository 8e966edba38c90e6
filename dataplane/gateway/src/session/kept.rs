//! What the gateway keeps of a session from the runtime's messages — pure, so each rule is
//! unit-tested: the memory (`memory_update`), the conversation (final transcript lines),
//! the handoff a runtime announced, the agent the session may return to, and the typed
//! inputs a runtime has not taken up yet.
//!
//! Typed inputs are tracked by id. The gateway gives each the session's next number as its
//! id, with the client's own id after a colon when it sent one (`7:abc`, or `7`): ids are
//! unique in the session whatever clients send (two tabs, a counter restarted on resume),
//! and the client's id comes back out of it. The runtime echoes the id on the line that
//! takes the input up (`input_id`); the gateway drops the input from those in flight and
//! hands the client its own id back (none when it sent none). A runtime that echoes no id
//! (an older one) is matched by text, as before ids.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchboard_core::grant::Carried;
use switchboard_core::handoff::{HandoffContext, HandoffKind, HistoryTurn, WorkflowSnapshot};
use switchboard_core::protocol::{
    ClientMessage, ErrorCode, ServerKind, ServerMessage, StopReason, TranscriptRole, decode_client,
};
use switchboard_crds::agent::USE_SKILL_TOOL;

/// History lines kept per session (oldest dropped first).
pub const MAX_HISTORY: usize = 200;
/// Memory keys kept per session.
pub const MAX_MEMORY_KEYS: usize = 256;
/// Typed inputs tracked per session (oldest dropped first).
pub const MAX_IN_FLIGHT: usize = 64;
/// Workflow nodes remembered as visited (oldest dropped first).
pub const MAX_VISITED: usize = 64;
/// Bytes of history text kept per session (oldest lines dropped first). A grant carries at
/// most [`switchboard_core::grant::MAX_PAYLOAD_BYTES`] anyway, compacted to fit.
pub const MAX_HISTORY_BYTES: usize = 128 * 1024;
/// Bytes of memory values (as JSON) kept per session; an update past it is not kept.
pub const MAX_MEMORY_BYTES: usize = 64 * 1024;
/// Bytes of typed inputs tracked per session (oldest dropped first).
pub const MAX_IN_FLIGHT_BYTES: usize = 128 * 1024;
/// The longest summary a session carries, in bytes: a continued session's summary keeps
/// its most recent part (`super::continuation`).
pub const MAX_SUMMARY_BYTES: usize = 8 * 1024;
/// The most a [`Kept`] holds in the bytes above: part of a session's memory budget.
pub const MAX_KEPT_BYTES: usize = MAX_HISTORY_BYTES + MAX_MEMORY_BYTES + MAX_IN_FLIGHT_BYTES + MAX_SUMMARY_BYTES;

/// A session's state as the gateway holds it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// The agent serving the session (names its workflow position).
    pub agent: String,
    /// Session memory. Shared with the snapshots taken of the session (a snapshot is
    /// taken with each typed input): an update copies it only while a snapshot holds it.
    pub memory: Arc<BTreeMap<String, serde_json::Value>>,
    /// The conversation, oldest first; its lines shared with snapshots, so that a snapshot
    /// copies pointers, not text.
    pub history: Vec<Arc<HistoryTurn>>,
    /// The agent the current one may return to (from the transfer that brought it).
    pub return_to: Option<String>,
    /// The target and context of a handoff the runtime announced, until it closes.
    #[serde(skip)]
    pub pending_handoff: Option<(String, HandoffContext)>,
    /// The runtime is answering a turn: from the user's input taken up (its final
    /// transcript line) or `bidi_response_start`, to `bidi_response_complete`.
    #[serde(skip)]
    pub turn_open: bool,
    /// The runtime ended its turn for a handoff (`stop_reason` `handoff`): the handoff
    /// message and its close follow.
    #[serde(skip)]
    pub handoff_expected: bool,
    /// The session's turn: user inputs taken up so far, across agents and pods. A handoff
    /// happens inside a turn, so its source and target log the same turn.
    pub turn: u64,
    /// Where the session is in the current agent's workflow (from its transitions).
    pub workflow: Option<WorkflowSnapshot>,
    /// Typed inputs sent to the runtime that it has not taken up yet (it echoes each as a
    /// final user transcript line when its turn begins; a busy agent queues them). A runtime
    /// that hands off or is lost takes its queue with it: these go to the next, by id.
    #[serde(deserialize_with = "in_flight")]
    pub in_flight: VecDeque<Arc<Typed>>,
    /// Typed inputs numbered so far in the session (the next one's id is this plus one).
    #[serde(default)]
    pub inputs: u64,
    /// What came before `history`, summarised: set when the session was continued from
    /// the conversation record (`session_start.continue_from`; see `super::continuation`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// When the call started, ms since the Unix epoch (this gateway's clock at its
    /// `session_start`): carried into each runtime session, so that the call's time limit
    /// counts from here across handoffs, pods and resumes. `None` in a session parked by an
    /// older gateway (set when it resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_started_at_ms: Option<u64>,
}

/// A typed input in flight: its id (the gateway's) and text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Typed {
    /// The gateway's id for it (see the module docs).
    pub id: String,
    /// What the user typed.
    pub text: String,
}

impl Typed {
    /// The frame that sends it to a runtime.
    pub fn frame(&self) -> String {
        let input = ClientMessage::BidiTextInput { text: self.text.clone(), id: Some(self.id.clone()) };
        serde_json::to_string(&input).unwrap_or_default()
    }

    fn bytes(&self) -> usize {
        self.id.len() + self.text.len()
    }
}

/// The id the gateway gives a session's `n`th typed input: `n`, then the client's own id
/// after a colon when it gave one.
fn gateway_id(n: u64, client: Option<&str>) -> String {
    match client {
        Some(id) => format!("{n}:{id}"),
        None => n.to_string(),
    }
}

/// The client's own id inside a gateway id (none when it gave none).
pub fn client_id(gateway_id: &str) -> Option<&str> {
    gateway_id.split_once(':').map(|(_, id)| id)
}

/// Inputs in flight as a parked session holds them; a session parked by a gateway from
/// before ids holds bare texts, given ids here that no numbered input has.
fn in_flight<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<VecDeque<Arc<Typed>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Typed(Typed),
        Text(String),
    }
    let stored = Vec::<Stored>::deserialize(deserializer)?;
    let typed = stored.into_iter().enumerate().map(|(i, input)| match input {
        Stored::Typed(typed) => Arc::new(typed),
        Stored::Text(text) => Arc::new(Typed { id: format!("earlier-{i}"), text }),
    });
    Ok(typed.collect())
}

/// Most skills a kept session remembers as in use (an Agent has at most 32).
const MAX_SKILLS: usize = 32;

/// The `inUse` list of a `use_skill` result: skill names, bounded in number and length;
/// `None` when the result has none (a refused call) or it is not a list of names.
fn skills_in_use(result: &serde_json::Value) -> Option<Vec<String>> {
    let names = result.get("inUse")?.as_array()?;
    let valid = |n: &&serde_json::Value| n.as_str().is_some_and(|s| !s.is_empty() && s.len() <= 63);
    if names.len() > MAX_SKILLS || !names.iter().all(|n| valid(&n)) {
        return None;
    }
    Some(names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
}

impl Kept {
    /// Notes what a runtime's message (its JSON text) tells about the session. A message
    /// that names a typed input by the gateway's id comes back, to be sent the client in
    /// place of the text: with the client's own id (or none).
    pub fn observe(&mut self, text: &str) -> Option<ServerMessage> {
        // Reply audio and streamed pieces are most of the traffic and carry no state: not
        // parsed (the runtime writes `type` first).
        if !carries_state(text) {
            return None;
        }
        let Ok(mut message) = serde_json::from_str::<ServerMessage>(text) else { return None };
        let echo = self.acknowledged(&mut message).then(|| message.clone());
        match message {
            ServerMessage::MemoryUpdate { key, value } => {
                if value.is_null() {
                    if self.memory.contains_key(&key) {
                        Arc::make_mut(&mut self.memory).remove(&key);
                    }
                } else if self.memory.len() < MAX_MEMORY_KEYS || self.memory.contains_key(&key) {
                    let others =
                        self.memory.iter().filter(|(k, _)| **k != key).map(|(k, v)| entry_bytes(k, v)).sum::<usize>();
                    if others + entry_bytes(&key, &value) <= MAX_MEMORY_BYTES {
                        Arc::make_mut(&mut self.memory).insert(key, value);
                    } else {
                        tracing::warn!(%key, "a memory update past the session's {MAX_MEMORY_BYTES} bytes of memory is not kept");
                    }
                }
            }
            ServerMessage::BidiTranscriptStream { role, text, delta: false, is_final: true, .. } => {
                if role == TranscriptRole::User {
                    // The user's input was taken up: its answer is under way.
                    self.turn_open = true;
                    self.turn += 1;
                }
                self.remember(HistoryTurn { role, text });
            }
            ServerMessage::Handoff { to, context, .. } => self.pending_handoff = Some((to, *context)),
            ServerMessage::WorkflowTransition { from, to, .. } => {
                let position = self.workflow.get_or_insert_with(|| WorkflowSnapshot {
                    agent: self.agent.clone(),
                    node: from.clone(),
                    visited: vec![from.clone()],
                    skills: Vec::new(),
                });
                if position.node.is_empty() {
                    // Skills were used before the first step: the session was at `from`.
                    (position.node, position.visited) = (from.clone(), vec![from]);
                }
                if position.visited.len() == MAX_VISITED {
                    position.visited.remove(0);
                }
                position.visited.push(to.clone());
                position.node = to;
                // A new step starts without skills in use (as the core's workflow state does).
                position.skills.clear();
            }
            ServerMessage::ToolComplete { name, result, .. } if name == USE_SKILL_TOOL => {
                if let Some(in_use) = skills_in_use(&result) {
                    // Before any step, the node is not known here: the runtime resumes at the entry.
                    let agent = self.agent.clone();
                    let position =
                        self.workflow.get_or_insert_with(|| WorkflowSnapshot { agent, ..Default::default() });
                    position.skills = in_use;
                }
            }
            ServerMessage::BidiResponseStart { .. } => self.turn_open = true,
            ServerMessage::BidiResponseComplete { stop_reason, .. } => {
                self.turn_open = false;
                self.handoff_expected = stop_reason == StopReason::Handoff;
            }
            _ => {}
        }
        echo
    }

    /// A typed input the message takes up (the user's final line) or refuses (`busy`) is
    /// no longer in flight. True when the message names it by id: that id is now the
    /// client's own (or none).
    fn acknowledged(&mut self, message: &mut ServerMessage) -> bool {
        let by_id = |in_flight: &VecDeque<Arc<Typed>>, id: &str| in_flight.iter().position(|t| t.id == id);
        let (input_id, at) = match message {
            ServerMessage::BidiTranscriptStream {
                role: TranscriptRole::User,
                text,
                delta: false,
                is_final: true,
                input_id,
            } => {
                let at = match input_id {
                    Some(id) => by_id(&self.in_flight, id),
                    // A runtime that echoes no id: the first input with this text.
                    None => self.in_flight.iter().position(|t| t.text == *text),
                };
                (input_id, at)
            }
            // The agent refused an input (too many waiting): it is not in flight. Without
            // an id, the newest.
            ServerMessage::BidiError { code: ErrorCode::Busy, input_id, .. } => {
                let at = match input_id {
                    Some(id) => by_id(&self.in_flight, id),
                    None => self.in_flight.len().checked_sub(1),
                };
                (input_id, at)
            }
            // Another refusal (`empty_text`): the input was never in flight.
            ServerMessage::BidiError { input_id, .. } => (input_id, None),
            _ => return false,
        };
        if let Some(at) = at {
            self.in_flight.remove(at);
        }
        let Some(id) = input_id.take() else { return false };
        *input_id = client_id(&id).map(str::to_owned);
        true
    }

    /// Notes a client frame for the runtime. A typed input gets the gateway's id and is
    /// tracked until the runtime takes it up, unless blank: returns the frame to send in
    /// its place, and whether it is tracked (else it is sent like any other message).
    /// None: not a typed input, sent as it is.
    pub fn track(&mut self, frame: &str) -> Option<(String, bool)> {
        if !frame.contains("bidi_text_input") {
            return None;
        }
        let Ok(ClientMessage::BidiTextInput { text, id }) = decode_client(frame) else { return None };
        self.inputs += 1;
        let typed = Typed { id: gateway_id(self.inputs, id.as_deref()), text };
        let frame = typed.frame();
        // A blank input is refused by the agent (`empty_text`), never taken up: nothing to
        // wait for or to send again.
        if typed.text.trim().is_empty() {
            return Some((frame, false));
        }
        self.in_flight.push_back(Arc::new(typed));
        while self.in_flight.len() > MAX_IN_FLIGHT
            || (self.in_flight.len() > 1
                && self.in_flight.iter().map(|t| t.bytes()).sum::<usize>() > MAX_IN_FLIGHT_BYTES)
        {
            self.in_flight.pop_front();
        }
        Some((frame, true))
    }

    /// Adds a line to the history, dropping the oldest past [`MAX_HISTORY`] lines or
    /// [`MAX_HISTORY_BYTES`] (the newest line always stays).
    fn remember(&mut self, line: HistoryTurn) {
        let history = &mut self.history;
        history.push(Arc::new(line));
        let mut bytes: usize = history.iter().map(|t| t.text.len()).sum();
        let mut drop = 0;
        while history.len() - drop > MAX_HISTORY || (history.len() - drop > 1 && bytes > MAX_HISTORY_BYTES) {
            bytes -= history[drop].text.len();
            drop += 1;
        }
        history.drain(..drop);
    }

    /// About how many bytes this holds (text of history, memory and typed inputs):
    /// at most [`MAX_KEPT_BYTES`] plus one line of each.
    pub fn bytes(&self) -> usize {
        self.history.iter().map(|t| t.text.len()).sum::<usize>()
            + self.memory.iter().map(|(k, v)| entry_bytes(k, v)).sum::<usize>()
            + self.in_flight.iter().map(|t| t.bytes()).sum::<usize>()
    }

    /// What the session carries into a runtime session opened for it on the same agent (a
    /// new pod, a resume): its memory, conversation, return target, workflow position,
    /// summary and the call's start. The one place what is kept becomes a [`Carried`].
    pub fn carried(&self) -> Carried {
        Carried {
            memory: (*self.memory).clone(),
            history: self.history.iter().map(|line| (**line).clone()).collect(),
            handoff: None,
            return_to: self.return_to.clone(),
            workflow: self.workflow.clone(),
            summary: self.summary.clone(),
            call_started_at_ms: self.call_started_at_ms,
        }
    }

    /// What the session carries into the runtime session of a handoff's target: the
    /// handoff (with its own memory and history), the summary and the call's start; the target's position
    /// and return target come from the handoff.
    pub fn carried_by(&self, handoff: HandoffContext) -> Carried {
        Carried {
            handoff: Some(handoff),
            summary: self.summary.clone(),
            call_started_at_ms: self.call_started_at_ms,
            ..Carried::default()
        }
    }

    /// The session moves on with `context`: its memory and history are the handing-over
    /// runtime's; a transfer's return target is kept only once the move succeeds, so it
    /// is returned.
    pub fn hand_over(&mut self, context: &HandoffContext) -> Option<String> {
        self.memory = Arc::new(context.memory.clone());
        self.history = context.history.iter().cloned().map(Arc::new).collect();
        context.return_to.clone().filter(|_| context.kind == HandoffKind::Transfer)
    }

    /// A handoff to `to` did not happen (`why`): the agent that asked for it stays with the
    /// caller and is told, as the last line of the conversation it is reopened with, so its
    /// next answer does not go on as if the caller had been transferred.
    pub fn handoff_failed(&mut self, to: &str, why: &str) {
        let text = format!(
            "[The transfer to {to} did not happen: {why}. The caller is still with me; I tell them and go on helping.]"
        );
        self.remember(HistoryTurn { role: TranscriptRole::Assistant, text });
    }

    /// The tracked inputs, as the frames to send the next runtime (with their ids).
    pub fn replay(&self) -> impl Iterator<Item = String> + '_ {
        self.in_flight.iter().map(|t| t.frame())
    }
}

/// A memory entry's size: its key and its value as JSON.
fn entry_bytes(key: &str, value: &serde_json::Value) -> usize {
    key.len() + value.to_string().len()
}

/// Whether a runtime message may change what is kept, judged by its kind (and, for
/// transcripts, finality) without parsing it. Texts with no kind are parsed, to be safe.
fn carries_state(text: &str) -> bool {
    match ServerKind::peek(text) {
        Some(ServerKind::TranscriptStream) => text.contains(r#""is_final":true"#),
        // Of tool results, only use_skill's tells about the session: the skills in use.
        Some(ServerKind::ToolComplete) => text.contains(r#""name":"use_skill""#),
        Some(kind) => kind.carries_state(),
        None => true,
    }
}

#[cfg(test)]
mod tests;
