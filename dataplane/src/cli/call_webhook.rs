//! The outbound calls' status callbacks, as `gateway` and `local` take them: the key their
//! deliveries are signed with (as the end-of-call report's) and how long one attempt may
//! take, and where they may go ([`switchboard_gateway::calls::webhook`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use switchboard_gateway::calls::webhook::{CallWebhookConfig, Receivers};

/// `--calls-webhook-*`.
#[derive(Debug, Args)]
pub(super) struct CallWebhookArgs {
    /// The file holding the key outbound calls' status callbacks (`POST /v1/calls`
    /// `statusCallback`) are signed with, as the end-of-call report is:
    /// `X-Switchboard-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (its bytes, a
    /// trailing newline dropped, at least 16). Without it a call naming a statusCallback is
    /// refused (400).
    #[arg(long = "calls-webhook-secret-file", env = "SWITCHBOARD_CALLS_WEBHOOK_SECRET_FILE", value_name = "FILE")]
    secret_file: Option<PathBuf>,

    /// Where status callbacks may go: URL prefixes (repeat the flag, or commas in the env),
    /// e.g. `https://hooks.example.com/calls`. A callback's scheme, host and port must equal
    /// one's and its path begin there; anything else is refused (400), so a key that may
    /// place calls cannot make the gateway POST to the addresses it reaches. Required with
    /// --calls-webhook-secret-file.
    #[arg(
        long = "calls-webhook-allow",
        env = "SWITCHBOARD_CALLS_WEBHOOK_ALLOW",
        value_name = "URL_PREFIX",
        value_delimiter = ','
    )]
    allow: Vec<String>,

    /// Seconds one delivery of a status callback may take (connect, answer and body); a
    /// slower receiver's attempt fails and is tried again (3 times, pausing 0.5 s doubling).
    #[arg(long = "calls-webhook-timeout-seconds", env = "SWITCHBOARD_CALLS_WEBHOOK_TIMEOUT_SECONDS",
          default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    timeout_seconds: u64,
}

impl CallWebhookArgs {
    /// The status callbacks' settings, trusting `ca_file` besides the system's roots for
    /// `https://` receivers; `None` without a key.
    pub(super) fn config(&self, ca_file: Option<&Path>) -> anyhow::Result<Option<CallWebhookConfig>> {
        let Some(file) = &self.secret_file else { return Ok(None) };
        let secret = super::record::read_webhook_secret("--calls-webhook-secret-file", file)?;
        let receivers = Receivers::parse(&self.allow).map_err(|e| anyhow::anyhow!("--calls-webhook-allow: {e}"))?;
        if receivers.is_empty() {
            anyhow::bail!(
                "--calls-webhook-secret-file needs --calls-webhook-allow: the URL prefixes status callbacks may go to \
                 (e.g. https://hooks.example.com/calls)"
            );
        }
        let client = switchboard_models::net::client::Trust::from_file(ca_file)?.client()?;
        let mut config = CallWebhookConfig::new(secret, client, receivers);
        config.attempt_timeout = Duration::from_secs(self.timeout_seconds);
        tracing::info!(timeout_seconds = self.timeout_seconds, receivers = ?self.allow, "outbound calls may name a status callback");
        Ok(Some(config))
    }
}
