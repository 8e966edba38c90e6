//! TURN servers handed to clients, for networks where no direct path reaches the edge's UDP
//! port (a firewall that lets only a relay out). The edge relays nothing itself: it tells
//! each caller which TURN servers to use and with what credential, on the answer to its
//! offer — WHIP's `Link: <turn:...>; rel="ice-server"` headers (RFC 9725, 4.6) and, in the
//! JSON form, `ice_servers` shaped as the browser's `RTCIceServer`. A client adds them with
//! `setConfiguration` and an ICE restart (a `PATCH`), or asks once and uses them on its next
//! call.
//!
//! Credentials, preferred first:
//! - **time-limited** (the TURN REST API of draft-uberti-behave-turn-rest, coturn's
//!   `use-auth-secret` with `static-auth-secret`): per call, username `<expiry>:<call id>`
//!   (seconds since 1970), password base64(HMAC-SHA1(secret, username)); the TURN server
//!   checks both with the shared secret, and a leaked pair stops working at its expiry;
//! - **static**: one username and password for every client, as the TURN server has them
//!   configured (they cannot be revoked per client: use the shared secret where the server
//!   supports it).

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_lc_rs::hmac;
use base64::Engine;

/// The most TURN (and STUN) URLs handed out.
pub const MAX_URLS: usize = 8;
/// The longest URL.
const MAX_URL_BYTES: usize = 256;
/// The default lifetime of a time-limited credential: a day, as the TURN REST draft
/// suggests; a call that outlives its credential cannot refresh its relay allocation.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The TURN servers of an edge and how their credentials are made.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Turn {
    /// `turn:`, `turns:` or `stun:` URLs (RFC 7064/7065), e.g.
    /// `turn:turn.example.com:3478?transport=udp`.
    pub urls: Vec<String>,
    /// Their credential.
    pub credential: Credential,
}

/// How a TURN credential is made.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Credential {
    /// None (STUN servers, or an open relay).
    #[default]
    None,
    /// Time-limited, per call, from the secret the TURN server shares (coturn's
    /// `static-auth-secret`).
    Shared {
        /// The shared secret.
        secret: Vec<u8>,
        /// How long a credential is good for.
        ttl: Duration,
    },
    /// One username and password for every client.
    Static {
        /// The username.
        username: String,
        /// The password.
        password: String,
    },
}

impl fmt::Debug for Credential {
    /// Never the secret or the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Shared { ttl, .. } => f.debug_struct("Shared").field("ttl", ttl).finish_non_exhaustive(),
            Self::Static { username, .. } => {
                f.debug_struct("Static").field("username", username).finish_non_exhaustive()
            }
        }
    }
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn").field("urls", &self.urls).field("credential", &self.credential).finish()
    }
}

/// Why a TURN setting is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TurnError {
    /// Not a URL a browser takes.
    #[error(
        "TURN server {0:?}: give a turn:, turns: or stun: URL with a host (e.g. turn:turn.example.com:3478?transport=udp)"
    )]
    Url(String),
    /// Too many.
    #[error("{0} TURN servers: at most {MAX_URLS}")]
    TooMany(usize),
    /// A credential without a server, or a TURN server without a credential.
    #[error("{0}")]
    Credential(&'static str),
}

impl Turn {
    /// Checks the settings: every URL one a browser's `RTCIceServer` takes and that fits a
    /// `Link` header, a credential for `turn:` servers and only with servers.
    pub fn validate(&self) -> Result<(), TurnError> {
        if self.urls.len() > MAX_URLS {
            return Err(TurnError::TooMany(self.urls.len()));
        }
        for url in &self.urls {
            let host = ["turn:", "turns:", "stun:"].iter().find_map(|scheme| url.strip_prefix(scheme));
            let fits = url.len() <= MAX_URL_BYTES
                && url.chars().all(|c| c.is_ascii_graphic() && !matches!(c, '<' | '>' | '"' | ',' | ';' | '\\'));
            if !fits || host.is_none_or(|rest| rest.is_empty() || rest.starts_with(['?', ':'])) {
                return Err(TurnError::Url(url.clone()));
            }
        }
        let relays = self.urls.iter().any(|u| !u.starts_with("stun:"));
        match &self.credential {
            Credential::None if relays => Err(TurnError::Credential(
                "TURN servers need a credential: a shared secret, or a username and password",
            )),
            Credential::Shared { .. } | Credential::Static { .. } if self.urls.is_empty() => {
                Err(TurnError::Credential("a TURN credential is given without a TURN server URL"))
            }
            Credential::Shared { secret, ttl } if secret.is_empty() || ttl.is_zero() => {
                Err(TurnError::Credential("the TURN shared secret is empty, or its credentials' lifetime 0"))
            }
            Credential::Static { username, password } if !fits_quoted(username) || !fits_quoted(password) => {
                Err(TurnError::Credential("the TURN username and password must be printable ASCII without \" or \\"))
            }
            _ => Ok(()),
        }
    }

    /// The servers for the call `call`, their credentials made at `now`.
    pub fn servers(&self, call: &str, now: SystemTime) -> Vec<IceServer> {
        if self.urls.is_empty() {
            return Vec::new();
        }
        let (username, credential) = match &self.credential {
            Credential::None => (None, None),
            Credential::Shared { secret, ttl } => {
                let expiry = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default() + *ttl;
                let (username, password) = rest_credential(secret, expiry.as_secs(), call);
                (Some(username), Some(password))
            }
            Credential::Static { username, password } => (Some(username.clone()), Some(password.clone())),
        };
        self.urls
            .iter()
            .map(|url| {
                // STUN servers take no credential.
                let (username, credential) =
                    if url.starts_with("stun:") { (None, None) } else { (username.clone(), credential.clone()) };
                IceServer { urls: vec![url.clone()], username, credential }
            })
            .collect()
    }
}

