//! The `Persona` resource: how an agent sounds and speaks.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ResourceStatus;

pub mod languages;
pub mod turn_taking;

pub use languages::Language;
pub use turn_taking::TurnTaking;

/// How an agent sounds and speaks: its name, system prompt, voice, language and style.
/// Several Agents may share one Persona.
// kube's printcolumn(...) arguments repeat `type_ = "string"`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "switchboard.dev",
    version = "v1alpha1",
    kind = "Persona",
    namespaced,
    status = "ResourceStatus",
    shortname = "sbpersona",
    category = "switchboard",
    doc = "How a Switchboard agent sounds and speaks: display name, system prompt template, Nova Sonic voice, language, greeting and response style.",
    printcolumn(name = "Voice", type_ = "string", json_path = ".spec.voice"),
    printcolumn(name = "Language", type_ = "string", json_path = ".spec.language"),
    printcolumn(name = "Accepted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Accepted\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PersonaSpec {
    /// The name the agent introduces itself with, e.g. "Ava from Example Bank".
    /// Available in the prompt template as `{name}`.
    #[schemars(length(min = 1, max = 128))]
    pub display_name: String,

    /// The system prompt template. Placeholders: `{name}` (display name), `{agent}` (the
    /// Agent's name), `{memory}` (what the session knows, e.g. the verified user), `{date}`
    /// (today, ISO 8601), `{language}`, `{role}` and `{description}` (the Agent's),
    /// `{skills}` (the Agent's skills), `{examples}` (their examples) and `{dataContext}` (the
    /// data context in force). Write `{{` and `}}` for literal braces. Any other
    /// placeholder is rejected.
    #[schemars(length(min = 1, max = 32768))]
    pub system_prompt: String,

    /// Nova Sonic voice id, e.g. `matthew`, `tiffany`, `amy`. Used in voice and hybrid modes.
    #[serde(default = "default_voice")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z][a-z0-9_-]*$"))]
    pub voice: String,

    /// The language the agent speaks, as a BCP 47 tag such as `en-US` or `en-GB`.
    #[serde(default = "default_language")]
    #[schemars(regex(pattern = r"^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})*$"))]
    pub language: String,

    /// Other languages the agent speaks on a call, each with its Nova Sonic voice, e.g.
    /// `[{code: es-US, voice: lupe}]`. A call starts in `language` with `voice`; when the
    /// caller speaks one of these instead (told from their words), the agent switches to it
    /// for the rest of the call — its voice, and its system prompt tells the model to speak
    /// that language — and back the same way. At most 8; English, Spanish, French, German,
    /// Italian, Portuguese and Hindi, each once, none the Persona's own `language`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub languages: Vec<Language>,

    /// What the agent says when a session starts, before the user says anything. When
    /// empty the agent waits for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub greeting: Option<String>,

    /// Whether a session with audio (voice, or hybrid with `audio` among the client's
    /// modalities) opens with the agent speaking its `greeting` aloud, in its own voice,
    /// before the caller says anything: Nova Sonic is asked to say it as the assistant's
    /// first turn, and its words reach the client as reply audio and a final assistant
    /// transcript. A caller transferred to this agent by another is greeted the same way
    /// (spoken in this agent's voice, or as the first line in text) before the agent answers
    /// the request they brought; a caller returned to it is not greeted again. Default
    /// `false`: the greeting is a transcript line of new sessions only, the agent listens
    /// first, and a transferred caller's request is answered at once. Without a `greeting`
    /// it has no effect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub speak_first: bool,

    /// How replies are phrased. `voiceFriendly` (the default) keeps replies short, spoken
    /// and free of markdown; `conversational` allows a little more length; `detailed`
    /// allows long, structured answers (text mode).
    #[serde(default)]
    pub response_style: ResponseStyle,

    /// How the agent takes turns on a call (sessions with audio): how long the caller must
    /// speak over it before it stops (shorter backchannels such as "mm-hm" do not cut a
    /// reply), whether the greeting is played whole, what it does when the line goes quiet
    /// (re-prompts, then a polite end), and the longest a call may last (a spoken warning,
    /// then a polite end). The defaults suit a phone line; see the field docs.
    #[serde(default, skip_serializing_if = "TurnTaking::is_default")]
    pub turn_taking: TurnTaking,
}

/// How an agent phrases its replies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ResponseStyle {
    /// Short spoken sentences, no markdown, numbers written as they are said.
    #[default]
    VoiceFriendly,
    /// Natural, moderately short replies.
    Conversational,
    /// Longer, structured answers; markdown allowed.
    Detailed,
}

impl ResponseStyle {
    /// The guidance appended to the system prompt for this style.
    pub fn guidance(self) -> &'static str {
        match self {
            ResponseStyle::VoiceFriendly => {
                "Reply in one to three short spoken sentences. Do not use markdown, lists or emoji. Say numbers the way a person would say them aloud."
            }
            ResponseStyle::Conversational => "Reply naturally and briefly, in plain sentences without markdown.",
            ResponseStyle::Detailed => "Reply completely; you may use short markdown lists where they help.",
        }
    }
}

/// The placeholders a system prompt template may contain.
pub const TEMPLATE_PLACEHOLDERS: &[&str] =
    &["name", "agent", "memory", "date", "language", "role", "description", "skills", "examples", "dataContext"];

pub(crate) fn default_voice() -> String {
    "matthew".to_owned()
}

pub(crate) fn default_language() -> String {
    "en-US".to_owned()
}
