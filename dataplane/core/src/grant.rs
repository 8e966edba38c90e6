//! Session context that only the gateway may give a runtime: memory (a verified caller),
//! earlier conversation and handoff state. It travels in `session_start.context` as a
//! [`SignedContext`]: the context's JSON text and an HMAC-SHA256 over exactly those bytes,
//! made with a key the gateway and the runtimes share (a per-install Secret, never sent on
//! the wire). A runtime restores nothing it cannot verify: the MAC, that the grant names
//! its agent, and that it is fresh ([`MAX_AGE_MS`]). Replays inside that window are the
//! runtime's to refuse (each grant carries a random `nonce`).
//!
//! Pure: the caller supplies the time and the nonce.

use std::collections::BTreeMap;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::handoff::{HandoffContext, HistoryTurn};

/// How old a grant may be when a runtime checks it (and how far in the future, for clocks
/// that disagree a little).
pub const MAX_AGE_MS: u64 = 60_000;
/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;
/// The largest signed payload a runtime reads (memory and history are bounded by it).
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// What the gateway tells a runtime about the session it opens there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionContext {
    /// The gateway's id of the session (stable across handoffs, pods and resumes).
    pub session_id: String,
    /// The agent the grant is for; another agent's runtime refuses it.
    pub agent: String,
    /// When the gateway made the grant, milliseconds since the Unix epoch.
    pub issued_at_ms: u64,
    /// Random, unique per grant: a runtime accepts each once.
    pub nonce: String,
    /// Session memory (e.g. `verifiedUser`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Earlier conversation, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryTurn>,
    /// Set when the session arrives through a handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffContext>,
    /// A session moved here without a handoff keeps the agent it may return to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_to: Option<String>,
}

/// A [`SessionContext`] as sent: its JSON text and the MAC over it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedContext {
    /// The context's JSON text, exactly as signed.
    pub payload: String,
    /// HMAC-SHA256 of `payload`, lower-case hex.
    pub mac: String,
}

/// Why a runtime refuses a grant. The messages are for logs and the gateway's operator;
/// each says what to check.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The MAC does not match: another key, or the payload was changed.
    #[error("the session context's signature is not valid; the gateway and this runtime must share the same key")]
    BadSignature,
    /// The payload is too large.
    #[error("the session context is {0} bytes, more than the limit of {MAX_PAYLOAD_BYTES}")]
    TooLarge(usize),
    /// The payload is not a context.
    #[error("the session context is malformed: {0}")]
    Malformed(String),
    /// Made for another agent.
    #[error("the session context is for agent {granted:?}, not {serving:?}")]
    WrongAgent {
        /// The agent named in the grant.
        granted: String,
        /// The agent this runtime serves.
        serving: String,
    },
    /// Too old or from the future.
    #[error("the session context was issued {age_ms} ms from now, outside ±{MAX_AGE_MS} ms; check the clocks")]
    Stale {
        /// How far from now it was issued.
        age_ms: u64,
    },
    /// A key too short to be safe.
    #[error("the gateway key has {0} bytes; at least {MIN_KEY_BYTES} are required")]
    ShortKey(usize),
}

/// The shared key. Its `Debug` output never shows the bytes.
#[derive(Clone)]
pub struct ContextKey(Vec<u8>);

impl std::fmt::Debug for ContextKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContextKey({} bytes, redacted)", self.0.len())
    }
}

impl ContextKey {
    /// A key from its bytes (e.g. a Secret file's contents, trailing whitespace removed).
    pub fn new(bytes: &[u8]) -> Result<Self, GrantError> {
        let trimmed = bytes.trim_ascii_end();
        if trimmed.len() < MIN_KEY_BYTES {
            return Err(GrantError::ShortKey(trimmed.len()));
        }
        Ok(Self(trimmed.to_vec()))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length: this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("HMAC takes any key"))
    }

    /// Signs `context`.
    pub fn sign(&self, context: &SessionContext) -> SignedContext {
        // Every field is a String, number, map of JSON values or plain struct: this cannot fail.
        let payload = serde_json::to_string(context).unwrap_or_default();
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        SignedContext { mac: hex::encode(mac.finalize().into_bytes()), payload }
    }

    /// Checks `signed` for the runtime serving `agent` at `now_ms` and returns its context.
    pub fn verify(&self, signed: &SignedContext, agent: &str, now_ms: u64) -> Result<SessionContext, GrantError> {
        if signed.payload.len() > MAX_PAYLOAD_BYTES {
            return Err(GrantError::TooLarge(signed.payload.len()));
        }
        let tag = hex::decode(&signed.mac).map_err(|_| GrantError::BadSignature)?;
        let mut mac = self.mac();
        mac.update(signed.payload.as_bytes());
        mac.verify_slice(&tag).map_err(|_| GrantError::BadSignature)?;
        let context: SessionContext =
            serde_json::from_str(&signed.payload).map_err(|e| GrantError::Malformed(e.to_string()))?;
        if context.agent != agent {
            return Err(GrantError::WrongAgent { granted: context.agent, serving: agent.to_owned() });
        }
        let age_ms = now_ms.abs_diff(context.issued_at_ms);
        if age_ms > MAX_AGE_MS {
            return Err(GrantError::Stale { age_ms });
        }
        Ok(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> ContextKey {
        ContextKey::new(&[byte; 32]).expect("long enough")
    }

    fn context() -> SessionContext {
        SessionContext {
            session_id: "s-1".into(),
            agent: "banking".into(),
            issued_at_ms: 1_000_000,
            nonce: "n-1".into(),
            memory: [("verifiedUser".to_owned(), serde_json::json!({"name": "Ada"}))].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_signed_context_verifies_for_its_agent_while_fresh() {
        let signed = key(7).sign(&context());
        assert_eq!(key(7).verify(&signed, "banking", 1_000_000 + MAX_AGE_MS), Ok(context()));
        assert_eq!(
            key(7).verify(&signed, "idv", 1_000_000),
            Err(GrantError::WrongAgent { granted: "banking".into(), serving: "idv".into() })
        );
        assert_eq!(
            key(7).verify(&signed, "banking", 1_000_000 + MAX_AGE_MS + 1),
            Err(GrantError::Stale { age_ms: MAX_AGE_MS + 1 })
        );
    }

    #[test]
    fn another_key_or_a_changed_payload_is_refused() {
        let signed = key(7).sign(&context());
        assert_eq!(key(8).verify(&signed, "banking", 1_000_000), Err(GrantError::BadSignature));
        let forged = SignedContext { payload: signed.payload.replace("Ada", "Eve"), mac: signed.mac.clone() };
        assert_eq!(key(7).verify(&forged, "banking", 1_000_000), Err(GrantError::BadSignature));
        let garbage = SignedContext { payload: signed.payload, mac: "zz".into() };
        assert_eq!(key(7).verify(&garbage, "banking", 1_000_000), Err(GrantError::BadSignature));
    }

    #[test]
    fn short_keys_and_huge_payloads_are_refused_and_keys_never_print() {
        assert_eq!(ContextKey::new(b"too short\n").err(), Some(GrantError::ShortKey(9)));
        assert!(!format!("{:?}", key(65)).contains("AAAA"));
        let huge = SignedContext { payload: "x".repeat(MAX_PAYLOAD_BYTES + 1), mac: String::new() };
        assert_eq!(key(7).verify(&huge, "banking", 0), Err(GrantError::TooLarge(MAX_PAYLOAD_BYTES + 1)));
    }
}