/// A TURN REST credential (coturn's `use-auth-secret`): username `<expiry>:<user>`,
/// password base64(HMAC-SHA1(secret, username)).
pub fn rest_credential(secret: &[u8], expiry_unix: u64, user: &str) -> (String, String) {
    let username = format!("{expiry_unix}:{user}");
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret);
    let tag = hmac::sign(&key, username.as_bytes());
    (username, base64::engine::general_purpose::STANDARD.encode(tag.as_ref()))
}

/// One ICE server as the browser's `RTCIceServer` has it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IceServer {
    /// Its URLs.
    pub urls: Vec<String>,
    /// The username, for TURN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password, for TURN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

impl IceServer {
    /// Its `Link` header values (RFC 9725, 4.6), one a URL.
    pub fn links(&self) -> impl Iterator<Item = String> + '_ {
        self.urls.iter().map(|url| {
            let mut link = format!("<{url}>; rel=\"ice-server\"");
            if let (Some(username), Some(credential)) = (&self.username, &self.credential) {
                link.push_str(&format!(
                    "; username=\"{username}\"; credential=\"{credential}\"; credential-type=\"password\""
                ));
            }
            link
        })
    }
}

/// Whether `text` can stand in a quoted string of a header as it is.
fn fits_quoted(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_URL_BYTES
        && text.chars().all(|c| (c.is_ascii_graphic() || c == ' ') && c != '"' && c != '\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(urls: &[&str]) -> Turn {
        Turn {
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            credential: Credential::Shared { secret: b"north-wind-secret".to_vec(), ttl: Duration::from_secs(3600) },
        }
    }

    #[test]
    fn a_rest_credential_is_what_coturn_computes() {
        // Python: base64.b64encode(hmac.new(b"north-wind-secret", b"1700003600:4f1c2a", sha1).digest())
        let (username, password) = rest_credential(b"north-wind-secret", 1_700_003_600, "4f1c2a");
        assert_eq!(username, "1700003600:4f1c2a");
        assert_eq!(password, "9Z/M0Z5cug8mOjb9TJpgKsU3ch8=");
    }

    #[test]
    fn each_call_gets_a_credential_that_expires_after_the_ttl() {
        let turn = shared(&["turn:turn.example.com:3478?transport=udp", "stun:stun.example.com"]);
        assert_eq!(turn.validate(), Ok(()));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let servers = turn.servers("4f1c2a", now);
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].username.as_deref(), Some("1700003600:4f1c2a"));
        assert_eq!(servers[0].credential.as_deref(), Some("9Z/M0Z5cug8mOjb9TJpgKsU3ch8="));
        assert_eq!((servers[1].username.as_ref(), servers[1].credential.as_ref()), (None, None), "STUN: none");
        let links: Vec<String> = servers.iter().flat_map(|s| s.links().collect::<Vec<_>>()).collect();
        assert_eq!(
            links,
            [
                "<turn:turn.example.com:3478?transport=udp>; rel=\"ice-server\"; username=\"1700003600:4f1c2a\"; credential=\"9Z/M0Z5cug8mOjb9TJpgKsU3ch8=\"; credential-type=\"password\"",
                "<stun:stun.example.com>; rel=\"ice-server\"",
            ]
        );
        assert_ne!(turn.servers("other", now)[0].credential, servers[0].credential, "per call");
        let json = serde_json::to_value(&servers[1]).expect("json");
        assert_eq!(json, serde_json::json!({ "urls": ["stun:stun.example.com"] }));
    }

    #[test]
    fn static_credentials_are_handed_as_they_are_and_never_logged() {
        let turn = Turn {
            urls: vec!["turns:turn.example.com:5349".into()],
            credential: Credential::Static { username: "bank".into(), password: "hunter2hunter2".into() },
        };
        assert_eq!(turn.validate(), Ok(()));
        let servers = turn.servers("x", SystemTime::now());
        assert_eq!(
            (servers[0].username.as_deref(), servers[0].credential.as_deref()),
            (Some("bank"), Some("hunter2hunter2"))
        );
        assert!(!format!("{turn:?}").contains("hunter2"));
        assert!(!format!("{:?}", shared(&["turn:a"])).contains("north"));
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad_urls =
            ["http://turn.example.com", "turn:", "turn:?transport=udp", "turn:a b", "turn:a>", "turn:a\"b", "turn:a,b"];
        for url in bad_urls {
            assert_eq!(shared(&[url]).validate(), Err(TurnError::Url(url.into())), "{url}");
        }
        let many: Vec<&str> = vec!["turn:a"; MAX_URLS + 1];
        assert_eq!(shared(&many).validate(), Err(TurnError::TooMany(MAX_URLS + 1)));
        let open = Turn { urls: vec!["turn:a".into()], credential: Credential::None };
        assert!(matches!(open.validate(), Err(TurnError::Credential(_))), "TURN without a credential");
        let stun_only = Turn { urls: vec!["stun:a".into()], credential: Credential::None };
        assert_eq!(stun_only.validate(), Ok(()));
        assert!(matches!(shared(&[]).validate(), Err(TurnError::Credential(_))), "a secret without servers");
        let empty =
            Turn { urls: vec!["turn:a".into()], credential: Credential::Shared { secret: vec![], ttl: DEFAULT_TTL } };
        assert!(matches!(empty.validate(), Err(TurnError::Credential(_))));
        let quoted = Turn {
            urls: vec!["turn:a".into()],
            credential: Credential::Static { username: "a\"b".into(), password: "p".into() },
        };
        assert!(matches!(quoted.validate(), Err(TurnError::Credential(_))));
        assert!(Turn::default().servers("x", SystemTime::now()).is_empty());
    }
}
