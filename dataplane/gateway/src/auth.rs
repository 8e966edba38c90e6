//! Who may open a session: API keys and browser origins.
//!
//! - **API keys** (`--api-keys-file`): a client presents its key as `Authorization: Bearer
//!   <key>` or `X-Api-Key: <key>`. The file holds only SHA-256 digests, one key a line:
//!   `<name> <sha256 hex> [max concurrent sessions]` (`#` starts a comment), so a leaked
//!   file does not leak keys (`printf %s "$KEY" | sha256sum` makes a line). The name labels
//!   metrics and logs; the limit caps that key's live sessions. Without the file, no key is
//!   asked for (a development setting; the gateway says so at start).
//! - **Origins** (`--allowed-origin`, repeatable; `*` allows any): a request with an
//!   `Origin` header — a browser page — is refused unless its origin is listed. Clients that
//!   are not browsers send no `Origin`.
//!
//! Each refusal has its own close code and a message that says what to do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use switchboard_core::protocol::close_code;

/// A key's entry.
#[derive(Clone, Debug)]
struct KeyEntry {
    name: String,
    max_sessions: Option<usize>,
}

/// The gateway's client checks.
#[derive(Debug, Default)]
pub struct Auth {
    /// SHA-256 of each key -> its entry; `None`: keys are not required.
    keys: Option<HashMap<[u8; 32], KeyEntry>>,
    /// Allowed `Origin` values; `*` allows any.
    origins: Vec<String>,
    /// Live sessions per key name.
    live: Arc<Mutex<HashMap<String, usize>>>,
}

/// A refused client: the close code, the message for its `bidi_error`, the metric reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The WebSocket close code.
    pub code: u16,
    /// What happened and what to do.
    pub message: String,
    /// The metric label (`missing_key`, `unknown_key`, `origin`, `key_sessions`).
    pub reason: &'static str,
}

/// A problem in the API keys file.
#[derive(Debug, thiserror::Error)]
#[error("API keys file, line {line}: {message}; expected `<name> <sha256 hex> [max sessions]`")]
pub struct KeysFileError {
    /// The line number (from 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// An admitted client's hold on its key's session slot.
#[derive(Debug)]
pub struct Admission {
    /// The key's name, when keys are required.
    pub key: Option<String>,
    live: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(name) = &self.key {
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(count) = live.get_mut(name) {
                *count = count.saturating_sub(1);
            }
        }
    }
}

impl Auth {
    /// Checks with the keys of `keys_file` (its text; `None`: no keys required) and the
    /// allowed `origins`.
    pub fn new(keys_file: Option<&str>, origins: Vec<String>) -> Result<Self, KeysFileError> {
        let keys = keys_file.map(parse_keys).transpose()?;
        Ok(Self { keys, origins, live: Arc::default() })
    }

    /// Whether clients must present a key.
    pub fn requires_keys(&self) -> bool {
        self.keys.is_some()
    }

    /// Admits a client by its request headers, or says why not.
    pub fn admit(&self, headers: &HeaderMap) -> Result<Admission, Refusal> {
        if let Some(origin) = headers.get("origin").map(|o| o.to_str().unwrap_or("(not text)"))
            && !self.origins.iter().any(|allowed| allowed == "*" || allowed == origin)
        {
            return Err(Refusal {
                code: close_code::ORIGIN_NOT_ALLOWED,
                message: format!(
                    "pages from {origin} may not open sessions here; the gateway's operator can allow it with --allowed-origin"
                ),
                reason: "origin",
            });
        }
        let Some(keys) = &self.keys else {
            return Ok(Admission { key: None, live: self.live.clone() });
        };
        let presented = bearer(headers).ok_or_else(|| Refusal {
            code: close_code::UNAUTHORIZED,
            message: "this gateway needs an API key: send `Authorization: Bearer <key>` or `X-Api-Key: <key>`".into(),
            reason: "missing_key",
        })?;
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let entry = keys.get(&digest).ok_or_else(|| Refusal {
            code: close_code::UNAUTHORIZED,
            message: "the API key is not valid here; check it, or ask for a new one".into(),
            reason: "unknown_key",
        })?;
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let count = live.entry(entry.name.clone()).or_default();
        if let Some(max) = entry.max_sessions
            && *count >= max
        {
            return Err(Refusal {
                code: close_code::TOO_MANY_SESSIONS,
                message: format!("the API key {:?} already has its {max} sessions open; close one first", entry.name),
                reason: "key_sessions",
            });
        }
        *count += 1;
        Ok(Admission { key: Some(entry.name.clone()), live: self.live.clone() })
    }
}

