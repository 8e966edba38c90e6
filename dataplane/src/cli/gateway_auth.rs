//! The gateway's client credentials flags: API keys (a file of digests, re-read when it
//! changes), JWTs checked against a JSON Web Key Set (a file or the identity provider's
//! URL) with their claims and scopes, the browser origins allowed, and the per-key and
//! per-subject limits — built into the gateway's [`Auth`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use switchboard_gateway::auth::{Auth, Jwt, SubjectLimits};
use switchboard_models::net::Trust;

use crate::jwks;

/// Credential flags of `switchboard gateway`.
#[derive(Debug, clap::Args)]
pub struct AuthArgs {
    /// A file of API keys as SHA-256 digests, one a line: `<name> <sha256 hex>
    /// [sessions=N] [rate=N] [agents=<ns>/<agent>,...]` (`printf %s "$KEY" | sha256sum`):
    /// the key's most live sessions (default --max-sessions-per-key), its messages a second across them, and the Agents it
    /// may reach (`bank/*`; every exposed Agent when left out). Clients send
    /// `Authorization: Bearer <key>` or `X-Api-Key`; a missing or unknown key is refused
    /// with 4401. Without the file, no key is asked for (development only). The file is
    /// read again when it changes (see --api-keys-reload-seconds): a key taken out is
    /// refused from the next session on, without a restart.
    #[arg(long, env = "SWITCHBOARD_API_KEYS_FILE")]
    api_keys_file: Option<PathBuf>,

    /// How often the API keys file is checked for changes (a mounted Secret is replaced
    /// whole when edited; the kubelet takes up to a minute to update it). A changed file
    /// that does not read leaves the keys in use, and says why in the log.
    #[arg(long, env = "SWITCHBOARD_API_KEYS_RELOAD_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    api_keys_reload_seconds: u64,

    /// A browser origin (e.g. `https://bank.example`) whose pages may open sessions;
    /// repeatable, or comma-separated in the variable; `*` allows any. Requests with an
    /// `Origin` header not listed are refused with 4405.
    #[arg(long = "allowed-origin", env = "SWITCHBOARD_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,

    /// A JSON Web Key Set (a file, e.g. mounted from a ConfigMap; re-read when it changes):
    /// clients may present a JWT signed by one of its keys instead of an API key.
    #[arg(long, env = "SWITCHBOARD_JWKS_FILE", requires_all = ["jwt_issuer", "jwt_audience"], conflicts_with = "jwks_url")]
    jwks_file: Option<PathBuf>,

    /// The identity provider's JWKS URL (https://, or http:// on loopback), instead of
    /// --jwks-file: fetched at start (the gateway does not start without it) and again
    /// every --jwks-refresh-seconds; a failed refresh keeps the keys in use.
    #[arg(long, env = "SWITCHBOARD_JWKS_URL", requires_all = ["jwt_issuer", "jwt_audience"])]
    jwks_url: Option<String>,

    /// Seconds between fetches of --jwks-url.
    #[arg(long, env = "SWITCHBOARD_JWKS_REFRESH_SECONDS", default_value_t = 300)]
    jwks_refresh_seconds: u64,

    /// The `iss` a JWT must carry.
    #[arg(long, env = "SWITCHBOARD_JWT_ISSUER")]
    jwt_issuer: Option<String>,

    /// The `aud` a JWT must carry.
    #[arg(long, env = "SWITCHBOARD_JWT_AUDIENCE")]
    jwt_audience: Option<String>,

    /// The JWT claim listing the Agents a token may reach: an array (or a space-separated
    /// string) of `<namespace>/<agent>` patterns, either part `*` (`["bank/*"]`). A token
    /// without the claim reaches every exposed Agent, unless --jwt-require-agents-claim.
    /// A new session may start only at a listed Agent (4403 `agent_not_allowed`), and a
    /// resumed one only in a listed namespace.
    #[arg(long, env = "SWITCHBOARD_JWT_AGENTS_CLAIM", default_value = "switchboard_agents")]
    jwt_agents_claim: String,

    /// Refuse tokens without the --jwt-agents-claim claim (4401).
    #[arg(long, env = "SWITCHBOARD_JWT_REQUIRE_AGENTS_CLAIM")]
    jwt_require_agents_claim: bool,

    /// The OAuth scope that lets a token read the conversation record (`/v1/sessions`, in
    /// the namespaces its agents claim reaches): listed in its `scope` claim
    /// (space-separated) or `scp` (an array).
    #[arg(long, env = "SWITCHBOARD_JWT_RECORDS_SCOPE", default_value = switchboard_gateway::auth::DEFAULT_RECORDS_SCOPE)]
    jwt_records_scope: String,

    /// The OAuth scope that lets a token open test sessions on candidate pods
    /// (`session_start.candidate`: the Agents whose rollout waits for their AgentTests).
    #[arg(long, env = "SWITCHBOARD_JWT_CANDIDATES_SCOPE", default_value = switchboard_gateway::auth::DEFAULT_CANDIDATES_SCOPE)]
    jwt_candidates_scope: String,

