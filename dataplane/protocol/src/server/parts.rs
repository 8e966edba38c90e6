//! The small types [`super::ServerMessage`]'s messages carry: usage by modality, the
//! outage fallback's person, how a workflow line was played.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Token counts by direction and modality.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokensByModality {
    /// Speech tokens read.
    pub input_speech: u64,
    /// Text tokens read.
    pub input_text: u64,
    /// Speech tokens generated.
    pub output_speech: u64,
    /// Text tokens generated.
    pub output_text: u64,
}

/// The person an outage fallback puts the caller through to (`bidi_session_fallback`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FallbackPerson {
    /// Their name in the Agent (`spec.telephony.people[].name`).
    pub name: String,
    /// Where they are: an E.164 number or a `sip:`/`sips:` URI.
    pub address: String,
}

/// How a workflow node's spoken line went (`workflow_line`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinePlayed {
    /// Said to the end (its FINAL text came).
    Whole,
    /// The caller interrupted it.
    Cut,
    /// It did not end within its time limit (the model did not say it, or not to the end):
    /// later lines are said, and `reason` says why.
    Abandoned,
}

impl LinePlayed {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Cut => "cut",
            Self::Abandoned => "abandoned",
        }
    }
}
