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
//! [`MAX_LIFETIME_SECS`] (`app_context_expired`); one bound to another client
//! (`app_context_wrong_subject`: with [`AppContextKeys::with_bound_subject`], the token's
//! `sub` must be the subject of the credential the client connected with — a JWT's `sub`,
//! an API key's name); and one whose `jti` was taken already (`app_context_replayed`): each
//! token opens one session. [`AppContextKeys::check`] checks a token and leaves its id to
//! be taken: by the gateway in the store its replicas share (once across all of them), or
//! in this process by [`AppContextKeys::take_here`] (once on this replica).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
pub const LEEWAY_SECS: u64 = 30;
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
    /// Whether a token must name its client (`sub`: see [`AppContextKeys::with_bound_subject`]).
    bound_subject: bool,
}

/// A token that passed every check but the replay check: what it vouches for, and the id
/// that must not open another session while the token lives.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// What it vouches for.
    pub claims: AppClaims,
    /// Its `jti`.
    pub jti: String,
    /// Its `exp` (seconds since the Unix epoch).
    pub expires_at: u64,
}

impl Checked {
    /// How long from `now_secs` its id must be remembered: as long as the token is taken
    /// (its `exp`, with the clock skew allowed), at least a second.
    pub fn remember_for(&self, now_secs: u64) -> Duration {
        Duration::from_secs((self.expires_at + LEEWAY_SECS).saturating_sub(now_secs).max(1))
    }
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
    /// Bound to another client than the one presenting it (or bound to none where the
    /// gateway requires it).
    #[error("session_start.app_context {0}")]
    WrongSubject(String),
    /// The shared store that makes each token single-use across the gateway's replicas
    /// did not answer: refused rather than risk a replay.
    #[error(
        "the gateway cannot check that session_start.app_context was not used already: {0}; try again shortly with the same token"
    )]
    Unavailable(String),
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
            Self::WrongSubject(_) => ErrorCode::AppContextWrongSubject,
            Self::Unavailable(_) => ErrorCode::StoreUnavailable,
        }
    }

    /// The WebSocket close code.
    pub fn close_code(&self) -> u16 {
        match self {
            Self::Invalid(_) | Self::Expired(_) | Self::Replayed | Self::WrongSubject(_) => close_code::UNAUTHORIZED,
            Self::TooLarge(_) | Self::NotAccepted(_) => close_code::BAD_START,
            Self::Busy | Self::Unavailable(_) => close_code::TRY_AGAIN_LATER,
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
    #[serde(default)]
    sub: Option<String>,
}

impl AppContextKeys {
    /// Trusts tokens signed by a key of `jwks` (a JWKS's JSON text), from `issuer` for
    /// `audience`.
    pub fn new(jwks: &str, issuer: String, audience: String) -> Result<Self, JwksError> {
        Ok(Self {
            keys: RwLock::new(Arc::new(parse(jwks)?)),
            issuer,
            audience,
            used: Mutex::default(),
            bound_subject: false,
        })
    }

    /// Takes only tokens bound to the client presenting them: a token's `sub` must be the
    /// subject of the client's credential (a JWT's `sub`, an API key's name); a token
    /// without `sub`, or a client without a credential, is refused
    /// (`app_context_wrong_subject`). Without it, `sub` is not read.
    pub fn with_bound_subject(mut self) -> Self {
        self.bound_subject = true;
        self
    }

    /// Whether tokens must name their client ([`AppContextKeys::with_bound_subject`]).
    pub fn binds_subject(&self) -> bool {
        self.bound_subject
    }

    /// Replaces the keys (a rotated set); returns how many there are now.
    pub fn set_keys(&self, jwks: &str) -> Result<usize, JwksError> {
        let set = parse(jwks)?;
        let count = set.keys.len();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        Ok(count)
    }

    /// Checks `token` for a client whose credential's subject is `client` (see
    /// [`AppContextKeys::with_bound_subject`]) and takes its id in this process (it opens no
    /// other session on this replica).
    pub fn verify(&self, token: &str, client: Option<&str>) -> Result<AppClaims, AppContextError> {
        let checked = self.check(token, client)?;
        self.take_here(&checked)?;
        Ok(checked.claims)
    }

    /// Checks `token` for a client whose credential's subject is `client`, leaving its id
    /// to be taken ([`AppContextKeys::take_here`], or a store the gateway's replicas share).
    pub fn check(&self, token: &str, client: Option<&str>) -> Result<Checked, AppContextError> {
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
        if self.bound_subject {
            bound_to(claims.sub.as_deref(), client)?;
        }
        Ok(Checked { claims: AppClaims { memory }, jti: claims.jti, expires_at: claims.exp })
    }

    /// Takes the id of a `checked` token in this process: remembered until it expires;
    /// `Err` when it was taken already.
    pub fn take_here(&self, checked: &Checked) -> Result<(), AppContextError> {
        let (jti, exp, now) = (checked.jti.clone(), checked.expires_at, now_secs());
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

/// Whether a token naming `sub` is the client's whose credential's subject is `client`.
fn bound_to(sub: Option<&str>, client: Option<&str>) -> Result<(), AppContextError> {
    let wrong = |message: String| Err(AppContextError::WrongSubject(message));
    match (sub, client) {
        (None, _) => wrong(
            "names no client (sub), and this gateway takes only tokens bound to the client presenting them; have the \
             app's backend set sub to the client's credential subject (its JWT's sub, or its API key's name)"
                .into(),
        ),
        (Some(_), None) => wrong(
            "is bound to a client (sub), and this client presented no credential; connect with the credential the \
             token was minted for"
                .into(),
        ),
        (Some(sub), Some(client)) if sub != client => wrong(format!(
            "was minted for the client {sub:?}, not {client:?}, which presents it; each client gets its own token"
        )),
        (Some(_), Some(_)) => Ok(()),
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
