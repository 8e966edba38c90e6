//! Who may open a session: API keys, JWTs and browser origins.
//!
//! - **API keys** (`--api-keys-file`, format in [`keys`]): a client presents its key as
//!   `Authorization: Bearer <key>`, `X-Api-Key: <key>` or (browsers, which cannot set
//!   headers on a WebSocket) the `access_token` query parameter. The file holds only
//!   SHA-256 digests. A key's name labels metrics and logs; its options cap its live
//!   sessions, the messages all its sessions send together, and the Agents it may reach.
//! - **JWTs** (`--jwks-file` with `--jwt-issuer` and `--jwt-audience`), presented the same
//!   ways: signed by a key of the JWKS (by `kid`; the key's own algorithm only), not
//!   expired, from that issuer for that audience, with a subject. The session's identity
//!   is `jwt:<sub>`; a claim may restrict the Agents it reaches ([`Jwt::with_agents_claim`]),
//!   and [`SubjectLimits`] cap each subject's live sessions and messages.
//!
//! Without keys or a JWKS, no credential is asked for (a development setting; the gateway
//! says so at start).
//! - **Origins** (`--allowed-origin`, repeatable; `*` allows any): a request with an
//!   `Origin` header — a browser page — is refused unless its origin is listed. Clients that
//!   are not browsers send no `Origin`.
//!
//! Each refusal has its own close code and a message that says what to do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use switchboard_protocol::{ErrorCode, close_code};

mod app_context;
mod calls;
mod jwt;
pub mod keys;
mod origin;
mod records;
mod scope;
pub use app_context::{
    AppClaims, AppContextError, AppContextKeys, Checked, LEEWAY_SECS, MAX_LIFETIME_SECS, MAX_TOKEN_BYTES, Taken,
};
pub use calls::CallAccess;
pub use jwt::{DEFAULT_CANDIDATES_SCOPE, DEFAULT_RECORDS_SCOPE, JwksError, Jwt, Verified};
pub use keys::KeysFileError;
pub use records::ReadRefusal;
pub use scope::{Scope, ScopeError};

pub use switchboard_serve::TokenBucket as Bucket;

/// A full message bucket of `per_second` a second, with bursts of up to two seconds' worth
/// (the gateway's rate limits: per session, per API key, per JWT subject).
pub fn message_bucket(per_second: u32) -> Bucket {
    Bucket::new(per_second, per_second.saturating_mul(2))
}

type SharedBucket = Arc<Mutex<Bucket>>;

/// Most live sessions of an API key whose line in the keys file sets none (`sessions=N`;
/// `sessions=-` for none), on one gateway replica: a tenth of a replica's default
/// `--max-sessions`, so that one key (a leaked one, or one tenant's) cannot take the whole
/// gateway. A key shared by a busy site's pages sets its own.
pub const DEFAULT_KEY_SESSIONS: usize = 1000;

/// Most live sessions of one JWT subject (`sub`) unless set otherwise: a person holds a few
/// sessions at once, not dozens. A service whose one token carries many callers raises it.
pub const DEFAULT_SUBJECT_SESSIONS: usize = 10;

/// Limits for each JWT subject (an API key carries its own in the keys file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubjectLimits {
    /// Most live sessions of one subject (default [`DEFAULT_SUBJECT_SESSIONS`]).
    pub max_sessions: Option<usize>,
    /// Most messages a second of one subject, all its sessions together.
    pub max_messages_per_second: Option<u32>,
}

impl Default for SubjectLimits {
    fn default() -> Self {
        Self { max_sessions: Some(DEFAULT_SUBJECT_SESSIONS), max_messages_per_second: None }
    }
}

/// A credential's live sessions, and its message budget while it has any (a JWT
/// subject's) or always (an API key's, from the keys file).
#[derive(Debug)]
struct Live {
    sessions: usize,
    rate: Option<SharedBucket>,
}

