//! The API keys file (`--api-keys-file`): one key a line, as a SHA-256 digest, so a leaked
//! file does not leak keys (`printf %s "$KEY" | sha256sum` makes a line):
//!
//! ```text
//! # name     sha256 of the key                                                  options
//! web        3c9909afec25354d551dae21590bb26e38d53f2173b8d3dc3eee4c047e7ab1c1   sessions=100 rate=500 agents=bank/triage
//! partner    b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c   agents=shop/*
//! batch      7d865e959b2466918c9863afca942d0fb89d7c9ac0c99bafc3749504ded97730   10 -
//! ```
//!
//! After the digest come options: `sessions=N` (most live sessions of the key on one
//! gateway replica; `-` for no cap; without it the gateway's `--max-sessions-per-key`,
//! [`DEFAULT_KEY_SESSIONS`](super::DEFAULT_KEY_SESSIONS) unless set),
//! `rate=N` (most messages a second, all its sessions together, bursts of twice that) and
//! `agents=P,P,...` (the Agents it may reach, as [`Scope`] patterns), `records=read` (it may
//! read the conversation record, `/v1/sessions`, of sessions in the namespaces its scope
//! reaches; no session key needs it, an operator's tool does), `candidates=test` (its
//! sessions may ask for the candidate pods of Agents whose rollout waits for their
//! AgentTests, `session_start.candidate`: the key the AgentTest Jobs use), `calls=place` (it
//! may place outbound calls, `POST /v1/calls`, to the Agents its scope reaches) or
//! `calls=edge` (it is a SIP edge's key: it takes the calls to place, `/v1/calls/edge`). The older positional
//! form, `[max sessions] [max messages per second]` with `-` for none, still reads.
//! `#` starts a comment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use super::Bucket;
use super::scope::Scope;

/// A key's entry.
#[derive(Clone, Debug)]
pub(super) struct KeyEntry {
    name: String,
    /// Most live sessions: `None` where the line sets none (the gateway's default applies),
    /// `Some(None)` for `sessions=-` (no cap).
    max_sessions: Option<Option<usize>>,
    /// The key's message budget, shared by its sessions.
    rate: Option<Arc<Mutex<Bucket>>>,
    /// The Agents it may reach.
    scope: Arc<Scope>,
    /// It may read the conversation record.
    records: bool,
    /// It may open test sessions on candidate pods.
    candidates: bool,
    /// Its part in outbound calls, if any.
    calls: Option<CallAccess>,
}

/// A key's part in outbound calls (`calls=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallAccess {
    /// `calls=place`: it places calls (`POST /v1/calls`).
    Place,
    /// `calls=edge`: a SIP edge's key, which takes the calls to place.
    Edge,
}

/// What a key's session is held with: its name, its cap on live sessions, its message
/// budget, the Agents it may reach and whether it may open test sessions.
#[derive(Debug)]
pub(super) struct KeySession {
    /// The key's name (its live sessions are counted under it).
    pub name: String,
    /// Most live sessions (`None`: no cap).
    pub max: Option<usize>,
    /// The key's message budget, shared by its sessions.
    pub rate: Option<Arc<Mutex<Bucket>>>,
    /// The Agents it may reach, and whether it may reach candidate pods.
    pub scope: (Arc<Scope>, bool),
}

impl KeyEntry {
    /// The key's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The Agents whose conversation record the key may read; none when it may read none.
    pub(super) fn records_scope(&self) -> Option<Arc<Scope>> {
        self.records.then(|| self.scope.clone())
    }

    /// The key's part in outbound calls.
    pub(super) fn calls(&self) -> Option<CallAccess> {
        self.calls
    }

    /// The Agents the key reaches.
    pub(super) fn scope(&self) -> Arc<Scope> {
        self.scope.clone()
    }

    /// What a session of this key is held with; `default_max` caps its live sessions where
    /// its line sets no cap of its own.
    pub(super) fn session(self, default_max: Option<usize>) -> KeySession {
        KeySession {
            max: self.max_sessions.unwrap_or(default_max),
            rate: self.rate,
            scope: (self.scope, self.candidates),
            name: self.name,
        }
    }
}

