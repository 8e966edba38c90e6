//! Who may open a session: API keys, JWTs and browser origins.
//!
//! - **API keys** (`--api-keys-file`): a client presents its key as `Authorization: Bearer
//!   <key>`, `X-Api-Key: <key>` or (browsers, which cannot set headers on a WebSocket) the
//!   `access_token` query parameter. The file holds only SHA-256 digests, one key a line:
//!   `<name> <sha256 hex> [max concurrent sessions] [max messages per second]` (`#` starts
//!   a comment; `-` leaves a limit out), so a leaked file does not leak keys (`printf %s
//!   "$KEY" | sha256sum` makes a line). The name labels metrics and logs; the limits cap
//!   that key's live sessions and the messages all its sessions send together.
//! - **JWTs** (`--jwks-file` with `--jwt-issuer` and `--jwt-audience`), presented the same
//!   ways: signed by a key of the JWKS (by `kid`; the key's own algorithm only), not
//!   expired, from that issuer for that audience, with a subject. The session's identity
//!   is `jwt:<sub>`.
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
use switchboard_core::protocol::close_code;

mod jwt;
pub use jwt::{JwksError, Jwt};

/// A key's entry.
#[derive(Clone, Debug)]
struct KeyEntry {
    name: String,
    max_sessions: Option<usize>,
    /// The key's message budget, shared by its sessions.
    rate: Option<Arc<Mutex<Bucket>>>,
}

/// A token bucket: `per_second` messages a second, bursts up to two seconds' worth.
#[derive(Debug)]
pub struct Bucket {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `per_second` a second.
    pub fn new(per_second: u32) -> Self {
        let per_second = f64::from(per_second);
        Self { per_second, tokens: 2.0 * per_second, at: Instant::now() }
    }

    /// Takes one message's token; false when the budget is spent.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.per_second).min(2.0 * self.per_second);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The rate.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }
}

/// The gateway's client checks.
#[derive(Debug, Default)]
pub struct Auth {
    /// SHA-256 of each key -> its entry; `None`: keys are not required.
    keys: Option<HashMap<[u8; 32], KeyEntry>>,
    /// JWT checks, when configured.
    jwt: Option<Arc<Jwt>>,
    /// Allowed `Origin` values; `*` allows any.
    origins: Vec<String>,
    /// Whether the gateway's own page may open sessions (local mode; see [`Auth::with_own_page`]).
    own_page: bool,
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
    /// The metric label (`missing_key`, `unknown_key`, `invalid_token`, `origin`,
    /// `key_sessions`, `key_rate`).
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
    /// Who the client is: the key's name, `jwt:<subject>`, or none without checks.
    pub key: Option<String>,
    /// The key's message budget, shared by its sessions.
    pub rate: Option<Arc<Mutex<Bucket>>>,
    /// Whether a session slot of `key` is held (released on drop).
    counted: bool,
    live: Arc<Mutex<HashMap<String, usize>>>,
}