    /// Most live sessions of one JWT subject (`sub`) on this replica; more are refused with
    /// 4429 (`key_sessions`). A person holds a few at once; a service whose one token
    /// carries many callers needs more. 0: no cap.
    #[arg(long, env = "SWITCHBOARD_JWT_MAX_SESSIONS_PER_SUBJECT", default_value_t = switchboard_gateway::auth::DEFAULT_SUBJECT_SESSIONS)]
    jwt_max_sessions_per_subject: usize,

    /// Most live sessions on this replica of an API key whose line in --api-keys-file sets
    /// no `sessions=N` (`sessions=-`: no cap); more are refused with 4429 (`key_sessions`).
    /// One key, leaked or one tenant's, cannot take every session of the gateway. 0: no cap.
    #[arg(long, env = "SWITCHBOARD_MAX_SESSIONS_PER_KEY", default_value_t = switchboard_gateway::auth::DEFAULT_KEY_SESSIONS)]
    max_sessions_per_key: usize,

    /// Most messages a second of one JWT subject, all its sessions together (bursts of
    /// twice that); more close the session with 1008.
    #[arg(long, env = "SWITCHBOARD_JWT_MAX_MESSAGES_PER_SECOND_PER_SUBJECT")]
    jwt_max_messages_per_second_per_subject: Option<u32>,
}

impl AuthArgs {
    /// What is wrong with the flags together, before anything is read.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.jwks_file.is_some()
                || self.jwks_url.is_some()
                || (self.jwt_issuer.is_none() && self.jwt_audience.is_none()),
            "--jwt-issuer and --jwt-audience need --jwks-file or --jwks-url"
        );
        anyhow::ensure!(self.jwks_refresh_seconds > 0, "--jwks-refresh-seconds must be above 0");
        anyhow::ensure!(
            self.jwt_max_messages_per_second_per_subject != Some(0),
            "--jwt-max-messages-per-second-per-subject must be above 0"
        );
        Ok(())
    }

    /// The credentials the gateway checks (`ca_file`: trusted for --jwks-url); the key
    /// and JWKS files are watched for changes from now on.
    pub async fn auth(self, ca_file: Option<&Path>) -> anyhow::Result<Auth> {
        self.check()?;
        let Self {
            api_keys_file,
            api_keys_reload_seconds,
            allowed_origins,
            jwks_file,
            jwks_url,
            jwks_refresh_seconds,
            jwt_issuer,
            jwt_audience,
            jwt_agents_claim,
            jwt_require_agents_claim,
            jwt_records_scope,
            jwt_candidates_scope,
            jwt_max_sessions_per_subject,
            max_sessions_per_key,
            jwt_max_messages_per_second_per_subject,
        } = self;
        let keys = match &api_keys_file {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("cannot read the API keys file {}: {e}; check --api-keys-file", path.display())
            })?),
            None => None,
        };
        let limits = SubjectLimits {
            max_sessions: (jwt_max_sessions_per_subject > 0).then_some(jwt_max_sessions_per_subject),
            max_messages_per_second: jwt_max_messages_per_second_per_subject,
        };
        let scoped = |jwt: Jwt| {
            Arc::new(
                jwt.with_agents_claim(jwt_agents_claim.clone(), jwt_require_agents_claim)
                    .with_records_scope(jwt_records_scope.clone())
                    .with_candidates_scope(jwt_candidates_scope.clone()),
            )
        };
        let mut auth = Auth::new(keys.as_deref(), allowed_origins)?
            .with_key_sessions((max_sessions_per_key > 0).then_some(max_sessions_per_key));
        if let (Some(path), Some(ring)) = (api_keys_file, auth.key_ring()) {
            let every = Duration::from_secs(api_keys_reload_seconds);
            tokio::spawn(super::watch::watch_file(path, every, "API keys", move |text| {
                ring.reload(text).map_err(|e| e.to_string())
            }));
        }
        if let (Some(path), Some(issuer), Some(audience)) = (jwks_file, jwt_issuer.clone(), jwt_audience.clone()) {
            let read = |path: &PathBuf| {
                std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("cannot read the JWKS {}: {e}; check --jwks-file", path.display()))
            };
            let jwt = scoped(
                Jwt::new(&read(&path)?, issuer, audience).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            );
            let reloaded = jwt.clone();
            let apply = move |text: &str| reloaded.set_keys(text).map_err(|e| e.to_string());
            tokio::spawn(super::watch::watch_file(path, Duration::from_secs(30), "JWKS", apply));
            auth = auth.with_jwt(jwt, limits);
        }
        if let (Some(url), Some(issuer), Some(audience)) = (jwks_url, jwt_issuer, jwt_audience) {
            let url = jwks::JwksUrl::parse(&url)?;
            let client = Trust::from_file(ca_file)?.client()?;
            let jwt = scoped(jwks::load(&client, &url, issuer, audience).await?);
            tracing::info!(%url, "JWTs are checked with the identity provider's keys");
            jwks::keep_fresh(client, url, jwt.clone(), Duration::from_secs(jwks_refresh_seconds));
            auth = auth.with_jwt(jwt, limits);
        }
        Ok(auth)
    }
}