/// Live sessions per identity (key name or `jwt:<sub>`). A JWT subject's entry goes when
/// its last session ends and its budget has refilled, so the map holds live identities
/// (and, for two seconds at most, recently spent ones).
type LiveMap = Arc<Mutex<HashMap<String, Live>>>;

/// Past this many entries, [`Auth::admit`] sweeps out idle ones before adding one.
const SWEEP_ABOVE: usize = 1024;

/// The gateway's client checks.
#[derive(Debug, Default)]
pub struct Auth {
    /// SHA-256 of each key -> its entry; `None`: keys are not required.
    keys: Option<keys::KeyRing>,
    /// JWT checks, when configured.
    jwt: Option<Arc<Jwt>>,
    /// Limits per JWT subject.
    subject_limits: SubjectLimits,
    /// Most live sessions of a key whose line sets none.
    key_sessions: KeySessions,
    /// Allowed `Origin` values; `*` allows any.
    origins: Vec<String>,
    /// Whether the gateway's own page may open sessions (local mode; see [`Auth::with_own_page`]).
    own_page: bool,
    /// Whether the conversation record may be read without a credential (local mode, on
    /// this machine only; see [`Auth::records_reader`]).
    open_records: bool,
    /// Whether, without credentials, any client may open test sessions on candidate pods
    /// ([`Auth::with_open_tests`]).
    open_tests: bool,
    /// The app backends whose context tokens sessions may start with, when configured.
    app_context: Option<Arc<AppContextKeys>>,
    live: LiveMap,
}

/// Most live sessions of an API key that sets none ([`Auth::with_key_sessions`]).
#[derive(Clone, Copy, Debug)]
struct KeySessions(Option<usize>);

impl Default for KeySessions {
    fn default() -> Self {
        Self(Some(DEFAULT_KEY_SESSIONS))
    }
}

/// A refused client: the close code, the message for its `bidi_error`, the metric reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The WebSocket close code.
    pub code: u16,
    /// What happened and what to do.
    pub message: String,
    /// The `bidi_error` code, also the metric label (`missing_key`, `unknown_key`,
    /// `invalid_token`, `origin`, `key_sessions`, `key_rate`, `agent_not_allowed`).
    pub reason: ErrorCode,
}

/// An admitted client's hold on its credential's session slot.
#[derive(Debug)]
pub struct Admission {
    /// Who the client is: the key's name, `jwt:<subject>`, or none without checks.
    pub key: Option<String>,
    /// The credential's message budget, shared by its sessions.
    pub rate: Option<SharedBucket>,
    /// The Agents the credential may reach.
    pub scope: Arc<Scope>,
    /// Whether the credential may open test sessions on candidate pods
    /// (`session_start.candidate`): an API key marked `candidates=test`, a token with the
    /// candidates scope, or any client of a gateway that requires no credential and opens
    /// test sessions ([`Auth::with_open_tests`]).
    pub candidates: bool,
    /// Whether a session slot of `key` is held (released on drop).
    counted: bool,
    live: LiveMap,
}

impl Admission {
    /// Takes a message from the credential's budget; `Err` is the refusal when it is spent.
    pub fn allow_message(&self) -> Result<(), Refusal> {
        let Some(rate) = &self.rate else { return Ok(()) };
        let mut bucket = rate.lock().unwrap_or_else(PoisonError::into_inner);
        if bucket.take(Instant::now()) {
            return Ok(());
        }
        Err(Refusal {
            code: close_code::RATE_LIMITED,
            message: format!(
                "{} sends more than {} messages a second across its sessions; send fewer",
                self.who(),
                bucket.per_second()
            ),
            reason: ErrorCode::KeyRate,
        })
    }