impl Admission {
    /// Takes a message from the key's budget; `Err` is the refusal when it is spent.
    pub fn allow_message(&self) -> Result<(), Refusal> {
        let Some(rate) = &self.rate else { return Ok(()) };
        let mut bucket = rate.lock().unwrap_or_else(PoisonError::into_inner);
        if bucket.take(Instant::now()) {
            return Ok(());
        }
        Err(Refusal {
            code: close_code::RATE_LIMITED,
            message: format!(
                "the key {:?} sends more than {} messages a second across its sessions; send fewer",
                self.key.as_deref().unwrap_or(""),
                bucket.per_second()
            ),
            reason: "key_rate",
        })
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(name) = self.key.as_ref().filter(|_| self.counted) {
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
        Ok(Self { keys, jwt: None, origins, own_page: false, live: Arc::default() })
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

    /// Also admits clients with a JWT that `jwt` accepts.
    pub fn with_jwt(mut self, jwt: Arc<Jwt>) -> Self {
        self.jwt = Some(jwt);
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
            && !self.origins.iter().any(|allowed| allowed == "*" || allowed == origin)
            && !(self.own_page && crate::origin::own_page(origin, headers))
        {
            return Err(Refusal {
                code: close_code::ORIGIN_NOT_ALLOWED,
                message: format!(
                    "pages from {origin} may not open sessions here; the gateway's operator can allow it with --allowed-origin"
                ),
                reason: "origin",
            });
        }
        let open = |key: Option<String>| Admission { key, rate: None, counted: false, live: self.live.clone() };
        if !self.requires_keys() {
            return Ok(open(None));
        }
        let presented =
            bearer(headers).or(query_token.map(str::trim).filter(|t| !t.is_empty())).ok_or_else(|| Refusal {
                code: close_code::UNAUTHORIZED,
                message: "this gateway needs an API key or a token: send `Authorization: Bearer <credential>`, \
                          `X-Api-Key: <key>`, or the `access_token` query parameter"
                    .into(),
                reason: "missing_key",
            })?;
        if let Some(jwt) = &self.jwt
            && looks_like_jwt(presented)
        {
            let subject = jwt.verify(presented).map_err(|why| Refusal {
                code: close_code::UNAUTHORIZED,
                message: format!("the token is not accepted: {why}; get a fresh one"),
                reason: "invalid_token",
            })?;
            return Ok(open(Some(format!("jwt:{subject}"))));
        }
        let entry =
            self.keys.as_ref().and_then(|keys| keys.get(&<[u8; 32]>::from(Sha256::digest(presented.as_bytes()))));
        let entry = entry.ok_or_else(|| Refusal {
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
        Ok(Admission {
            key: Some(entry.name.clone()),
            rate: entry.rate.clone(),
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

fn parse_keys(text: &str) -> Result<HashMap<[u8; 32], KeyEntry>, KeysFileError> {
    let mut keys = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| KeysFileError { line: index + 1, message };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (name, digest, max, rate) = match fields.as_slice() {
            [name, digest] => (name, digest, None, None),
            [name, digest, max] => (name, digest, Some(max), None),
            [name, digest, max, rate] => (name, digest, Some(max), Some(rate)),
            _ => return Err(error(format!("{} fields", fields.len()))),
        };
        let max = max.filter(|m| **m != "-");
        let rate = rate
            .filter(|r| **r != "-")
            .map(|r| match r.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Arc::new(Mutex::new(Bucket::new(n)))),
                _ => Err(error(format!("max messages per second {r:?}: a whole number above 0, or -"))),
            })
            .transpose()?;
        let bytes = hex::decode(digest).map_err(|e| error(format!("the digest is not hex: {e}")))?;
        let digest: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| error(format!("the digest has {} bytes, not 32", b.len())))?;
        let max_sessions =
            max.map(|m| m.parse::<usize>().map_err(|e| error(format!("max sessions {m:?}: {e}")))).transpose()?;
        if keys.insert(digest, KeyEntry { name: (*name).to_owned(), max_sessions, rate }).is_some() {
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
        let first = auth.admit(&headers(&[("authorization", "Bearer a-key")]), None).expect("admitted");
        assert_eq!(first.key.as_deref(), Some("alpha"));
        let second = auth.admit(&headers(&[("x-api-key", "a-key")]), None).expect_err("over its limit");
        assert_eq!((second.code, second.reason), (close_code::TOO_MANY_SESSIONS, "key_sessions"));
        drop(first);
        assert!(auth.admit(&headers(&[("x-api-key", "a-key")]), None).is_ok(), "the slot came back");
        assert!(auth.admit(&headers(&[("authorization", "bearer b-key")]), None).is_ok());
        let unknown = auth.admit(&headers(&[("authorization", "Bearer nope")]), None).expect_err("unknown");
        assert_eq!((unknown.code, unknown.reason), (close_code::UNAUTHORIZED, "unknown_key"));
        let missing = auth.admit(&headers(&[]), None).expect_err("missing");
        assert_eq!((missing.code, missing.reason), (close_code::UNAUTHORIZED, "missing_key"));
        let basic = auth.admit(&headers(&[("authorization", "Basic a-key")]), None).expect_err("not a bearer");
        assert_eq!(basic.reason, "missing_key");
    }

    #[test]
    fn browser_origins_need_the_allowlist() {
        let open = Auth::new(None, vec!["https://bank.example".into()]).expect("auth");
        assert!(open.admit(&headers(&[]), None).is_ok(), "no Origin: not a browser");
        assert!(open.admit(&headers(&[("origin", "https://bank.example")]), None).is_ok());
        let refused = open.admit(&headers(&[("origin", "https://evil.example")]), None).expect_err("foreign page");
        assert_eq!((refused.code, refused.reason), (close_code::ORIGIN_NOT_ALLOWED, "origin"));
        let any = Auth::new(None, vec!["*".into()]).expect("auth");
        assert!(any.admit(&headers(&[("origin", "https://evil.example")]), None).is_ok());
    }

    #[test]
    fn the_own_page_is_admitted_only_on_an_address() {
        let local = Auth::new(None, vec![]).expect("auth").with_own_page();
        for (origin, host) in [
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://localhost:8080", "localhost:8080"),
            ("http://[::1]:8080", "[::1]:8080"),
            ("http://192.168.1.5", "192.168.1.5"),
        ] {
            assert!(local.admit(&headers(&[("origin", origin), ("host", host)]), None).is_ok(), "{origin}");
        }
        for (origin, host) in [
            // DNS rebinding: a site's own name pointed at this address.
            ("http://evil.example:8080", "evil.example:8080"),
            // Another port or scheme-less mismatch: another page.
            ("http://127.0.0.1:9999", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080", ""),
        ] {
            let refused = local.admit(&headers(&[("origin", origin), ("host", host)]), None).expect_err(origin);
            assert_eq!(refused.code, close_code::ORIGIN_NOT_ALLOWED);
        }
        let strict = Auth::new(None, vec![]).expect("auth");
        assert!(
            strict.admit(&headers(&[("origin", "http://127.0.0.1:8080"), ("host", "127.0.0.1:8080")]), None).is_err(),
            "without with_own_page a gateway serves no page"
        );
    }

    /// An Ed25519 signing key and the JWKS with its public half under `kid`.
    fn jwt_key(seed: u8, kid: &str) -> (jsonwebtoken::EncodingKey, String) {
        use base64::Engine;
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let signing = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
        let der = signing.to_pkcs8_der().expect("pkcs8");
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signing.verifying_key().as_bytes());
        let jwks = serde_json::json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}]});
        (jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()), jwks.to_string())
    }

