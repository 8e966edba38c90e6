//! The verified caller as tool servers receive it: an **identity assertion**, a JWT (RFC 7519)
//! in compact JWS form (RFC 7515), `alg: EdDSA` (RFC 8037), signed by the gateway with the
//! Ed25519 key that signs grants ([`crate::grant`]). Tool servers verify it with the gateway's
//! public key — the one the gateway publishes for runtime pods — so no new key is
//! distributed. The runtime sends it on every HTTP and MCP tool call of a session whose
//! memory holds a verified caller, as header [`HEADER`]; see `dataplane/runtime/src/tools/IDENTITY.md`
//! for tool-server authors.
//!
//! ```text
//! header  {"alg":"EdDSA","typ":"JWT","kid":"<the gateway public key, 64 hex digits>"}
//! claims  {"iss":"switchboard-gateway","sub":"12345678","verifiedUser":{...},
//!          "namespace":"bank","agent":"banking","sid":"gw-…","iat":1700000000,"exp":1700000300}
//! ```
//!
//! - `sub` is a stable id of the caller taken from the `verifiedUser` memory value
//!   ([`subject`]): the value itself when it is a string or number; else its `id`, else its
//!   `accountNumber` field (as text); else `sha256:` and the hex SHA-256 of its canonical JSON
//!   (keys sorted, no spaces).
//! - `verifiedUser` is the memory value as the Agent's identity provider wrote it.
//! - `namespace`, `agent`, `sid`: the Agent serving the session and the gateway's session id.
//! - `iat`, `exp`: seconds since the Unix epoch; an assertion is valid for [`TTL_SECS`]; the
//!   gateway sends the runtime a fresh one every [`REFRESH_AFTER_SECS`] while the session
//!   lasts.
//!
//! The signature domain is separate from the grants' and the parked sessions' (the same key
//! signs all three): a JWS signing input is base64url text and a dot, never JSON (a grant's
//! payload starts with `{`) nor the parked-session prefix (which has a space and a NUL).
//!
//! Pure: the caller supplies the time.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::grant::{GatewayPublicKey, GatewaySigner};

/// The HTTP header a tool call carries the assertion in.
pub const HEADER: &str = "X-Switchboard-Identity";
/// The `iss` of every assertion.
pub const ISSUER: &str = "switchboard-gateway";
/// The memory key the assertion is about (the Agents' default identity key).
pub const IDENTITY_KEY: &str = "verifiedUser";
/// How long an assertion is valid after it is issued.
pub const TTL_SECS: u64 = 300;
/// How old the assertion a runtime holds may get before the gateway sends a fresh one.
pub const REFRESH_AFTER_SECS: u64 = 120;
/// The clock skew [`verify_identity`] allows on `iat` and `exp`.
pub const LEEWAY_SECS: u64 = 60;
/// The longest assertion made or read (it travels in an HTTP header; servers commonly take
/// 8 KiB per header).
pub const MAX_BYTES: usize = 8 * 1024;

/// The claims of an identity assertion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityClaims {
    /// Always [`ISSUER`].
    pub iss: String,
    /// A stable id of the caller ([`subject`]).
    pub sub: String,
    /// The session's `verifiedUser` memory value.
    pub verified_user: serde_json::Value,
    /// The namespace of the Agent serving the session.
    pub namespace: String,
    /// The Agent serving the session.
    pub agent: String,
    /// The gateway's session id (stable across handoffs, pods and resumes).
    pub sid: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Expires at, seconds since the Unix epoch.
    pub exp: u64,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
    /// Critical extensions: none are understood, so any makes the token invalid (RFC 7515 §4.1.11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crit: Option<serde_json::Value>,
}