    /// Whether the session may ask for candidate pods (`session_start.candidate`).
    pub fn allow_candidates(&self) -> Result<(), Refusal> {
        if self.candidates {
            return Ok(());
        }
        Err(Refusal {
            code: close_code::NOT_EXPOSED,
            message: match self.key {
                Some(_) => format!(
                    "{} may not open test sessions on candidate pods (session_start.candidate): use a credential \
                     marked for tests (an API key with candidates=test, or a token with the candidates scope), or \
                     leave candidate out",
                    self.who()
                ),
                None => "this gateway asks no credential, so it opens no test sessions on candidate pods \
                         (session_start.candidate): give it an API key marked candidates=test (--api-keys-file, \
                         chart gateway.apiKeysSecret) and use that key, or start it with --open-test-sessions \
                         (chart gateway.openTestSessions) where every client may test"
                    .to_owned(),
            },
            reason: ErrorCode::CandidateNotAllowed,
        })
    }

    /// Whether a new session may start at `namespace/agent`.
    pub fn allow_agent(&self, namespace: &str, agent: &str) -> Result<(), Refusal> {
        if self.scope.allows_agent(namespace, agent) {
            return Ok(());
        }
        Err(self.out_of_scope(format!("{namespace}/{agent}")))
    }

    /// Whether a parked session of `namespace` may be resumed (it may sit at an Agent it
    /// was handed to; handoffs stay in their namespace).
    pub fn allow_namespace(&self, namespace: &str) -> Result<(), Refusal> {
        if self.scope.allows_namespace(namespace) {
            return Ok(());
        }
        Err(self.out_of_scope(format!("the namespace {namespace}")))
    }

    fn out_of_scope(&self, what: String) -> Refusal {
        Refusal {
            code: close_code::NOT_EXPOSED,
            message: format!(
                "{} may not reach {what}; it may reach {}. Ask for a credential for that agent, or start at one of those",
                self.who(),
                self.scope
            ),
            reason: ErrorCode::AgentNotAllowed,
        }
    }

    /// The subject of the client's credential: a JWT's `sub`, an API key's name; none
    /// without a credential. An app-context token bound to its client names it (`sub`).
    pub fn subject(&self) -> Option<&str> {
        self.key.as_deref().map(|key| key.strip_prefix("jwt:").unwrap_or(key))
    }

    fn who(&self) -> String {
        match self.key.as_deref() {
            Some(jwt) if jwt.starts_with("jwt:") => format!("the token's subject {:?}", &jwt[4..]),
            Some(name) => format!("the API key {name:?}"),
            None => "this client".into(),
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let Some(name) = self.key.as_ref().filter(|_| self.counted) else { return };
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = live.get_mut(name) else { return };
        entry.sessions = entry.sessions.saturating_sub(1);
        if entry.sessions == 0 && name.starts_with("jwt:") && idle(entry, Instant::now()) {
            live.remove(name);
        }
    }
}

/// A JWT subject's entry that holds nothing: no session, and a budget that refilled.
fn idle(entry: &Live, now: Instant) -> bool {
    entry.sessions == 0
        && entry.rate.as_ref().is_none_or(|rate| rate.lock().unwrap_or_else(PoisonError::into_inner).is_full(now))
}

impl Auth {
    /// Checks with the keys of `keys_file` (its text; `None`: no keys required) and the
    /// allowed `origins`.
    pub fn new(keys_file: Option<&str>, origins: Vec<String>) -> Result<Self, KeysFileError> {
        let keys = keys_file.map(keys::parse).transpose()?.map(keys::KeyRing::new);
        Ok(Self { keys, origins, ..Self::default() })
    }

    /// The API keys in use, to replace when the keys file changes (none when no keys file
    /// was given).
    pub fn key_ring(&self) -> Option<keys::KeyRing> {
        self.keys.clone()
    }

    /// Caps the live sessions of each API key whose line in the keys file sets no
    /// `sessions=` at `max` (`None`: no cap); [`DEFAULT_KEY_SESSIONS`] unless set.
    pub fn with_key_sessions(mut self, max: Option<usize>) -> Self {
        self.key_sessions = KeySessions(max);
        self
    }