/// A problem in the API keys file.
#[derive(Debug, thiserror::Error)]
#[error(
    "API keys file, line {line}: {message}; expected `<name> <sha256 hex> [sessions=N] [rate=N] [agents=<ns>/<agent>,...] [records=read] [candidates=test] [calls=place|edge]`"
)]
pub struct KeysFileError {
    /// The line number (from 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The API keys in use, replaced whole when the keys file changes ([`KeyRing::reload`]):
/// a key taken out is refused from the next session on (its live sessions go on), a key
/// added works at once. Shared by the gateway's checks and the task that watches the file.
#[derive(Clone, Debug, Default)]
pub struct KeyRing(Arc<RwLock<Arc<Keys>>>);

/// Keys by the SHA-256 of each.
type Keys = HashMap<[u8; 32], KeyEntry>;

impl KeyRing {
    pub(super) fn new(keys: Keys) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(keys))))
    }

    /// The entry of the key whose SHA-256 is `digest`.
    pub(super) fn get(&self, digest: &[u8; 32]) -> Option<KeyEntry> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).get(digest).cloned()
    }

    /// Takes the keys of `text` (a keys file) instead of the ones in use; a file that does
    /// not read leaves them as they are. Returns how many keys there are now.
    pub fn reload(&self, text: &str) -> Result<usize, KeysFileError> {
        let keys = parse(text)?;
        let count = keys.len();
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
        Ok(count)
    }
}

/// The keys of a keys file's text, by digest.
pub(super) fn parse(text: &str) -> Result<HashMap<[u8; 32], KeyEntry>, KeysFileError> {
    let mut keys = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| KeysFileError { line: index + 1, message };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, digest, options @ ..] = fields.as_slice() else {
            return Err(error(format!("{} field", fields.len())));
        };
        let bytes = hex::decode(digest).map_err(|e| error(format!("the digest is not hex: {e}")))?;
        let digest: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| error(format!("the digest has {} bytes, not 32", b.len())))?;
        let options = Options::parse(options).map_err(error)?;
        let entry = KeyEntry {
            name: (*name).to_owned(),
            max_sessions: options.sessions,
            rate: options.rate.map(|n| Arc::new(Mutex::new(super::message_bucket(n)))),
            scope: Arc::new(options.scope),
            records: options.records,
            candidates: options.candidates,
            calls: options.calls,
        };
        if keys.insert(digest, entry).is_some() {
            return Err(error("the same key is listed twice".into()));
        }
    }
    Ok(keys)
}

/// What follows a key's digest.
#[derive(Debug, Default)]
struct Options {
    sessions: Option<Option<usize>>,
    rate: Option<u32>,
    scope: Scope,
    records: bool,
    candidates: bool,
    calls: Option<CallAccess>,
}

impl Options {
    fn parse(fields: &[&str]) -> Result<Self, String> {
        let mut options = Self::default();
        let (mut positional, mut named) = (0, false);
        for field in fields {
            let (name, value) = match field.split_once('=') {
                Some((name, value)) => {
                    named = true;
                    (name, value)
                }
                // The older form: max sessions, then max messages a second, before any option.
                None if positional < 2 && !named => {
                    positional += 1;
                    (if positional == 1 { "sessions" } else { "rate" }, *field)
                }
                None => return Err(format!("{field:?} is not an option (name=value)")),
            };
            match name {
                "sessions" => {
                    options.sessions = Some(whole(name, value, 0)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
                }
                "rate" => options.rate = whole(name, value, 1)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                "agents" => options.scope = Scope::parse(value.split(',')).map_err(|e| e.to_string())?,
                "records" if value == "read" => options.records = true,
                "records" => return Err(format!("records {value:?}: the one access is `records=read`")),
                "candidates" if value == "test" => options.candidates = true,
                "candidates" => return Err(format!("candidates {value:?}: the one access is `candidates=test`")),
                "calls" if value == "place" => options.calls = Some(CallAccess::Place),
                "calls" if value == "edge" => options.calls = Some(CallAccess::Edge),
                "calls" => {
                    return Err(format!("calls {value:?}: `calls=place` (places calls) or `calls=edge` (a SIP edge)"));
                }
                other => {
                    return Err(format!(
                        "unknown option {other:?} (sessions, rate, agents, records, candidates, calls)"
                    ));
                }
            }
        }
        if options.records && options.scope.is_unrestricted() {
            // A reader names the namespaces it reads: leaving agents out is not every namespace.
            return Err("records=read needs agents= naming the namespaces the key may read (agents=bank/*, or \
                        agents=* for every one)"
                .into());
        }
        Ok(options)
    }
}

/// A whole number of at least `min`, or `-` for none.
fn whole(name: &str, value: &str, min: u64) -> Result<Option<u64>, String> {
    if value == "-" {
        return Ok(None);
    }
    match value.parse::<u64>() {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(format!("{name} {value:?}: a whole number of at least {min}, or -")),
    }
}
