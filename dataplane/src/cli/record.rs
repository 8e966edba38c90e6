//! The conversation record's options, shared by `gateway` and `local`, and its writer task
//! (see [`switchboard_record`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_record::analysis::AnalysisConfig;
use switchboard_record::reporting;
use switchboard_record::summary::SummaryConfig;
use switchboard_record::webhook::WebhookConfig;
use switchboard_record::{RecordConfig, RecordMetrics, Recorder, Store};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long after the resume window a parked session is given up: entries that wait in a
/// writer's backlog (a resume through another replica) have time to land first.
const ABANDON_GRACE: Duration = Duration::from_secs(60);

/// How the conversation record is kept.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where every session is recorded: `postgres://user:password@host:5432/db` (a cluster:
    /// every replica writes there; the tables are created at start), or `sqlite:<file>`.
    /// `off` keeps no record. Default: none for `gateway`; for `local`, a SQLite file in
    /// the user's data directory (`$XDG_DATA_HOME/switchboard/record.db`, or
    /// `~/.local/share/switchboard/record.db`), which `switchboard sessions` reads.
    #[arg(long = "record-database-url", env = "SWITCHBOARD_RECORD_DATABASE_URL")]
    pub database_url: Option<String>,

    /// Days a recorded session is kept after it started; 0 keeps them all.
    #[arg(long = "record-retention-days", env = "SWITCHBOARD_RECORD_RETENTION_DAYS", default_value_t = 30)]
    pub retention_days: u64,

    /// Days what is kept of a verified caller across sessions (their `caller…` memory keys,
    /// which sessions they had) stays after the caller was last verified; 0 keeps it. One
    /// caller is forgotten on request with `switchboard callers delete`.
    #[arg(
        long = "record-caller-retention-days",
        env = "SWITCHBOARD_RECORD_CALLER_RETENTION_DAYS",
        default_value_t = 365
    )]
    pub caller_retention_days: u64,

    /// A redaction rule `name=regex`, applied to the record after the built-in ones (payment
    /// cards with a Luhn check; then these; then phone numbers and e-mail addresses); what
    /// matches is stored as `[redacted:name]`. Repeatable; one per line in the variable.
    #[arg(long = "record-redact", env = switchboard_crds::contract::env::RECORD_REDACT, value_delimiter = '\n')]
    pub redact: Vec<String>,

    /// A model's price, `<model id>=<input>,<output>[,<speech input>,<speech output>]` in USD
    /// per million tokens, over the built-in Bedrock list prices. Repeatable; `;`-separated
    /// in the variable.
    #[arg(long = "record-price", env = "SWITCHBOARD_RECORD_PRICES", value_delimiter = ';')]
    pub prices: Vec<String>,

    /// Entries kept in memory while the record's database is unreachable, written when it is
    /// back; more are dropped (counted in `switchboard_gateway_record_entries_dropped_total`).
    #[arg(long = "record-backlog", env = "SWITCHBOARD_RECORD_BACKLOG", default_value_t = 200_000)]
    pub backlog: usize,

    /// Where each ended session's end-of-call report is POSTed (JSON: Agents, outcome,
    /// duration, turns, tokens, cost, summaries, the record's path), signed with
    /// --record-webhook-secret-file in `X-Switchboard-Signature: t=<unix>,v1=<hex
    /// HMAC-SHA256 of "<t>.<body>">`. Retried with backoff on failures.
    #[arg(long = "record-webhook-url", env = "SWITCHBOARD_RECORD_WEBHOOK_URL", requires = "webhook_secret_file")]
    pub webhook_url: Option<String>,

    /// The file holding the webhook's shared secret (its bytes, a trailing newline dropped).
    #[arg(long = "record-webhook-secret-file", env = "SWITCHBOARD_RECORD_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,

    /// A Bedrock text model (model or inference profile id, e.g. `amazon.nova-lite-v1:0`)
    /// that writes each ended session's summary from its redacted record, kept with the
    /// session and sent in its report. Off when unset: it costs a model call per session.
    /// Credentials come from the default AWS chain (environment, IRSA, instance role).
    #[arg(long = "record-summary-model", env = "SWITCHBOARD_RECORD_SUMMARY_MODEL")]
    pub summary_model: Option<String>,

    /// The summary model's AWS region. Default: `AWS_REGION`, else `us-east-1`.
    #[arg(long = "record-summary-region", env = "SWITCHBOARD_RECORD_SUMMARY_REGION")]
    pub summary_region: Option<String>,

    /// An endpoint for the summary model's calls instead of the region's public one (a VPC
    /// endpoint; `switchboard sim` offline). Its certificate is checked against --ca-file
    /// when given.
    #[arg(long = "record-summary-endpoint-url", env = "SWITCHBOARD_RECORD_SUMMARY_ENDPOINT_URL")]
    pub summary_endpoint_url: Option<String>,

    /// A Bedrock text model that analyses each ended session of an Agent with
    /// `spec.record.analysis` (filling the fields it declares from the redacted record),
    /// unless the Agent names its own (`spec.record.analysis.model`). Without it, such
    /// sessions keep an analysis error saying so. It costs a model call per analysed
    /// session, added to the session's tokens and cost.
    #[arg(long = "record-analysis-model", env = "SWITCHBOARD_RECORD_ANALYSIS_MODEL")]
    pub analysis_model: Option<String>,

    /// The analysis model's AWS region. Default: `AWS_REGION`, else `us-east-1`.
    #[arg(long = "record-analysis-region", env = "SWITCHBOARD_RECORD_ANALYSIS_REGION")]
    pub analysis_region: Option<String>,

    /// An endpoint for the analysis model's calls instead of the region's public one (a VPC
    /// endpoint; `switchboard sim` offline). Its certificate is checked against --ca-file
    /// when given.
    #[arg(long = "record-analysis-endpoint-url", env = "SWITCHBOARD_RECORD_ANALYSIS_ENDPOINT_URL")]
    pub analysis_endpoint_url: Option<String>,
}