    /// Also admits the page this server serves itself (local mode's chat page): a request
    /// whose `Origin` is `http(s)://` + its `Host`, when that host is an IP address or
    /// `localhost`. A host name is not enough: a page of another site can make its own name
    /// resolve to this address (DNS rebinding), and its requests then carry that name as
    /// both `Origin` and `Host`.
    pub fn with_own_page(mut self) -> Self {
        self.own_page = true;
        self
    }

    /// Trusts the context tokens of the app backends `keys` holds
    /// (`session_start.app_context`; see [`AppContextKeys`]).
    pub fn with_app_context(mut self, keys: Arc<AppContextKeys>) -> Self {
        self.app_context = Some(keys);
        self
    }

    /// Checks a new session's `session_start.app_context` token, presented by a client
    /// whose credential's subject is `client` ([`Admission::subject`]), leaving its id to be
    /// taken ([`Auth::take_app_context_here`], or the store the gateway's replicas share).
    pub fn app_context(&self, token: &str, client: Option<&str>) -> Result<Checked, AppContextError> {
        let Some(keys) = &self.app_context else {
            return Err(AppContextError::NotAccepted(
                "session_start.app_context: this gateway trusts no app backend's context (it has no app-context keys: \
                 --app-context-jwks-file, chart gateway.appContext); leave it out, or configure the keys"
                    .into(),
            ));
        };
        keys.check(token, client)
    }

    /// Takes the id of a `checked` app-context token in this process (a gateway without a
    /// shared store: once on this replica).
    pub fn take_app_context_here(&self, checked: &Checked) -> Result<(), AppContextError> {
        match &self.app_context {
            Some(keys) => keys.take_here(checked),
            None => Err(AppContextError::NotAccepted("this gateway trusts no app backend's context".into())),
        }
    }

    /// Lets any client open test sessions on candidate pods when no credentials are required
    /// (`--open-test-sessions`; local mode on loopback). Otherwise a gateway without
    /// credentials refuses them: a candidate runs a spec nobody approved yet.
    pub fn with_open_tests(mut self) -> Self {
        self.open_tests = true;
        self
    }

    /// Lets anyone on this machine read the conversation record when no credentials are
    /// required (local mode, bound to loopback): any request that names the server by an IP
    /// address or `localhost` in its `Host` (see [`Auth::open_data`]).
    pub fn with_open_records(mut self) -> Self {
        self.open_records = true;
        self
    }

    /// Whether a session may be continued (`session_start.continue_from`) by a client with
    /// no credential: only where the record is open (local mode on this machine). Elsewhere
    /// anyone could continue anyone's session by its id.
    pub fn continues_without_credential(&self) -> bool {
        !self.requires_keys() && self.open_records
    }

    /// Also admits clients with a JWT that `jwt` accepts, each subject within `limits`.
    pub fn with_jwt(mut self, jwt: Arc<Jwt>, limits: SubjectLimits) -> Self {
        self.jwt = Some(jwt);
        self.subject_limits = limits;
        self
    }

    /// Whether clients must present a credential (an API key or a JWT).
    pub fn requires_keys(&self) -> bool {
        self.keys.is_some() || self.jwt.is_some()
    }