/// The key a request presents, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty());
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty())
}

fn parse_keys(text: &str) -> Result<HashMap<[u8; 32], KeyEntry>, KeysFileError> {
    let mut keys = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| KeysFileError { line: index + 1, message };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (name, digest, max) = match fields.as_slice() {
            [name, digest] => (name, digest, None),
            [name, digest, max] => (name, digest, Some(max)),
            _ => return Err(error(format!("{} fields", fields.len()))),
        };
        let bytes = hex::decode(digest).map_err(|e| error(format!("the digest is not hex: {e}")))?;
        let digest: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| error(format!("the digest has {} bytes, not 32", b.len())))?;
        let max_sessions =
            max.map(|m| m.parse::<usize>().map_err(|e| error(format!("max sessions {m:?}: {e}")))).transpose()?;
        if keys.insert(digest, KeyEntry { name: (*name).to_owned(), max_sessions }).is_some() {
            return Err(error("the same key is listed twice".into()));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn digest(key: &str) -> String {
        hex::encode(Sha256::digest(key.as_bytes()))
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    #[test]
    fn keys_are_checked_by_digest_and_limited_per_key() {
        let file = format!("# team keys\nalpha {} 1\nbeta {}  # no limit\n", digest("a-key"), digest("b-key"));
        let auth = Auth::new(Some(&file), vec![]).expect("valid file");
        let first = auth.admit(&headers(&[("authorization", "Bearer a-key")])).expect("admitted");
        assert_eq!(first.key.as_deref(), Some("alpha"));
        let second = auth.admit(&headers(&[("x-api-key", "a-key")])).expect_err("over its limit");
        assert_eq!((second.code, second.reason), (close_code::TOO_MANY_SESSIONS, "key_sessions"));
        drop(first);
        assert!(auth.admit(&headers(&[("x-api-key", "a-key")])).is_ok(), "the slot came back");
        assert!(auth.admit(&headers(&[("authorization", "bearer b-key")])).is_ok());
        let unknown = auth.admit(&headers(&[("authorization", "Bearer nope")])).expect_err("unknown");
        assert_eq!((unknown.code, unknown.reason), (close_code::UNAUTHORIZED, "unknown_key"));
        let missing = auth.admit(&headers(&[])).expect_err("missing");
        assert_eq!((missing.code, missing.reason), (close_code::UNAUTHORIZED, "missing_key"));
        let basic = auth.admit(&headers(&[("authorization", "Basic a-key")])).expect_err("not a bearer");
        assert_eq!(basic.reason, "missing_key");
    }

    #[test]
    fn browser_origins_need_the_allowlist() {
        let open = Auth::new(None, vec!["https://bank.example".into()]).expect("auth");
        assert!(open.admit(&headers(&[])).is_ok(), "no Origin: not a browser");
        assert!(open.admit(&headers(&[("origin", "https://bank.example")])).is_ok());
        let refused = open.admit(&headers(&[("origin", "https://evil.example")])).expect_err("foreign page");
        assert_eq!((refused.code, refused.reason), (close_code::ORIGIN_NOT_ALLOWED, "origin"));
        let any = Auth::new(None, vec!["*".into()]).expect("auth");
        assert!(any.admit(&headers(&[("origin", "https://evil.example")])).is_ok());
    }

    #[test]
    fn a_bad_keys_file_names_its_line() {
        let error = Auth::new(Some("ok x\n"), vec![]).expect_err("bad digest");
        assert_eq!(error.line, 1);
        let twice = format!("a {d}\nb {d}\n", d = digest("k"));
        assert_eq!(Auth::new(Some(&twice), vec![]).expect_err("duplicate").line, 2);
        assert!(Auth::new(Some(&format!("a {} many\n", digest("k"))), vec![]).is_err());
    }
}