/// The record's writer, running.
#[derive(Debug)]
pub struct RecordTask {
    /// What sessions push to.
    pub recorder: Arc<Recorder>,
    stop: CancellationToken,
    writer: JoinHandle<()>,
}

impl RecordTask {
    /// Writes what is left (a few seconds at most) and stops.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.writer.await;
    }
}

/// A Bedrock text model client in `region` (default: `AWS_REGION`, else `us-east-1`), at
/// `endpoint` when given, trusting `ca_file` besides the system's roots.
async fn text_model(
    region: Option<&String>,
    endpoint: &Option<String>,
    ca_file: Option<&std::path::Path>,
) -> anyhow::Result<Arc<dyn switchboard_models::TextModel>> {
    let region = region.cloned().or_else(|| std::env::var("AWS_REGION").ok()).unwrap_or_else(|| "us-east-1".into());
    let mut bedrock = BedrockConfig::new(region);
    bedrock.endpoint_url = endpoint.clone();
    bedrock.ca_cert_file = ca_file.map(std::path::Path::to_path_buf);
    Ok(Arc::new(BedrockTextModel::connect(&bedrock).await?))
}

/// A webhook's HMAC key from the file `flag` names: its bytes, a trailing newline dropped,
/// at least 16 of them (the end-of-call report's, the outbound calls' status callbacks').
pub(super) fn read_webhook_secret(flag: &str, secret_file: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let mut secret =
        std::fs::read(secret_file).map_err(|e| anyhow::anyhow!("cannot read {flag} {}: {e}", secret_file.display()))?;
    if secret.ends_with(b"\n") {
        secret.pop();
    }
    anyhow::ensure!(
        secret.len() >= 16,
        "the webhook secret in {} ({flag}) has {} bytes; use at least 16 (e.g. `openssl rand -hex 32`)",
        secret_file.display(),
        secret.len()
    );
    Ok(secret)
}

fn webhook_config(url: &str, secret_file: &std::path::Path) -> anyhow::Result<WebhookConfig> {
    let uri: http::Uri = url.parse().map_err(|e| anyhow::anyhow!("--record-webhook-url {url:?}: {e}"))?;
    anyhow::ensure!(
        matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some(),
        "--record-webhook-url {url:?} must be an http:// or https:// URL"
    );
    let secret = read_webhook_secret("--record-webhook-secret-file", secret_file)?;
    Ok(WebhookConfig { url: uri, secret, retry: Default::default() })
}

/// The user's data directory's record file: what `local` writes and `sessions` reads by default.
pub fn default_local_file() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))?;
    Some(data.join("switchboard/record.db"))
}

/// The record at `database_url` (default: local mode's file), opened to read or delete:
/// reading makes no database, so a missing SQLite file is a wrong path (or no session yet).
pub async fn open_existing(database_url: Option<String>) -> anyhow::Result<switchboard_record::Store> {
    let url = match database_url {
        Some(url) => url,
        None => {
            let file = default_local_file().ok_or_else(|| anyhow::anyhow!("no HOME: give --record-database-url"))?;
            format!("sqlite:{}", file.display())
        }
    };
    if let Some(file) = switchboard_record::store::sqlite_file(&url) {
        anyhow::ensure!(
            file.exists(),
            "no record at {} (local mode creates it when it starts); check --record-database-url",
            file.display()
        );
    }
    let store =
        switchboard_record::Store::open(&url).map_err(|e| anyhow::anyhow!("{e}; check --record-database-url"))?;
    store.migrate().await.map_err(|e| anyhow::anyhow!("{e} ({})", store.display))?;
    Ok(store)
}

impl RecordArgs {
    /// The built-in detectors with `--record-redact`'s rules.
    pub fn redactor(&self) -> anyhow::Result<switchboard_record::Redactor> {
        switchboard_record::Redactor::new(&self.redact).map_err(|e| anyhow::anyhow!("{e}; check --record-redact"))
    }

    /// The database URL: the one given, or `default` (`None`, or `off`: no record).
    pub fn url(&self, default: Option<String>) -> Option<String> {
        self.database_url.clone().or(default).filter(|url| url != "off")
    }

