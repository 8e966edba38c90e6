//! JWT client credentials: tokens signed by a key of the identity provider's JWKS
//! (replaceable, for rotation), from its issuer, for the gateway's audience, unexpired and
//! not before their `nbf` (30 s of clock skew). A claim the gateway's operator names may
//! restrict the Agents a token reaches ([`Jwt::with_agents_claim`]); an OAuth scope lets a
//! token read the conversation record ([`Jwt::with_records_scope`]), another open test
//! sessions on candidate pods ([`Jwt::with_candidates_scope`]).

use std::sync::{Arc, PoisonError, RwLock};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};

use super::scope::Scope;

/// JWT checks: the signing keys (replaceable, for rotation), issuer and audience.
#[derive(Debug)]
pub struct Jwt {
    keys: RwLock<Arc<JwkSet>>,
    issuer: String,
    audience: String,
    /// The claim that lists the Agents a token may reach, and whether a token must carry it.
    agents_claim: Option<(String, bool)>,
    /// The scope (`scope` or `scp` claim) that lets a token read the record.
    records_scope: String,
    /// The scope that lets a token open test sessions on candidate pods.
    candidates_scope: String,
}

/// The scope a token needs to read the conversation record, unless configured otherwise.
pub const DEFAULT_RECORDS_SCOPE: &str = "switchboard:records:read";
/// The scope a token needs to open test sessions on candidate pods, unless configured
/// otherwise.
pub const DEFAULT_CANDIDATES_SCOPE: &str = "switchboard:candidates";

/// What a valid token says.
#[derive(Debug, PartialEq, Eq)]
pub struct Verified {
    /// Its `sub`.
    pub subject: String,
    /// The Agents it may reach: its agents claim, or every Agent without one.
    pub scope: Scope,
    /// Whether it may read the conversation record (of the namespaces `scope` reaches).
    pub records: bool,
    /// Whether it may open test sessions on candidate pods.
    pub candidates: bool,
}

/// A JWKS that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the JWKS is not usable: {0}; expected a JSON Web Key Set ({{\"keys\": [...]}})")]
pub struct JwksError(String);

impl Jwt {
    /// Checks tokens against the keys of `jwks` (a JWKS's JSON text), from `issuer` for
    /// `audience`.
    pub fn new(jwks: &str, issuer: String, audience: String) -> Result<Self, JwksError> {
        Ok(Self {
            keys: RwLock::new(Arc::new(parse_jwks(jwks)?)),
            issuer,
            audience,
            agents_claim: None,
            records_scope: DEFAULT_RECORDS_SCOPE.to_owned(),
            candidates_scope: DEFAULT_CANDIDATES_SCOPE.to_owned(),
        })
    }

    /// Lets tokens whose OAuth scopes include `scope` read the conversation record: the
    /// `scope` claim (a space-separated string, RFC 8693 and RFC 9068) or `scp` (an array,
    /// as some identity providers write it). Default [`DEFAULT_RECORDS_SCOPE`].
    pub fn with_records_scope(mut self, scope: String) -> Self {
        self.records_scope = scope;
        self
    }

    /// Lets tokens whose OAuth scopes include `scope` open test sessions on candidate pods
    /// (`session_start.candidate`). Default [`DEFAULT_CANDIDATES_SCOPE`].
    pub fn with_candidates_scope(mut self, scope: String) -> Self {
        self.candidates_scope = scope;
        self
    }

    /// Restricts each token to the Agents its claim `claim` lists (`["bank/*"]`, or a
    /// space-separated string `"bank/triage shop/*"`: [`Scope`] patterns). A token without
    /// the claim reaches every Agent, unless `required`: then it is refused.
    pub fn with_agents_claim(mut self, claim: String, required: bool) -> Self {
        self.agents_claim = Some((claim, required));
        self
    }

    /// The scope that lets a token read the record.
    pub fn records_scope(&self) -> &str {
        &self.records_scope
    }