    fn token(key: &jsonwebtoken::EncodingKey, kid: &str, claims: serde_json::Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, key).expect("signs")
    }

    fn claims(iss: &str, aud: &str, exp_from_now: i64) -> serde_json::Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
        let exp = i64::try_from(now).expect("now") + exp_from_now;
        serde_json::json!({"sub": "user-7", "iss": iss, "aud": aud, "exp": exp})
    }

    #[test]
    fn jwts_are_checked_for_signature_key_issuer_audience_and_expiry() {
        let (key, jwks) = jwt_key(1, "k1");
        let jwt = Arc::new(Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into()).expect("jwks"));
        let auth = Auth::new(None, vec![]).expect("auth").with_jwt(jwt.clone());
        assert!(auth.requires_keys());
        let good = token(&key, "k1", claims("https://idp.example", "switchboard", 300));
        let admitted = auth.admit(&headers(&[("authorization", &format!("Bearer {good}"))]), None).expect("valid");
        assert_eq!(admitted.key.as_deref(), Some("jwt:user-7"));
        assert!(auth.admit(&headers(&[]), Some(&good)).is_ok(), "a browser's access_token query parameter");
        let refused = |token: &str, why: &str| {
            let refusal = auth.admit(&headers(&[]), Some(token)).expect_err(why);
            assert_eq!((refusal.code, refusal.reason), (close_code::UNAUTHORIZED, "invalid_token"), "{why}");
            assert!(refusal.message.contains(why), "{why}: {}", refusal.message);
        };
        refused(&token(&key, "k1", claims("https://idp.example", "switchboard", -300)), "expired");
        // Not valid before (nbf): refused while in the future beyond the clock skew allowed.
        let not_before = |from_now: i64| {
            let mut c = claims("https://idp.example", "switchboard", 600);
            c["nbf"] = serde_json::json!(c["exp"].as_i64().expect("exp") - 600 + from_now);
            token(&key, "k1", c)
        };
        refused(&not_before(120), "not valid yet (nbf)");
        assert!(auth.admit(&headers(&[]), Some(&not_before(10))).is_ok(), "within the 30 s of clock skew");
        assert!(auth.admit(&headers(&[]), Some(&not_before(-60))).is_ok(), "already valid");
        refused(&token(&key, "k1", claims("https://evil.example", "switchboard", 300)), "issuer");
        refused(&token(&key, "k1", claims("https://idp.example", "other", 300)), "audience");
        let (forger, _) = jwt_key(2, "k1");
        refused(&token(&forger, "k1", claims("https://idp.example", "switchboard", 300)), "signature");
        refused(&token(&key, "k9", claims("https://idp.example", "switchboard", 300)), "no key \"k9\"");
        let no_sub = serde_json::json!({"iss": "https://idp.example", "aud": "switchboard", "exp": 4_000_000_000u64});
        refused(&token(&key, "k1", no_sub), "sub");
        // An HS256 token made with the public key as its secret (algorithm confusion).
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("k1".into());
        let confused = jsonwebtoken::encode(
            &header,
            &claims("https://idp.example", "switchboard", 300),
            &jsonwebtoken::EncodingKey::from_secret(jwks.as_bytes()),
        )
        .expect("signs");
        refused(&confused, "EdDSA");
        // Rotation: the new key's tokens pass, the old key's no longer do.
        let (next, next_jwks) = jwt_key(3, "k2");
        assert_eq!(jwt.set_keys(&next_jwks).expect("rotated"), 1);
        assert!(
            auth.admit(&headers(&[]), Some(&token(&next, "k2", claims("https://idp.example", "switchboard", 300))))
                .is_ok()
        );
        refused(&good, "no key \"k1\"");
        assert!(jwt.set_keys("{\"keys\": []}").is_err(), "an empty set is refused, the keys stay");
        // Not a JWT, and no API keys configured: refused as an unknown key.
        let plain = auth.admit(&headers(&[("x-api-key", "k")]), None).expect_err("not a key here");
        assert_eq!(plain.reason, "unknown_key");
    }

    #[test]
    fn a_keys_message_budget_is_shared_by_its_sessions() {
        let file = format!("slow {} - 2\nfree {} 3 -\n", digest("s-key"), digest("f-key"));
        let auth = Auth::new(Some(&file), vec![]).expect("valid file");
        let one = auth.admit(&headers(&[("x-api-key", "s-key")]), None).expect("admitted");
        let two = auth.admit(&headers(&[("x-api-key", "s-key")]), None).expect("no session limit");
        // A burst of twice the rate, across both sessions, then refusals.
        let allowed = (0..3).filter(|_| one.allow_message().is_ok()).count()
            + (0..3).filter(|_| two.allow_message().is_ok()).count();
        assert_eq!(allowed, 4);
        let refusal = one.allow_message().expect_err("spent");
        assert_eq!((refusal.code, refusal.reason), (close_code::RATE_LIMITED, "key_rate"));
        let free = auth.admit(&headers(&[("x-api-key", "f-key")]), None).expect("admitted");
        assert!((0..1000).all(|_| free.allow_message().is_ok()), "no rate: no limit");
        assert!(Auth::new(Some(&format!("a {} 1 0\n", digest("k"))), vec![]).is_err(), "a zero rate is refused");
        let mut bucket = Bucket::new(10);
        let start = Instant::now();
        assert_eq!((0..30).filter(|_| bucket.take(start)).count(), 20, "bursts of two seconds' worth");
        assert!(bucket.take(start + std::time::Duration::from_millis(150)), "refills at the rate");
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