    /// Admits a client by its request headers (and the `access_token` query parameter),
    /// or says why not.
    pub fn admit(&self, headers: &HeaderMap, query_token: Option<&str>) -> Result<Admission, Refusal> {
        if let Some(origin) = headers.get("origin").map(|o| o.to_str().unwrap_or("(not text)"))
            && !self.allows_origin(origin, headers)
        {
            return Err(Refusal {
                code: close_code::ORIGIN_NOT_ALLOWED,
                message: format!(
                    "pages from {origin} may not open sessions here; the gateway's operator can allow it with --allowed-origin"
                ),
                reason: ErrorCode::Origin,
            });
        }
        if !self.requires_keys() {
            // Without credentials every client reaches every exposed Agent; it may test only
            // where that was asked for.
            return Ok(Admission {
                key: None,
                rate: None,
                scope: Arc::default(),
                candidates: self.open_tests,
                counted: false,
                live: self.live.clone(),
            });
        }
        let presented =
            bearer(headers).or(query_token.map(str::trim).filter(|t| !t.is_empty())).ok_or_else(|| Refusal {
                code: close_code::UNAUTHORIZED,
                message: "this gateway needs an API key or a token: send `Authorization: Bearer <credential>`, \
                          `X-Api-Key: <key>`, or the `access_token` query parameter"
                    .into(),
                reason: ErrorCode::MissingKey,
            })?;
        if let Some(jwt) = &self.jwt
            && looks_like_jwt(presented)
        {
            let verified = jwt.verify(presented).map_err(|why| Refusal {
                code: close_code::UNAUTHORIZED,
                message: format!("the token is not accepted: {why}; get a fresh one"),
                reason: ErrorCode::InvalidToken,
            })?;
            let limits = self.subject_limits;
            let rate = limits.max_messages_per_second.map(|n| Arc::new(Mutex::new(message_bucket(n))));
            let name = format!("jwt:{}", verified.subject);
            let scope = (Arc::new(verified.scope), verified.candidates);
            return self.hold(name, limits.max_sessions, rate, scope);
        }
        // A long-lived key in a URL ends up in proxies' and servers' logs: the query parameter
        // is for browsers, which cannot set headers on a WebSocket (they always send Origin).
        if bearer(headers).is_none() && !headers.contains_key("origin") {
            return Err(Refusal {
                code: close_code::UNAUTHORIZED,
                message: "an API key is taken from the access_token query parameter only from a browser page (which \
                          cannot set headers on a WebSocket): send it as `Authorization: Bearer <key>` or \
                          `X-Api-Key: <key>`"
                    .into(),
                reason: ErrorCode::MissingKey,
            });
        }
        let entry =
            self.keys.as_ref().and_then(|keys| keys.get(&<[u8; 32]>::from(Sha256::digest(presented.as_bytes()))));
        let entry = entry.ok_or_else(|| Refusal {
            code: close_code::UNAUTHORIZED,
            message: "the API key is not valid here; check it, or ask for a new one".into(),
            reason: ErrorCode::UnknownKey,
        })?;
        let keys::KeySession { name, max, rate, scope } = entry.session(self.key_sessions.0);
        self.hold(name, max, rate, scope)
    }

    /// Takes a session slot of `name` (at most `max`); its budget is the one already held
    /// for `name` if any (a JWT subject's live sessions share one), else `rate`. The
    /// admission reaches `scope`, and candidate pods if `candidates`.
    fn hold(
        &self,
        name: String,
        max: Option<usize>,
        rate: Option<SharedBucket>,
        (scope, candidates): (Arc<Scope>, bool),
    ) -> Result<Admission, Refusal> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if live.len() > SWEEP_ABOVE {
            let now = Instant::now();
            live.retain(|name, entry| !name.starts_with("jwt:") || !idle(entry, now));
        }
        let entry = live.entry(name.clone()).or_insert(Live { sessions: 0, rate });
        if let Some(max) = max
            && entry.sessions >= max
        {
            let who = match name.strip_prefix("jwt:") {
                Some(subject) => format!("the token's subject {subject:?}"),
                None => format!("the API key {name:?}"),
            };
            return Err(Refusal {
                code: close_code::TOO_MANY_SESSIONS,
                message: format!("{who} already has its {max} sessions open; close one first"),
                reason: ErrorCode::KeySessions,
            });
        }
        entry.sessions += 1;
        Ok(Admission {
            key: Some(name),
            rate: entry.rate.clone(),
            scope,
            candidates,
            counted: true,
            live: self.live.clone(),
        })
    }
}

/// Three base64url parts: a JWS compact serialization.
fn looks_like_jwt(credential: &str) -> bool {
    credential.starts_with("eyJ") && credential.split('.').count() == 3
}

/// The key a request presents, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty());
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