/// Why an assertion is not made or not accepted. The messages say what to check.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    /// Longer than [`MAX_BYTES`] (a `verifiedUser` value that large is not asserted).
    #[error("the identity assertion is {0} bytes, more than the limit of {MAX_BYTES}; keep verifiedUser small")]
    TooLarge(usize),
    /// Not three base64url parts of JSON.
    #[error("the identity assertion is malformed: {0}")]
    Malformed(String),
    /// Another algorithm than EdDSA (`none` included), or critical extensions.
    #[error("the identity assertion's algorithm {0:?} is not accepted; only EdDSA is")]
    Algorithm(String),
    /// The signature does not match: another key, or a changed header or payload.
    #[error("the identity assertion's signature is not valid; verify it with the gateway's public key")]
    BadSignature,
    /// Another issuer.
    #[error("the identity assertion's issuer is {0:?}, not {ISSUER:?}")]
    Issuer(String),
    /// Past its `exp` (beyond the leeway).
    #[error(
        "the identity assertion expired at {exp} (now {now}); the gateway sends a fresh one while the session lasts"
    )]
    Expired {
        /// Its `exp`.
        exp: u64,
        /// The verifier's time.
        now: u64,
    },
    /// Issued in the future (beyond the leeway).
    #[error("the identity assertion was issued at {iat}, after now ({now}); check the clocks")]
    NotYetValid {
        /// Its `iat`.
        iat: u64,
        /// The verifier's time.
        now: u64,
    },
    /// Made for another session, Agent or namespace.
    #[error("the identity assertion is for session {asserted}, not {expected}")]
    WrongSession {
        /// `<namespace>/<agent>/<sid>` it names.
        asserted: String,
        /// `<namespace>/<agent>/<sid>` expected.
        expected: String,
    },
}

impl IdentityClaims {
    /// The claims for `verified_user` in session `sid` of Agent `namespace/agent`, issued at
    /// `now_secs`.
    pub fn new(verified_user: serde_json::Value, namespace: &str, agent: &str, sid: &str, now_secs: u64) -> Self {
        Self {
            iss: ISSUER.to_owned(),
            sub: subject(&verified_user),
            verified_user,
            namespace: namespace.to_owned(),
            agent: agent.to_owned(),
            sid: sid.to_owned(),
            iat: now_secs,
            exp: now_secs.saturating_add(TTL_SECS),
        }
    }

    /// Whether the claims are for session `sid` of Agent `namespace/agent`.
    pub fn check_session(&self, namespace: &str, agent: &str, sid: &str) -> Result<(), AssertionError> {
        if (self.namespace.as_str(), self.agent.as_str(), self.sid.as_str()) == (namespace, agent, sid) {
            return Ok(());
        }
        Err(AssertionError::WrongSession {
            asserted: format!("{}/{}/{}", self.namespace, self.agent, self.sid),
            expected: format!("{namespace}/{agent}/{sid}"),
        })
    }
}

/// A stable id of the caller `verified_user` describes: the value itself when it is a string
/// or a number; else its `id`, else its `accountNumber` (a string or number, as text); else
/// `sha256:` and the hex SHA-256 of its canonical JSON (object keys sorted, no spaces).
pub fn subject(verified_user: &serde_json::Value) -> String {
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::String(text) if !text.is_empty() => Some(text.clone()),
        serde_json::Value::Number(number) => Some(number.to_string()),
        _ => None,
    };
    if let Some(own) = text(verified_user) {
        return own;
    }
    if let Some(id) = ["id", "accountNumber"].iter().find_map(|field| verified_user.get(field).and_then(text)) {
        return id;
    }
    let canonical = canonical(verified_user).to_string();
    format!("sha256:{}", hex::encode(Sha256::digest(canonical.as_bytes())))
}

/// `value` with every object's keys in sorted order (serde_json may keep insertion order).
fn canonical(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            serde_json::Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&fields[k]))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Signs `claims` with the gateway's key: the compact JWS.
pub fn sign_identity(signer: &GatewaySigner, claims: &IdentityClaims) -> Result<String, AssertionError> {
    let header =
        Header { alg: "EdDSA".into(), typ: Some("JWT".into()), kid: Some(signer.public().to_string()), crit: None };
    // Strings, numbers and a JSON value: serialisation cannot fail.
    let header = serde_json::to_vec(&header).map_err(|e| AssertionError::Malformed(e.to_string()))?;
    let payload = serde_json::to_vec(claims).map_err(|e| AssertionError::Malformed(e.to_string()))?;
    let input = format!("{}.{}", B64.encode(header), B64.encode(payload));
    let token = format!("{input}.{}", B64.encode(signer.seal(input.as_bytes())));
    if token.len() > MAX_BYTES {
        return Err(AssertionError::TooLarge(token.len()));
    }
    Ok(token)
}

