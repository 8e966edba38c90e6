//! The one effect performer of a session, text or voice: the core's effects that both
//! drivers perform alike are performed here, once — a message the session sends is traced,
//! counted (an error by its code) and, when it changes memory, shown to the caller's
//! identity; a tool call starts (its span's `traceparent` going to the tool server); a
//! handoff is counted and ends the session; a transcript line is written; a close ends the
//! session; a summary is asked for beside the conversation. What only the medium can do
//! comes back as a [`Medium`] effect: the send itself (text waits on the socket, voice
//! mutes and bounds its wait), model calls (text), the voice stream's effects (voice) and
//! cancelling (each stops what it has under way).

use switchboard_core::model::ModelRequest;
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{Effect, VoiceEffect};

use super::agent::{AgentRuntime, Exit, Shared};
use super::identity::SessionIdentity;
use super::summaries::Summaries;
use super::tool_calls::ToolCalls;
use super::trace::SessionTrace;

/// What a session performs its effects with, borrowed from its driver for one effect.
#[derive(Debug)]
pub(super) struct Performer<'s> {
    /// The session's agent.
    pub agent: &'s AgentRuntime,
    /// What every session shares: metrics, transcripts, retries, redaction.
    pub shared: &'s Shared,
    /// The session's running tool calls.
    pub tools: &'s mut ToolCalls,
    /// The verified caller's identity assertion.
    pub identity: &'s mut SessionIdentity,
    /// The session's trace.
    pub trace: &'s mut SessionTrace,
    /// The summaries asked for beside the conversation.
    pub summaries: &'s mut Summaries,
}

/// How an effect was performed.
#[derive(Debug)]
pub(super) enum Performed {
    /// It was.
    Done,
    /// It ends the session, once the rest of its batch is performed.
    Ends(Exit),
    /// Only the session's medium can perform it.
    Medium(Medium),
}

/// The effects only a medium performs.
#[derive(Debug)]
pub(super) enum Medium {
    /// Send this message to the client (already traced and counted).
    Send(ServerMessage),
    /// Call the text model.
    CallModel(ModelRequest),
    /// What only a voice stream does.
    Voice(VoiceEffect),
    /// Stop what the cancelled turn had under way.
    Cancel,
}

impl Performer<'_> {
    /// Performs `effect` where sessions perform it alike; hands back what only the medium can.
    pub(super) fn perform(mut self, effect: Effect) -> Performed {
        match effect {
            Effect::Send(message) => {
                self.sending(&message);
                Performed::Medium(Medium::Send(message))
            }
            Effect::ExecuteTool { tool_use_id, tool, input } => {
                let traceparent = self.trace.tool_traceparent(&tool_use_id);
                self.tools.start(self.agent, tool_use_id, tool, input, traceparent);
                Performed::Done
            }
            Effect::Handoff(request) => Performed::Ends(self.shared.handoff(self.agent, request)),
            Effect::Transcript(entry) => {
                if entry.event == "keypad" {
                    // How many keys, never which (the transcript line holds no more).
                    let (tool, outcome) = (entry.data["name"].as_str(), entry.data["outcome"].as_str());
                    let keys = entry.data["keys"].as_u64();
                    tracing::info!(session_id = %entry.session_id, tool, outcome, keys, "keypad input");
                }
                self.shared.metrics.transcribed(self.agent.core.spec(), &entry);
                self.shared.transcript(entry);
                Performed::Done
            }
            Effect::Close { reason } => Performed::Ends(Exit::Closed(reason)),
            Effect::Summarize { id, request } => {
                self.summaries.start(self.agent, self.shared, self.trace.session_id(), id, request);
                Performed::Done
            }
            Effect::CallModel(request) => Performed::Medium(Medium::CallModel(request)),
            Effect::Voice(effect) => Performed::Medium(Medium::Voice(effect)),
            Effect::Cancel => Performed::Medium(Medium::Cancel),
        }
    }

    /// Notes a message the session sends: its trace, the metrics (an error by its code),
    /// and the caller's identity when it changes memory.
    fn sending(&mut self, message: &ServerMessage) {
        self.trace.message(message);
        self.shared.metrics.sent(self.agent.core.spec(), message);
        if let ServerMessage::MemoryUpdate { key, value } = message {
            self.identity.memory_changed(key, value);
        }
        if let ServerMessage::BidiError { code, .. } = message {
            let code = code.metric_label();
            self.shared.metrics.errors.with_label_values(&[self.agent.core.name(), code]).inc();
        }
    }
}
