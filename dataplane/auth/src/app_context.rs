//! Trusted context from the host app's backend (`session_start.app_context`): a JWT the
//! app's backend mints for one session, signed with a key of the gateway's app-context key
//! set (`--app-context-jwks-file`, a JWKS from a Secret, re-read when it changes: HS256 with
//! a shared `oct` key, or ES256, EdDSA, RS256 with the backend's public key), from its
//! issuer, for the gateway's audience. Its `memory` claim becomes session memory, as far as
//! the Agent the session starts at takes it ([`AppContext`]): the logged-in customer (the
//! Agent's identity keys) only where the Agent trusts the app for who the caller is.
//!
//! A client only carries the token; it cannot forge one. Refused, each with its own code:
//! a token over [`MAX_TOKEN_BYTES`] (`app_context_too_large`); one that is not a JWT, not
//! signed by a key of the set, from another issuer or for another audience, or whose claims
//! are malformed (`app_context_invalid`); expired, not valid yet, or living longer than
//! [`MAX_LIFETIME_SECS`] (`app_context_expired`); and one whose `jti` this gateway replica
//! has taken already (`app_context_replayed`): each token opens one session.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use switchboard_crds::agent::{AppContext, is_memory_key};
use switchboard_protocol::{ErrorCode, close_code};

use super::jwt::JwksError;

/// The largest token the gateway reads.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The longest a token may live (`exp` after `iat`, and after now): a token is minted for
/// the session about to open, so the replay check needs to remember it only this long.
pub const MAX_LIFETIME_SECS: u64 = 600;
/// Clock skew allowed between the app's backend and the gateway.
const LEEWAY_SECS: u64 = 30;
/// Most token ids remembered (each until its token expires); past this, new tokens are
/// refused for a moment rather than remembered without bound.
const MAX_REMEMBERED: usize = 200_000;
/// Longest `jti`.
const MAX_JTI_LEN: usize = 128;

/// The gateway's trust in app backends: their keys (replaceable, for rotation), issuer and
/// audience, and the ids of the tokens already used.
#[derive(Debug)]
pub struct AppContextKeys {
    keys: RwLock<Arc<JwkSet>>,
    issuer: String,
    audience: String,
    /// `jti` -> its token's `exp`.
    used: Mutex<HashMap<String, u64>>,
}

/// A token the gateway refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppContextError {
    /// Larger than [`MAX_TOKEN_BYTES`].
    #[error(
        "session_start.app_context is {0} bytes, more than the {MAX_TOKEN_BYTES} the gateway reads; put less in it"
    )]
    TooLarge(usize),
    /// Not a token of a trusted backend, or malformed claims.
    #[error(
        "session_start.app_context is not valid: {0}; have the app's backend mint a new one with its configured key"
    )]
    Invalid(String),
    /// Expired, not valid yet, or too long-lived.
    #[error("session_start.app_context {0}; have the app's backend mint a fresh one for this session")]
    Expired(String),
    /// Its `jti` was used already.
    #[error("session_start.app_context was used already (its jti): each token opens one session; mint one per session")]
    Replayed,
    /// Too many unexpired tokens remembered.
    #[error("the gateway remembers as many app-context tokens as it may; try again shortly")]
    Busy,
    /// The gateway has no app-context keys, or the session is not a new one.
    #[error("{0}")]
    NotAccepted(String),
}

impl AppContextError {
    /// The `bidi_error` code (also the refusal's metric label).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::TooLarge(_) => ErrorCode::AppContextTooLarge,
            Self::Invalid(_) => ErrorCode::AppContextInvalid,
            Self::Expired(_) => ErrorCode::AppContextExpired,
            Self::Replayed => ErrorCode::AppContextReplayed,
            Self::Busy => ErrorCode::AtCapacity,
            Self::NotAccepted(_) => ErrorCode::AppContextNotAccepted,
        }
    }

    /// The WebSocket close code.
    pub fn close_code(&self) -> u16 {
        match self {
            Self::Invalid(_) | Self::Expired(_) | Self::Replayed => close_code::UNAUTHORIZED,
            Self::TooLarge(_) | Self::NotAccepted(_) => close_code::BAD_START,
            Self::Busy => close_code::TRY_AGAIN_LATER,
        }
    }
}

/// What a valid token vouches for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppClaims {
    /// Its `memory` claim: memory keys and their values.
    pub memory: BTreeMap<String, serde_json::Value>,
}

/// What an Agent takes of [`AppClaims`].
#[derive(Debug, Default, PartialEq)]
pub struct Taken {
    /// The session memory it starts with.
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Whether the caller (an identity key) came with it.
    pub caller: bool,
    /// Whether the token vouched for a caller the Agent does not take from the app.
    pub caller_left_out: bool,
    /// Keys the token carried that the Agent does not take.
    pub left_out: Vec<String>,
}

impl AppClaims {
    /// What an Agent with `settings` and `identity_keys` takes (any identity key of its
    /// namespace counts as one: `namespace_identity`).
    pub fn taken<'a>(
        self,
        settings: &AppContext,
        identity_keys: &[String],
        namespace_identity: impl IntoIterator<Item = &'a str>,
    ) -> Taken {
        let mut identity: Vec<String> = identity_keys.to_vec();
        identity.extend(namespace_identity.into_iter().map(str::to_owned));
        let mut taken = Taken::default();
        for (key, value) in self.memory {
            let is_identity = identity.contains(&key);
            if settings.takes(&key, &identity) && !value.is_null() {
                taken.caller |= is_identity;
                taken.memory.insert(key, value);
            } else {
                taken.caller_left_out |= is_identity;
                taken.left_out.push(key);
            }
        }
        taken
    }
}