/// Checks `token` with the gateway's public `key` (or any key of a set trusted during a
/// rotation, [`crate::gateway_keys::GatewayKeys`]) at `now_secs`: the algorithm (EdDSA only),
/// the signature, the issuer, and `exp`/`iat` within [`LEEWAY_SECS`]; returns its claims.
/// Which session it is for is the caller's to check ([`IdentityClaims::check_session`]).
pub fn verify_identity(
    key: &(impl AsRef<[GatewayPublicKey]> + ?Sized),
    token: &str,
    now_secs: u64,
) -> Result<IdentityClaims, AssertionError> {
    if token.len() > MAX_BYTES {
        return Err(AssertionError::TooLarge(token.len()));
    }
    let malformed = || AssertionError::Malformed("expected three base64url parts separated by dots".into());
    let token = token.trim();
    let (input, signature) = token.rsplit_once('.').ok_or_else(malformed)?;
    let (header, payload) = input.split_once('.').ok_or_else(malformed)?;
    if payload.contains('.') {
        return Err(malformed());
    }
    let header: Header = B64
        .decode(header)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .ok_or_else(|| AssertionError::Malformed("the header is not base64url JSON with an alg".into()))?;
    if header.alg != "EdDSA" || header.crit.is_some() {
        return Err(AssertionError::Algorithm(header.alg));
    }
    let signature = B64.decode(signature).map_err(|_| AssertionError::BadSignature)?;
    if !key.as_ref().iter().any(|key| key.opens(input.as_bytes(), &signature)) {
        return Err(AssertionError::BadSignature);
    }
    let claims: IdentityClaims = B64
        .decode(payload)
        .map_err(|e| AssertionError::Malformed(format!("the payload is not base64url: {e}")))
        .and_then(|json| {
            serde_json::from_slice(&json)
                .map_err(|e| AssertionError::Malformed(format!("the claims are not an identity assertion's: {e}")))
        })?;
    if claims.iss != ISSUER {
        return Err(AssertionError::Issuer(claims.iss));
    }
    if claims.exp.saturating_add(LEEWAY_SECS) <= now_secs {
        return Err(AssertionError::Expired { exp: claims.exp, now: now_secs });
    }
    if claims.iat > now_secs.saturating_add(LEEWAY_SECS) {
        return Err(AssertionError::NotYetValid { iat: claims.iat, now: now_secs });
    }
    Ok(claims)
}

impl GatewayPublicKey {
    /// The key as a JWK (RFC 8037: `kty` `OKP`, `crv` `Ed25519`, `x` the key in base64url),
    /// for JWT libraries that take one; `kid` is the key's hex, as assertions name it.
    pub fn jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "alg": "EdDSA",
            "use": "sig",
            "kid": self.to_string(),
            "x": B64.encode(self.as_bytes()),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn signer(byte: u8) -> GatewaySigner {
        GatewaySigner::from_seed(&[byte; 32])
    }

    fn ada() -> serde_json::Value {
        json!({"name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56"})
    }

    fn claims() -> IdentityClaims {
        IdentityClaims::new(ada(), "bank", "banking", "gw-1", NOW)
    }

