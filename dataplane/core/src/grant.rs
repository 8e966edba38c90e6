//! Session context that only the gateway may give a runtime: memory (a verified caller),
//! earlier conversation and handoff state. It travels in `session_start.context` as a
//! [`SignedContext`]: the context's JSON text and an Ed25519 signature over exactly those
//! bytes. The gateway holds the private key (a Secret only it mounts); runtimes need only the
//! public key, which is no secret, so the operator can hand it to runtime pods in any
//! namespace. A runtime restores nothing it cannot verify: the signature, that the grant
//! names its agent, and that it is fresh ([`MAX_AGE_MS`]). Replays inside that window are
//! the runtime's to refuse (each grant carries a random `nonce`).
//!
//! What the grant carries of the session itself — memory, history, the handoff that brings
//! it, where it may return, its place in the workflow, a summary — is one type,
//! [`Carried`]: the gateway builds it once from what it keeps, the grant carries it inside
//! [`SessionContext`] (its fields on the wire as before), and the runtime hands it to the
//! core's [`crate::SessionInit`] as it is.
//!
//! Pure: the caller supplies the time and the nonce.

use std::collections::BTreeMap;

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize, Serializer};

use crate::handoff::{HandoffContext, HistoryTurn, WorkflowSnapshot};

/// How old a grant may be when a runtime checks it (and how far in the future, for clocks
/// that disagree a little).
pub const MAX_AGE_MS: u64 = 60_000;
/// The largest signed payload a runtime reads (memory and history are bounded by it; the
/// gateway compacts a context to fit).
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// The largest `session_start` a runtime reads, whatever its limit on other messages: a
/// payload of [`MAX_PAYLOAD_BYTES`], escaped inside the message's JSON (at most twice as
/// long), its signature and the other fields. The gateway never sends a larger one, and a
/// runtime always reads one this large: the two limits agree.
pub const MAX_START_BYTES: usize = 2 * MAX_PAYLOAD_BYTES + 4096;
/// How far before its grant a carried call start ([`Carried::call_started_at_ms`]) is read
/// as it is: a day, twice the longest `turnTaking.maxCall` (twelve hours). An older start
/// is read as this long ago (the call's limit has passed either way, and no clock gains from
/// a larger number); one later than the grant by more than [`MAX_AGE_MS`] (clocks that
/// disagree a little) is refused ([`GrantError::CallStart`]), a later one within it read as
/// the grant's own time.
pub const MAX_CALL_AGE_MS: u64 = 24 * 3600 * 1000;

/// The session context the gateway carries into a runtime session: what a session
/// started there is given of the session so far. One type from the gateway's open request
/// through the grant to the core's [`crate::SessionInit`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Carried {
    /// Session memory (e.g. `verifiedUser`); with a handoff, merged under the handoff's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Earlier conversation, oldest first (with a handoff, the handoff's is used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryTurn>,
    /// Set when the session arrives through a handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffContext>,
    /// A session moved here without a handoff (the gateway moved it off a lost pod, or it
    /// resumed) keeps the agent it may return to (`return_to_<agent>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_to: Option<String>,
    /// A session moved here without a handoff (another pod of the same agent, or a
    /// resume) goes on from where it was in the agent's workflow (ignored when it names
    /// another agent or a node the workflow lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowSnapshot>,
    /// What came before `history`, summarised: a session continued from the conversation
    /// record carries the record's summary of its earlier part (and of older turns not
    /// restored word for word). It goes into the system prompt, as the summary of
    /// compacted turns does; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// When the call started, milliseconds since the Unix epoch (the gateway's clock, at
    /// the session's `session_start`): a call handed to another agent, or resumed on another
    /// pod, keeps its clock — `turnTaking.maxCall` and its warning count from here, not from
    /// the runtime session's start. Absent (an older gateway): the runtime session's start.
    /// Checked by [`GatewayPublicKey::verify`]: see [`MAX_CALL_AGE_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_started_at_ms: Option<u64>,
}

