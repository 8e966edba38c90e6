//! The gateway's flags for context from host apps' backends (`session_start.app_context`,
//! [`switchboard_gateway::auth::AppContextKeys`]): the keys it trusts, re-read when their
//! file changes, and the issuer and audience their tokens must name.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchboard_gateway::auth::{AppContextKeys, Auth};

/// App-context flags of `switchboard gateway`.
#[derive(Debug, clap::Args)]
pub struct AppContextArgs {
    /// A JSON Web Key Set of the keys app backends sign session context with
    /// (`session_start.app_context`): `oct` keys for HS256 (a secret shared with the
    /// backend: mount it from a Secret), or the backend's EC, OKP or RSA public keys. Read
    /// again when the file changes (rotation: list the new key beside the old, then drop the
    /// old). Without it, sessions that bring app context are refused
    /// (`app_context_not_accepted`).
    #[arg(long, env = "SWITCHBOARD_APP_CONTEXT_JWKS_FILE", requires_all = ["app_context_issuer", "app_context_audience"])]
    app_context_jwks_file: Option<PathBuf>,

    /// The `iss` an app-context token must carry (the app's backend).
    #[arg(long, env = "SWITCHBOARD_APP_CONTEXT_ISSUER", requires = "app_context_jwks_file")]
    app_context_issuer: Option<String>,

    /// The `aud` an app-context token must carry (this gateway), so that a token minted for
    /// another service opens no session here.
    #[arg(long, env = "SWITCHBOARD_APP_CONTEXT_AUDIENCE", requires = "app_context_jwks_file")]
    app_context_audience: Option<String>,

    /// How often --app-context-jwks-file is checked for changes (a mounted Secret is
    /// replaced whole when edited; the kubelet takes up to a minute). A changed file that
    /// does not read leaves the keys in use, and says why in the log.
    #[arg(long, env = "SWITCHBOARD_APP_CONTEXT_RELOAD_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    app_context_reload_seconds: u64,

    /// Take only app-context tokens bound to the client presenting them: a token's `sub`
    /// must be the subject of the client's credential (its JWT's `sub`, its API key's name),
    /// so a token that leaks (a log, another tab's client) opens no session for another
    /// client. Tokens without `sub` are refused (`app_context_wrong_subject`). Needs client
    /// credentials (--api-keys-file or --jwks-file).
    #[arg(long, env = "SWITCHBOARD_APP_CONTEXT_BIND_SUBJECT", requires = "app_context_jwks_file")]
    app_context_bind_subject: bool,
}

impl AppContextArgs {
    /// `auth` trusting the configured app backends (unchanged without them); the key file
    /// is watched for rotation from now on.
    pub fn apply(self, auth: Auth) -> anyhow::Result<Auth> {
        let Self {
            app_context_jwks_file,
            app_context_issuer,
            app_context_audience,
            app_context_reload_seconds,
            app_context_bind_subject,
        } = self;
        let (Some(path), Some(issuer), Some(audience)) =
            (app_context_jwks_file, app_context_issuer, app_context_audience)
        else {
            return Ok(auth);
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!("cannot read the app-context keys {}: {e}; check --app-context-jwks-file", path.display())
        })?;
        anyhow::ensure!(
            !app_context_bind_subject || auth.requires_keys(),
            "--app-context-bind-subject binds each app-context token to the credential of the client presenting it, \
             and this gateway asks clients for none: give it --api-keys-file or --jwks-file (chart \
             gateway.apiKeysSecret or gateway.jwt), or leave --app-context-bind-subject out"
        );
        let keys =
            AppContextKeys::new(&text, issuer, audience).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let keys = Arc::new(if app_context_bind_subject { keys.with_bound_subject() } else { keys });
        let reloaded = keys.clone();
        let apply = move |text: &str| reloaded.set_keys(text).map_err(|e| e.to_string());
        tokio::spawn(super::watch::watch_file(
            path,
            Duration::from_secs(app_context_reload_seconds),
            "app-context keys",
            apply,
        ));
        tracing::info!("sessions may start with context from the app backends whose keys are configured");
        Ok(auth.with_app_context(keys))
    }
}