    #[test]
    fn an_assertion_round_trips_and_names_its_session() {
        let token = sign_identity(&signer(7), &claims()).expect("signed");
        assert_eq!(token.split('.').count(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&B64.decode(token.split('.').next().expect("header")).expect("b64")).expect("json");
        assert_eq!(header, json!({"alg": "EdDSA", "typ": "JWT", "kid": signer(7).public().to_string()}));
        let read = verify_identity(&signer(7).public(), &token, NOW + 1).expect("verifies");
        assert_eq!(read, claims());
        assert_eq!((read.iss.as_str(), read.sub.as_str(), read.exp), (ISSUER, "12345678", NOW + TTL_SECS));
        assert_eq!(read.check_session("bank", "banking", "gw-1"), Ok(()));
        assert_eq!(
            read.check_session("bank", "banking", "gw-2"),
            Err(AssertionError::WrongSession {
                asserted: "bank/banking/gw-1".into(),
                expected: "bank/banking/gw-2".into()
            })
        );
        assert!(read.check_session("evil", "banking", "gw-1").is_err(), "another namespace's Agent");
    }

    #[test]
    fn a_changed_header_payload_or_signature_is_refused() {
        let token = sign_identity(&signer(7), &claims()).expect("signed");
        let parts: Vec<&str> = token.split('.').collect();
        let mut forged = claims();
        forged.verified_user = json!({"accountNumber": "87654321"});
        forged.sub = "87654321".into();
        let payload = B64.encode(serde_json::to_vec(&forged).expect("json"));
        let tampered = format!("{}.{payload}.{}", parts[0], parts[2]);
        assert_eq!(verify_identity(&signer(7).public(), &tampered, NOW), Err(AssertionError::BadSignature));
        let mut signature = B64.decode(parts[2]).expect("b64");
        signature[0] ^= 1;
        let flipped = format!("{}.{}.{}", parts[0], parts[1], B64.encode(signature));
        assert_eq!(verify_identity(&signer(7).public(), &flipped, NOW), Err(AssertionError::BadSignature));
        let none = format!("{}.{}.", B64.encode(br#"{"alg":"none","typ":"JWT"}"#), parts[1]);
        assert_eq!(verify_identity(&signer(7).public(), &none, NOW), Err(AssertionError::Algorithm("none".into())));
        let crit = B64.encode(br#"{"alg":"EdDSA","crit":["exp"]}"#);
        assert!(matches!(
            verify_identity(&signer(7).public(), &format!("{crit}.{}.{}", parts[1], parts[2]), NOW),
            Err(AssertionError::Algorithm(_))
        ));
        for garbage in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
            assert!(matches!(verify_identity(&signer(7).public(), garbage, NOW), Err(AssertionError::Malformed(_))));
        }
    }

    #[test]
    fn another_key_is_refused() {
        let token = sign_identity(&signer(7), &claims()).expect("signed");
        assert_eq!(verify_identity(&signer(8).public(), &token, NOW), Err(AssertionError::BadSignature));
    }

    #[test]
    fn during_a_key_rotation_either_trusted_key_verifies() {
        let trusted: crate::gateway_keys::GatewayKeys =
            format!("{}\n{}", signer(7).public(), signer(8).public()).parse().expect("two keys");
        for key in [signer(7), signer(8)] {
            let token = sign_identity(&key, &claims()).expect("signed");
            assert_eq!(verify_identity(&trusted, &token, NOW), Ok(claims()));
        }
        let foreign = sign_identity(&signer(9), &claims()).expect("signed");
        assert_eq!(verify_identity(&trusted, &foreign, NOW), Err(AssertionError::BadSignature));
    }

    #[test]
    fn an_expired_or_future_assertion_is_refused_beyond_the_leeway() {
        let token = sign_identity(&signer(7), &claims()).expect("signed");
        let key = signer(7).public();
        let exp = NOW + TTL_SECS;
        assert!(verify_identity(&key, &token, exp + LEEWAY_SECS - 1).is_ok(), "within the leeway");
        assert_eq!(
            verify_identity(&key, &token, exp + LEEWAY_SECS),
            Err(AssertionError::Expired { exp, now: exp + LEEWAY_SECS })
        );
        assert!(verify_identity(&key, &token, NOW - LEEWAY_SECS).is_ok(), "a clock a little behind");
        assert_eq!(
            verify_identity(&key, &token, NOW - LEEWAY_SECS - 1),
            Err(AssertionError::NotYetValid { iat: NOW, now: NOW - LEEWAY_SECS - 1 })
        );
        let mut other = claims();
        other.iss = "someone".into();
        let foreign = sign_identity(&signer(7), &other).expect("signed");
        assert_eq!(verify_identity(&key, &foreign, NOW), Err(AssertionError::Issuer("someone".into())));
    }

    #[test]
    fn the_subject_is_the_callers_id_or_a_digest_of_the_value() {
        assert_eq!(subject(&ada()), "12345678");
        assert_eq!(subject(&json!({"id": 42, "accountNumber": "1"})), "42");
        assert_eq!(subject(&json!("alice@example.com")), "alice@example.com");
        let unnamed = subject(&json!({"name": "Ada", "since": 2020}));
        assert!(unnamed.starts_with("sha256:") && unnamed.len() == 7 + 64, "{unnamed}");
        let reordered: serde_json::Value = serde_json::from_str(r#"{"since": 2020, "name": "Ada"}"#).expect("json");
        assert_eq!(subject(&reordered), unnamed, "the digest does not depend on key order");
        assert_ne!(subject(&json!({"name": "Alan", "since": 2020})), unnamed);
    }

    #[test]
    fn a_value_too_large_for_a_header_is_not_asserted() {
        let huge = IdentityClaims::new(json!({"notes": "x".repeat(MAX_BYTES)}), "bank", "banking", "gw-1", NOW);
        assert!(matches!(sign_identity(&signer(7), &huge), Err(AssertionError::TooLarge(_))));
        assert!(matches!(
            verify_identity(&signer(7).public(), &"x".repeat(MAX_BYTES + 1), NOW),
            Err(AssertionError::TooLarge(_))
        ));
    }

    #[test]
    fn the_jwk_carries_the_key_in_base64url() {
        let jwk = signer(7).public().jwk();
        assert_eq!((jwk["kty"].as_str(), jwk["crv"].as_str()), (Some("OKP"), Some("Ed25519")));
        let x = B64.decode(jwk["x"].as_str().expect("x")).expect("b64");
        assert_eq!(hex::encode(x), signer(7).public().to_string());
    }
}