#[derive(Debug, serde::Deserialize)]
struct Claims {
    // Defaults, so that a missing claim is told by name below (jsonwebtoken checks the
    // required ones only once these claims have been read).
    #[serde(default)]
    exp: u64,
    #[serde(default)]
    iat: u64,
    #[serde(default)]
    jti: String,
    #[serde(default)]
    memory: Option<serde_json::Value>,
}

impl AppContextKeys {
    /// Trusts tokens signed by a key of `jwks` (a JWKS's JSON text), from `issuer` for
    /// `audience`.
    pub fn new(jwks: &str, issuer: String, audience: String) -> Result<Self, JwksError> {
        Ok(Self { keys: RwLock::new(Arc::new(parse(jwks)?)), issuer, audience, used: Mutex::default() })
    }

    /// Replaces the keys (a rotated set); returns how many there are now.
    pub fn set_keys(&self, jwks: &str) -> Result<usize, JwksError> {
        let set = parse(jwks)?;
        let count = set.keys.len();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        Ok(count)
    }

    /// Checks `token` and takes its id (it opens no other session here).
    pub fn verify(&self, token: &str) -> Result<AppClaims, AppContextError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AppContextError::TooLarge(token.len()));
        }
        let invalid = |message: String| AppContextError::Invalid(message);
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("it is not a JWT ({e})")))?;
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner).clone();
        let jwk = match &header.kid {
            Some(kid) => {
                keys.find(kid).ok_or_else(|| invalid(format!("no key {kid:?} in the gateway's app-context keys")))?
            }
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return Err(invalid("it names no key (kid) and the gateway trusts several".into())),
        };
        if let Some(alg) = jwk.common.key_algorithm
            && alg.to_string() != format!("{:?}", header.alg)
        {
            return Err(invalid(format!("the key {:?} is for {alg}, not {:?}", header.kid, header.alg)));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| invalid(format!("the key is not usable: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "jti"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => AppContextError::Expired("has expired".into()),
            ErrorKind::ImmatureSignature => AppContextError::Expired("is not valid yet (nbf)".into()),
            ErrorKind::InvalidIssuer => invalid(format!("it is not from the issuer {}", self.issuer)),
            ErrorKind::InvalidAudience => invalid(format!("it is not for the audience {}", self.audience)),
            ErrorKind::InvalidSignature => invalid("its signature does not verify".into()),
            ErrorKind::InvalidAlgorithm => invalid(format!("{:?} does not fit the key", header.alg)),
            ErrorKind::MissingRequiredClaim(claim) => invalid(format!("it has no {claim} claim")),
            _ => invalid(e.to_string()),
        })?;
        let claims = data.claims;
        if let Some(missing) = [("exp", claims.exp == 0), ("iat", claims.iat == 0), ("jti", claims.jti.is_empty())]
            .into_iter()
            .find_map(|(claim, missing)| missing.then_some(claim))
        {
            return Err(invalid(format!("it has no {missing} claim")));
        }
        let now = now_secs();
        let lifetime = claims.exp.saturating_sub(claims.iat).max(claims.exp.saturating_sub(now));
        if lifetime > MAX_LIFETIME_SECS + LEEWAY_SECS {
            return Err(AppContextError::Expired(format!(
                "lives {lifetime} s, longer than the {MAX_LIFETIME_SECS} s the gateway accepts (a token is minted for one session about to open)"
            )));
        }
        if claims.jti.len() > MAX_JTI_LEN {
            return Err(invalid(format!("its jti must be 1 to {MAX_JTI_LEN} characters, unique per token")));
        }
        let memory = memory(claims.memory).map_err(invalid)?;
        self.take_id(claims.jti, claims.exp, now)?;
        Ok(AppClaims { memory })
    }

    /// Remembers `jti` until `exp`; `Err` when it was used already.
    fn take_id(&self, jti: String, exp: u64, now: u64) -> Result<(), AppContextError> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if used.contains_key(&jti) {
            return Err(AppContextError::Replayed);
        }
        if used.len() >= MAX_REMEMBERED {
            used.retain(|_, expires| *expires + LEEWAY_SECS >= now);
            if used.len() >= MAX_REMEMBERED {
                return Err(AppContextError::Busy);
            }
        }
        used.insert(jti, exp);
        Ok(())
    }
}

/// The `memory` claim: an object of memory keys (absent: empty).
fn memory(claim: Option<serde_json::Value>) -> Result<BTreeMap<String, serde_json::Value>, String> {
    let map = match claim {
        None | Some(serde_json::Value::Null) => return Ok(BTreeMap::new()),
        Some(serde_json::Value::Object(map)) => map,
        Some(other) => return Err(format!("its memory claim is {other}, not an object of memory keys")),
    };
    if let Some(bad) = map.keys().find(|key| !is_memory_key(key)) {
        return Err(format!(
            "its memory claim has {bad:?}, not a memory key (a letter, then letters, digits or '_', at most 63)"
        ));
    }
    Ok(map.into_iter().collect())
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn parse(text: &str) -> Result<JwkSet, JwksError> {
    super::jwt::parse_jwks(text)
}

#[cfg(test)]
#[path = "app_context_tests.rs"]
mod tests;
