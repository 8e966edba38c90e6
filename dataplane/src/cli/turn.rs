//! `switchboard gateway`'s TURN flags: the TURN servers the WebRTC edge hands each caller
//! and where their credential comes from (files, as a mounted Secret gives them; never a
//! flag's value, which `ps` shows).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use switchboard_webrtc_edge::turn::{Credential, Turn};

/// TURN servers for WebRTC callers.
#[derive(Args, Debug)]
pub struct TurnArgs {
    /// TURN (or STUN) servers handed to every WebRTC caller in the answer's `Link` headers
    /// (WHIP, RFC 9725) and the JSON form's `ice_servers`, comma-separated:
    /// `turn:turn.example.com:3478?transport=udp,turns:turn.example.com:5349?transport=tcp`.
    /// TURN servers need a credential: --webrtc-turn-secret-file, or a username and password.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TURN", value_delimiter = ',')]
    webrtc_turn: Vec<String>,

    /// A file holding the secret shared with the TURN servers (coturn: `use-auth-secret`,
    /// `static-auth-secret`): each call gets its own time-limited credential (username
    /// `<expiry>:<call id>`, password base64 HMAC-SHA1 of it). Preferred over a static
    /// username and password.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TURN_SECRET_FILE")]
    webrtc_turn_secret_file: Option<PathBuf>,

    /// How long a time-limited TURN credential is good for, in seconds: longer than a call.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TURN_TTL_SECONDS", default_value_t = 86_400)]
    webrtc_turn_ttl_seconds: u64,

    /// A file holding the static TURN username every caller gets (with
    /// --webrtc-turn-password-file), for TURN servers without a shared secret.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TURN_USERNAME_FILE", requires = "webrtc_turn_password_file")]
    webrtc_turn_username_file: Option<PathBuf>,

    /// A file holding the static TURN password (with --webrtc-turn-username-file).
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TURN_PASSWORD_FILE", requires = "webrtc_turn_username_file")]
    webrtc_turn_password_file: Option<PathBuf>,
}

impl TurnArgs {
    /// The edge's TURN settings, checked.
    pub fn turn(self) -> anyhow::Result<Turn> {
        let Self {
            webrtc_turn,
            webrtc_turn_secret_file,
            webrtc_turn_ttl_seconds,
            webrtc_turn_username_file,
            webrtc_turn_password_file,
        } = self;
        let read = |path: &PathBuf, what: &str| -> anyhow::Result<String> {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the TURN {what} file {}", path.display()))?;
            Ok(text.trim().to_owned())
        };
        let credential = match (webrtc_turn_secret_file, webrtc_turn_username_file, webrtc_turn_password_file) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => anyhow::bail!(
                "give --webrtc-turn-secret-file (time-limited credentials) or a TURN username and password, not both"
            ),
            (Some(secret), None, None) => {
                anyhow::ensure!(webrtc_turn_ttl_seconds > 0, "--webrtc-turn-ttl-seconds must be above 0");
                Credential::Shared {
                    secret: read(&secret, "shared secret")?.into_bytes(),
                    ttl: Duration::from_secs(webrtc_turn_ttl_seconds),
                }
            }
            (None, Some(username), Some(password)) => {
                Credential::Static { username: read(&username, "username")?, password: read(&password, "password")? }
            }
            _ => Credential::None,
        };
        let turn = Turn {
            urls: webrtc_turn.into_iter().map(|u| u.trim().to_owned()).filter(|u| !u.is_empty()).collect(),
            credential,
        };
        turn.validate()?;
        Ok(turn)
    }
}