    /// Starts the writer (and the webhook's sender, trusting `ca_file` besides the system's
    /// roots) when a record is kept. A session parked longer than the gateway's
    /// `resume_window` (and a minute's grace) is marked abandoned.
    pub async fn start(
        &self,
        default: Option<String>,
        ca_file: Option<&std::path::Path>,
        resume_window: Duration,
    ) -> anyhow::Result<Option<RecordTask>> {
        let Some(url) = self.url(default) else {
            anyhow::ensure!(
                self.webhook_url.is_none() && self.summary_model.is_none() && self.analysis_model.is_none(),
                "--record-webhook-url, --record-summary-model and --record-analysis-model need the record: give --record-database-url"
            );
            return Ok(None);
        };
        let redactor = self.redactor()?;
        let prices =
            switchboard_record::Prices::with(&self.prices).map_err(|e| anyhow::anyhow!("{e}; check --record-price"))?;
        let store = Store::open(&url).map_err(|e| anyhow::anyhow!("{e}; check --record-database-url"))?;
        let config = RecordConfig {
            backlog: self.backlog,
            retention: (self.retention_days > 0).then(|| Duration::from_secs(self.retention_days * 86_400)),
            caller_retention: (self.caller_retention_days > 0)
                .then(|| Duration::from_secs(self.caller_retention_days.saturating_mul(86_400))),
            abandon_after: resume_window + ABANDON_GRACE,
            ..RecordConfig::default()
        };
        tracing::info!(store = %store.display, retention_days = self.retention_days, "recording every session");
        let (recorder, mut writer) = Recorder::new(store.clone(), config, redactor, prices, RecordMetrics::new()?);
        let webhook = match (&self.webhook_url, &self.webhook_secret_file) {
            (Some(url), Some(secret)) => {
                let webhook = webhook_config(url, secret)?;
                let client = switchboard_models::net::client::Trust::from_file(ca_file)?.client()?;
                tracing::info!(url = %webhook.url, "end-of-call reports go to the webhook");
                Some((webhook, client))
            }
            _ => None,
        };
        let summary = match &self.summary_model {
            Some(model_id) => {
                let model = text_model(self.summary_region.as_ref(), &self.summary_endpoint_url, ca_file)
                    .await
                    .map_err(|e| anyhow::anyhow!("--record-summary-model: {e}"))?;
                tracing::info!(model = %model_id, "a model summarises every ended session");
                Some((model, SummaryConfig::new(model_id.clone())))
            }
            None => None,
        };
        // The analyst always runs with a record: an Agent that asks for analysis while the
        // gateway has no model gets an error in its sessions' record, not silence.
        let analysis_model = match &self.analysis_model {
            Some(model_id) => {
                let model = text_model(self.analysis_region.as_ref(), &self.analysis_endpoint_url, ca_file)
                    .await
                    .map_err(|e| anyhow::anyhow!("--record-analysis-model: {e}"))?;
                tracing::info!(model = %model_id, "a model analyses the ended sessions of Agents with spec.record.analysis");
                Some(model)
            }
            None => None,
        };
        let analysis = AnalysisConfig { default_model: self.analysis_model.clone(), ..AnalysisConfig::default() };
        let followers = reporting::Followers { webhook, summary, analysis: Some((analysis_model, analysis)) };
        if let Some(ended) = reporting::start(&recorder, &store, followers) {
            writer = writer.reporting_to(ended);
        }
        let stop = CancellationToken::new();
        let writer = tokio::spawn(writer.run(stop.clone()));
        Ok(Some(RecordTask { recorder, stop, writer }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        record: RecordArgs,
    }

    #[test]
    fn the_charts_forms_read_back_one_rule_a_line_and_prices_by_semicolons() {
        // What the chart puts in SWITCHBOARD_RECORD_REDACT and SWITCHBOARD_RECORD_PRICES.
        let cli = Cli::try_parse_from([
            "x",
            "--record-redact",
            "account=\\b\\d{8}\\b\nsort-code=\\b\\d{2}-\\d{2}-\\d{2}\\b",
            "--record-price",
            "amazon.nova-lite-v1:0=0.5,2;amazon.nova-sonic-v1:0=0.06,0.24,3.4,13.6",
        ])
        .expect("parses");
        assert_eq!(cli.record.redact.len(), 2);
        let redactor = switchboard_record::Redactor::new(&cli.record.redact).expect("rules");
        assert_eq!(redactor.text("12345678 at 12-34-56"), "[redacted:account] at [redacted:sort-code]");
        let prices = switchboard_record::Prices::with(&cli.record.prices).expect("prices");
        assert_eq!(prices.of("amazon.nova-lite-v1:0").map(|p| p.input), Some(0.5));
        assert_eq!(prices.of("amazon.nova-sonic-v1:0").map(|p| p.speech_output), Some(13.6));
        assert_eq!(cli.record.url(Some("off".into())), None);
        assert_eq!(cli.record.url(None), None);
    }
}
