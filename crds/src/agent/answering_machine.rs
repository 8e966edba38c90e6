//! `spec.telephony.answeringMachine`: answering-machine detection on the Agent's outbound
//! calls, and what the call does when a machine answers. The SIP edge listens to the first
//! seconds of the answered call before the agent speaks: a short greeting then silence is a
//! person, a long monologue is a machine (`switchboard_sip::media::amd` holds the rules).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The bounds of each setting, checked by the validation and written in the schema.
pub const GREETING_MAX_MILLIS: std::ops::RangeInclusive<u32> = 1000..=10_000;
/// See [`AnsweringMachine::silence_after_greeting_millis`].
pub const SILENCE_AFTER_GREETING_MILLIS: std::ops::RangeInclusive<u32> = 300..=3000;
/// See [`AnsweringMachine::decision_timeout_millis`].
pub const DECISION_TIMEOUT_MILLIS: std::ops::RangeInclusive<u32> = 2000..=15_000;
/// See [`AnsweringMachine::beep_timeout_seconds`].
pub const BEEP_TIMEOUT_SECONDS: std::ops::RangeInclusive<u32> = 1..=120;
/// The longest [`AnsweringMachine::message`], in characters.
pub const MESSAGE_MAX_CHARS: usize = 1000;

/// What an outbound call does when a machine answers it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnMachine {
    /// Wait for the voicemail beep (or the silence after the machine's greeting), then start
    /// the agent's session, so the recording holds its greeting and message whole.
    #[default]
    LeaveMessage,
    /// Hang up (BYE) without starting a session.
    HangUp,
}

impl AnsweringMachine {
    /// The message to leave on a machine, when the Agent declares one and leaves messages.
    pub fn message_to_leave(&self) -> Option<&str> {
        self.message.as_deref().filter(|_| self.on_machine == OnMachine::LeaveMessage)
    }
}

impl OnMachine {
    /// Its name in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeaveMessage => "leaveMessage",
            Self::HangUp => "hangUp",
        }
    }
}

/// Answering-machine detection on the Agent's outbound calls. Present: every outbound call
/// of the Agent is listened to first (the callee's first words decide `human`, `machine`
/// or `unknown`; a person or `unknown` gets the agent at once); absent: the agent talks as
/// soon as the call is answered.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnsweringMachine {
    /// What to do when a machine answers: `leaveMessage` (default: the agent starts after
    /// the beep and says `message`, or its Persona's greeting without one) or `hangUp`.
    #[serde(default)]
    pub on_machine: OnMachine,
    /// With `leaveMessage`: what the agent says on the machine after the beep, in place of
    /// its Persona's greeting (at most 1000 characters; absent: the greeting is the message).
    /// A person who answers hears the greeting as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1000))]
    pub message: Option<String>,
    /// Speech that goes on this long (ms) is a machine's greeting (1000-10000; default
    /// 2500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1000, max = 10000))]
    pub greeting_max_millis: Option<u32>,
    /// Silence this long (ms) after a short greeting makes it a person's (300-3000;
    /// default 800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 300, max = 3000))]
    pub silence_after_greeting_millis: Option<u32>,
    /// No decision this long (ms) after the answer: `unknown`, and the agent talks
    /// (2000-15000; default 5000; above `greetingMaxMillis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2000, max = 15000))]
    pub decision_timeout_millis: Option<u32>,
    /// With `leaveMessage`: how long after the machine verdict to wait for the beep before
    /// the message starts anyway (1-120 s; default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 120))]
    pub beep_timeout_seconds: Option<u32>,
}