/// What the gateway tells a runtime about the session it opens there.
///
/// On the wire its fields and [`Carried`]'s are one JSON object, in the order gateways
/// have always written them (see its `Serialize`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionContext {
    /// The gateway's id of the session (stable across handoffs, pods and resumes).
    pub session_id: String,
    /// The namespace of the agent the grant is for; a runtime of another namespace refuses
    /// it (an Agent of the same name elsewhere is another tenant's).
    #[serde(default)]
    pub namespace: String,
    /// The agent the grant is for; another agent's runtime refuses it.
    pub agent: String,
    /// When the gateway made the grant, milliseconds since the Unix epoch.
    pub issued_at_ms: u64,
    /// Random, unique per grant: a runtime accepts each once.
    pub nonce: String,
    /// The session context carried.
    #[serde(flatten)]
    pub carried: Carried,
    /// The verified caller's identity assertion for this session ([`crate::assertion`]), set
    /// when the memory given holds `verifiedUser`: the runtime forwards it to tool servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The W3C `traceparent` of the gateway's span of this session, when it is traced: the
    /// runtime's session span becomes its child, so one trace follows the session across
    /// pods, handoffs and tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The address (IP) of the pod the gateway opened this session on: a runtime that knows
    /// its own (`SWITCHBOARD_POD_IP`, set by the operator) refuses a grant for another pod,
    /// so a grant captured on its way cannot open a session on another pod of the Agent
    /// within its freshness (each pod remembers only its own nonces). Absent from a gateway
    /// older than this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The variant of the Agent (`spec.variants`) the session runs, as the gateway picked
    /// it: the runtime serves the session with that variant's core. Absent for an Agent
    /// without variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The model region the session's Nova Sonic streams open in, when the gateway placed
    /// the session on the Agent's fallback region (`spec.model.voiceFallback.region`: its
    /// own region was full or failing). A runtime honours only that region; absent: the
    /// Agent's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The gateway gathers the caller's audio into frames of up to this many milliseconds
    /// before it sends them to the runtime (a frame waits at most that long), so the
    /// runtime need not gather them again into its events to the voice model: it sends
    /// each as it comes when its own events are no longer than this. Absent from a gateway
    /// older than this field, or one that sends each frame as it comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_batch_ms: Option<u32>,
}

impl Serialize for SessionContext {
    /// Writes the grant as gateways always have, byte for byte: a flattened [`Carried`]
    /// would write its `summary` before `identity` and `traceparent`, so the fields are
    /// laid out here in the wire's order (borrowed, nothing copied).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            session_id: &'a str,
            namespace: &'a str,
            agent: &'a str,
            issued_at_ms: u64,
            nonce: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            memory: Option<&'a BTreeMap<String, serde_json::Value>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            history: Option<&'a [HistoryTurn]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            handoff: Option<&'a HandoffContext>,
            #[serde(skip_serializing_if = "Option::is_none")]
            return_to: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            workflow: Option<&'a WorkflowSnapshot>,
            #[serde(skip_serializing_if = "Option::is_none")]
            identity: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            traceparent: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            summary: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pod: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            variant: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            region: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            call_started_at_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            audio_batch_ms: Option<u32>,
        }
        let carried = &self.carried;
        Wire {
            session_id: &self.session_id,
            namespace: &self.namespace,
            agent: &self.agent,
            issued_at_ms: self.issued_at_ms,
            nonce: &self.nonce,
            memory: Some(&carried.memory).filter(|memory| !memory.is_empty()),
            history: Some(carried.history.as_slice()).filter(|history| !history.is_empty()),
            handoff: carried.handoff.as_ref(),
            return_to: carried.return_to.as_deref(),
            workflow: carried.workflow.as_ref(),
            identity: self.identity.as_deref(),
            traceparent: self.traceparent.as_deref(),
            summary: Some(carried.summary.as_str()).filter(|summary| !summary.is_empty()),
            pod: self.pod.as_deref(),
            variant: self.variant.as_deref(),
            region: self.region.as_deref(),
            call_started_at_ms: carried.call_started_at_ms,
            audio_batch_ms: self.audio_batch_ms,
        }
        .serialize(serializer)
    }
}

pub use switchboard_protocol::SignedContext;

/// Why a runtime refuses a grant. The messages are for logs and the gateway's operator;
/// each says what to check.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The signature does not match: another gateway's key, or the payload was changed.
    #[error("the session context's signature is not valid; the runtime's gateway public key must be the gateway's")]
    BadSignature,
    /// The payload is too large.
    #[error("the session context is {0} bytes, more than the limit of {MAX_PAYLOAD_BYTES}")]
    TooLarge(usize),
    /// The payload is not a context.
    #[error("the session context is malformed: {0}")]
    Malformed(String),
    /// Made for another agent, or an agent of another namespace (`<namespace>/<name>`).
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
    /// A key that cannot be read.
    #[error("the gateway key is not usable: {0}")]
    BadKey(String),
    /// The call it carries started after the grant was made (by more than clocks may
    /// disagree): a gateway's clock is wrong, or the grant was not made by a gateway.
    #[error(
        "the session context says its call started {ahead_ms} ms after the context was issued, more than the {MAX_AGE_MS} ms clocks may disagree; check the gateways' clocks"
    )]
    CallStart {
        /// How far after the grant's `issuedAtMs`.
        ahead_ms: u64,
    },
}

/// The gateway's private key: it signs. Its `Debug` output never shows the key.
#[derive(Clone)]
pub struct GatewaySigner(SigningKey);

impl std::fmt::Debug for GatewaySigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GatewaySigner(public {})", self.public())
    }
}

impl GatewaySigner {
    /// The key in a PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`), as
    /// `openssl genpkey -algorithm ed25519` and Helm's `genPrivateKey "ed25519"` write it.
    pub fn from_pem(pem: &str) -> Result<Self, GrantError> {
        SigningKey::from_pkcs8_pem(pem.trim())
            .map(Self)
            .map_err(|e| GrantError::BadKey(format!("{e}; expected an Ed25519 private key in PKCS#8 PEM")))
    }