    /// The claim that lists the Agents a token reaches, if tokens are scoped by one.
    pub fn agents_claim(&self) -> Option<&str> {
        self.agents_claim.as_ref().map(|(claim, _)| claim.as_str())
    }

    /// Replaces the keys (a rotated JWKS).
    pub fn set_keys(&self, jwks: &str) -> Result<usize, JwksError> {
        let set = parse_jwks(jwks)?;
        let count = set.keys.len();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        Ok(count)
    }

    /// The subject and scope of a valid `token`, or why it is not valid.
    pub fn verify(&self, token: &str) -> Result<Verified, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("it is not a JWT: {e}"))?;
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner).clone();
        let jwk = match &header.kid {
            Some(kid) => keys.find(kid).ok_or_else(|| format!("no key {kid:?} in the gateway's JWKS"))?,
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return Err("the token names no key (kid) and the JWKS has several".into()),
        };
        if let Some(alg) = jwk.common.key_algorithm
            && alg.to_string() != format!("{:?}", header.alg)
        {
            return Err(format!("the key {:?} is for {alg}, not {:?}", header.kid, header.alg));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("the key is not usable: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // A token not valid yet (`nbf`) is refused like an expired one; both within 30 s of
        // clock skew between the identity provider and the gateway.
        validation.validate_nbf = true;
        validation.leeway = 30;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => "it has expired".to_owned(),
            ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_owned(),
            ErrorKind::InvalidIssuer => format!("it is not from the issuer {}", self.issuer),
            ErrorKind::InvalidAudience => format!("it is not for the audience {}", self.audience),
            ErrorKind::InvalidSignature => "its signature does not verify".to_owned(),
            ErrorKind::InvalidAlgorithm => format!("{:?} does not fit the key", header.alg),
            ErrorKind::MissingRequiredClaim(claim) => format!("it has no {claim} claim"),
            _ => e.to_string(),
        })?;
        let scope = self.scope(&data.claims.rest)?;
        let records = has_scope(&data.claims.rest, &self.records_scope);
        let candidates = has_scope(&data.claims.rest, &self.candidates_scope);
        Ok(Verified { subject: data.claims.sub, scope, records, candidates })
    }

    fn scope(&self, claims: &serde_json::Map<String, serde_json::Value>) -> Result<Scope, String> {
        let Some((name, required)) = &self.agents_claim else { return Ok(Scope::unrestricted()) };
        let patterns: Vec<&str> = match claims.get(name) {
            None if *required => return Err(format!("it has no {name} claim (the agents it may reach)")),
            None => return Ok(Scope::unrestricted()),
            Some(serde_json::Value::String(text)) => text.split_whitespace().collect(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().ok_or_else(|| format!("its {name} claim holds a non-string {item}")))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("its {name} claim is {other}, not a list of agent patterns")),
        };
        Scope::parse(patterns).map_err(|e| format!("its {name} claim: {e}"))
    }
}

/// Whether the token's `scope` (space-separated) or `scp` (array or string) lists `wanted`.
fn has_scope(claims: &serde_json::Map<String, serde_json::Value>, wanted: &str) -> bool {
    let listed = |value: &serde_json::Value| match value {
        serde_json::Value::String(text) => text.split_whitespace().any(|s| s == wanted),
        serde_json::Value::Array(items) => items.iter().any(|item| item.as_str() == Some(wanted)),
        _ => false,
    };
    !wanted.is_empty() && ["scope", "scp"].iter().any(|name| claims.get(*name).is_some_and(listed))
}

#[derive(Debug, serde::Deserialize)]
struct Claims {
    sub: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

pub(super) fn parse_jwks(text: &str) -> Result<JwkSet, JwksError> {
    let set: JwkSet = serde_json::from_str(text).map_err(|e| JwksError(e.to_string()))?;
    if set.keys.is_empty() {
        return Err(JwksError("it has no keys".into()));
    }
    for jwk in &set.keys {
        DecodingKey::from_jwk(jwk).map_err(|e| JwksError(format!("key {:?}: {e}", jwk.common.key_id)))?;
    }
    Ok(set)
}
