//! What a caller asks for with `POST /v1/calls` ([`PlaceRequest`]), the checks on it, and
//! why a call is not taken ([`CallError`], with its HTTP status and code).

use std::collections::BTreeMap;

/// Variables of one call at most.
pub const MAX_VARIABLES: usize = 32;
/// Bytes of one variable's value at most (names: 1-64 letters, digits, `_`).
pub const MAX_VARIABLE_BYTES: usize = 1024;

/// What a caller asks for (`POST /v1/calls`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaceRequest {
    /// Whom to call: E.164 or a SIP URI.
    pub to: String,
    /// The agent that talks when the callee answers.
    pub agent: String,
    /// Variables for the session's context.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    /// The outbound trunk by name (an edge's `--outbound-trunk NAME=URI`); absent: the
    /// edge's default trunk.
    #[serde(default)]
    pub trunk: Option<String>,
    /// Where the call's progress is POSTed ([`super::webhook`]); absent: nowhere (read it
    /// with `GET /v1/calls/{id}`).
    #[serde(default, rename = "statusCallback")]
    pub status_callback: Option<String>,
}

/// Why a call is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The request is malformed (400).
    #[error("{0}")]
    Invalid(String),
    /// The credential places calls faster than its rate (429).
    #[error("this credential places more than {0} calls a minute; wait and try again")]
    Rate(u32),
    /// As many calls are under way as allowed (429).
    #[error("{0} outbound calls are under way, the most this gateway places at once; try again when one ends")]
    AtCapacity(usize),
    /// No SIP edge that places calls is connected (503).
    #[error(
        "no SIP edge that places calls is connected to this gateway (start `switchboard sip` with --outbound-trunk \
         and --gateway pointing here)"
    )]
    NoEdge,
    /// No connected edge has the trunk the call names (404).
    #[error("no connected SIP edge has an outbound trunk named {name:?}; the trunks are: {}", known.join(", "))]
    UnknownTrunk {
        /// The name asked for.
        name: String,
        /// The trunks the connected edges have.
        known: Vec<String>,
    },
}

impl CallError {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Self::Invalid(_) => 400,
            Self::Rate(_) | Self::AtCapacity(_) => 429,
            Self::NoEdge => 503,
            Self::UnknownTrunk { .. } => 404,
        }
    }

    /// A stable code for the JSON error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid_call",
            Self::Rate(_) => "call_rate",
            Self::AtCapacity(_) => "calls_at_capacity",
            Self::NoEdge => "no_sip_edge",
            Self::UnknownTrunk { .. } => "unknown_trunk",
        }
    }
}

/// Checks the variables: names of 1-64 letters, digits and `_`, values of at most
/// [`MAX_VARIABLE_BYTES`], at most [`MAX_VARIABLES`].
pub fn check_variables(variables: &BTreeMap<String, String>) -> Result<(), CallError> {
    if variables.len() > MAX_VARIABLES {
        return Err(CallError::Invalid(format!("{} variables; at most {MAX_VARIABLES}", variables.len())));
    }
    for (name, value) in variables {
        let good = (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !good {
            let shown: String = name.chars().take(64).collect();
            return Err(CallError::Invalid(format!("variable name {shown:?}: 1-64 letters, digits and '_'")));
        }
        if value.len() > MAX_VARIABLE_BYTES {
            return Err(CallError::Invalid(format!("variable {name}: its value is over {MAX_VARIABLE_BYTES} bytes")));
        }
    }
    Ok(())
}