    /// The key from its 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(SigningKey::from_bytes(seed))
    }

    /// The key as a PKCS#8 PEM file's text (what [`GatewaySigner::from_pem`] reads), for a
    /// gateway process started with a key made in process (benchmarks, local set-ups).
    pub fn to_pem(&self) -> Result<String, GrantError> {
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        self.0
            .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .map(|pem| pem.as_str().to_owned())
            .map_err(|e| GrantError::BadKey(e.to_string()))
    }

    /// The public key runtimes verify with.
    pub fn public(&self) -> GatewayPublicKey {
        GatewayPublicKey(self.0.verifying_key())
    }

    /// Signs `message` (for the gateway's own records, e.g. a parked session in a shared
    /// store; each use prefixes its own domain).
    pub fn seal(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }

    /// Signs `context`.
    pub fn sign(&self, context: &SessionContext) -> SignedContext {
        // Every field is a String, number, map of JSON values or plain struct: this cannot fail.
        let payload = serde_json::to_string(context).unwrap_or_default();
        let signature = self.0.sign(payload.as_bytes());
        SignedContext { signature: hex::encode(signature.to_bytes()), payload }
    }
}

/// The gateway's public key: runtimes verify grants with it. Written as 64 hex digits (its
/// `Display`), or read from that or a PEM public key (`-----BEGIN PUBLIC KEY-----`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayPublicKey(VerifyingKey);

impl std::fmt::Display for GatewayPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0.as_bytes()))
    }
}

impl std::str::FromStr for GatewayPublicKey {
    type Err = GrantError;

    fn from_str(text: &str) -> Result<Self, GrantError> {
        let text = text.trim();
        let bad = |e: String| GrantError::BadKey(format!("{e}; expected 64 hex digits or an Ed25519 PEM public key"));
        if text.starts_with("-----BEGIN") {
            return VerifyingKey::from_public_key_pem(text).map(Self).map_err(|e| bad(e.to_string()));
        }
        let bytes = hex::decode(text).map_err(|e| bad(e.to_string()))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| bad(format!("{} bytes", b.len())))?;
        VerifyingKey::from_bytes(&bytes).map(Self).map_err(|e| bad(e.to_string()))
    }
}

impl GatewayPublicKey {
    /// The key's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    /// Whether `signature` is this key's [`GatewaySigner::seal`] of `message`.
    pub fn opens(&self, message: &[u8], signature: &[u8]) -> bool {
        Signature::from_slice(signature).is_ok_and(|s| self.0.verify(message, &s).is_ok())
    }

    /// Checks `signed` for the runtime serving `agent` at `now_ms` and returns its context.
    pub fn verify(
        &self,
        signed: &SignedContext,
        namespace: &str,
        agent: &str,
        now_ms: u64,
    ) -> Result<SessionContext, GrantError> {
        if signed.payload.len() > MAX_PAYLOAD_BYTES {
            return Err(GrantError::TooLarge(signed.payload.len()));
        }
        let bytes = hex::decode(&signed.signature).map_err(|_| GrantError::BadSignature)?;
        let signature = Signature::from_slice(&bytes).map_err(|_| GrantError::BadSignature)?;
        self.0.verify(signed.payload.as_bytes(), &signature).map_err(|_| GrantError::BadSignature)?;
        let context: SessionContext =
            serde_json::from_str(&signed.payload).map_err(|e| GrantError::Malformed(e.to_string()))?;
        if context.agent != agent || context.namespace != namespace {
            return Err(GrantError::WrongAgent {
                granted: format!("{}/{}", context.namespace, context.agent),
                serving: format!("{namespace}/{agent}"),
            });
        }
        let age_ms = now_ms.abs_diff(context.issued_at_ms);
        if age_ms > MAX_AGE_MS {
            return Err(GrantError::Stale { age_ms });
        }
        let mut context = context;
        context.carried.call_started_at_ms = call_start(context.carried.call_started_at_ms, context.issued_at_ms)?;
        Ok(context)
    }
}

/// A carried call start, bounded against the grant's `issued_at_ms` (see [`MAX_CALL_AGE_MS`]).
fn call_start(started_ms: Option<u64>, issued_at_ms: u64) -> Result<Option<u64>, GrantError> {
    let Some(started) = started_ms else { return Ok(None) };
    if started > issued_at_ms {
        let ahead_ms = started - issued_at_ms;
        if ahead_ms > MAX_AGE_MS {
            return Err(GrantError::CallStart { ahead_ms });
        }
        return Ok(Some(issued_at_ms));
    }
    Ok(Some(started.max(issued_at_ms.saturating_sub(MAX_CALL_AGE_MS))))
}

#[cfg(test)]
mod tests;
