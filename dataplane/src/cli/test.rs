//! `switchboard test <folder or files>`: runs scenario tests of agents' behaviour (see
//! [`switchboard_scenario`]) against local mode started in this process — the
//! simulator by default — or against a running gateway, prints a report, optionally writes
//! JUnit XML, and fails when any scenario fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::error::display::DisplayErrorContext;
use clap::Args;
use switchboard_crds::contract;
use switchboard_models::bedrock::credential_files::CredentialFiles;
use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_scenario::judge::Judge;
use switchboard_scenario::polly::{self, PollySettings};
use switchboard_scenario::report::{self, Totals};
use switchboard_scenario::target::LocalSettings;
use switchboard_scenario::{self as scenario, SuiteOptions, junit, summary};

/// Options of `switchboard test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Scenario files, folders of them, or folders of agents with their scenarios in
    /// `tests/` (e.g. `examples/banking`). The agents of a scenario in a `tests` folder are
    /// the folder above it, unless --agents says otherwise; elsewhere --agents names them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,

    /// Run against this running gateway (e.g. `ws://10.96.0.10:80`, or a full
    /// `ws://.../v1/session` URL) instead of starting local mode for the agents' folder.
    #[arg(long, env = "SWITCHBOARD_TEST_GATEWAY")]
    gateway: Option<String>,

    /// The gateway's API key, sent as `Authorization: Bearer <key>` (with --gateway).
    #[arg(long, env = "SWITCHBOARD_TEST_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// Test the held rollout of this Agent (repeat for several): the sessions ask the
    /// gateway for candidate pods (`session_start.candidate`; the key must be marked
    /// `candidates=test`), and a scenario fails where this Agent is served by its live
    /// pods. An AgentTest's Job passes every gated Agent whose rollout waits for it.
    #[arg(long = "candidate", value_name = "AGENT", requires = "gateway")]
    candidates: Vec<String>,

    /// The folder of Agent, Persona and Workflow YAML the scenarios are for (default: found
    /// next to the scenarios). Local mode runs it; the checks before running read it.
    #[arg(long, env = "SWITCHBOARD_TEST_AGENTS")]
    agents: Option<PathBuf>,

    /// Write a JUnit XML report to this file (for CI).
    #[arg(long, env = "SWITCHBOARD_TEST_JUNIT")]
    junit: Option<PathBuf>,

    /// Scenarios run at once.
    #[arg(long, env = "SWITCHBOARD_TEST_JOBS", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,

    /// Check the scenario files (syntax, unknown keys, expectations that could never match
    /// the agents) and run nothing.
    #[arg(long)]
    check: bool,

    /// Local mode: use real Amazon Bedrock (the default AWS credential chain) instead of the
    /// simulator.
    #[arg(long, env = "SWITCHBOARD_TEST_BEDROCK")]
    bedrock: bool,

    /// Local mode: the simulator's script (YAML). Default: the bundled Example Bank script.
    #[arg(long, env = "SWITCHBOARD_SIM_SCRIPT")]
    sim_script: Option<PathBuf>,

    /// Also write a one-line JSON summary (passed, failed, total, the first divergence, or
    /// why nothing ran) of at most 4096 bytes to this file. An AgentTest's Job writes it to
    /// `/dev/termination-log`, where the operator reads it into the AgentTest's status.
    #[arg(long, env = "SWITCHBOARD_TEST_SUMMARY_FILE")]
    summary_file: Option<PathBuf>,

    /// A Bedrock text model that checks judged expectations (`expect.judge.rubric`), e.g.
    /// `amazon.nova-pro-v1:0`: it reads the conversation so far and answers PASS or FAIL.
    /// Without it, judged expectations are not checked (the report says how many). Uses the
    /// default AWS credential chain.
    #[arg(long, env = "SWITCHBOARD_TEST_JUDGE_MODEL")]
    judge_model: Option<String>,

    /// The judge model's region. Default: AWS_REGION, else us-east-1.
    #[arg(long, env = "SWITCHBOARD_TEST_JUDGE_REGION", requires = "judge_model")]
    judge_region: Option<String>,

    /// The judge model's endpoint instead of the region's public one (a VPC endpoint, or a
    /// Converse-compatible server).
    #[arg(long, env = "SWITCHBOARD_TEST_JUDGE_ENDPOINT_URL", requires = "judge_model")]
    judge_endpoint_url: Option<String>,

    /// A PEM file of CA certificates the judge's endpoint is trusted by, instead of the system's.
    #[arg(long, env = "SWITCHBOARD_TEST_JUDGE_CA_FILE", requires = "judge_model")]
    judge_ca_file: Option<PathBuf>,

    /// A folder with the judge's AWS credentials as files (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`; a mounted Secret, as an
    /// AgentTest's Job has), read again as they age, instead of the default credential chain.
    #[arg(long, env = contract::env::CREDENTIALS_DIR)]
    judge_credentials_dir: Option<PathBuf>,

    /// The Amazon Polly voice that speaks `speech:` steps where the simulator's phrase tones
    /// cannot be used — against a gateway, or with --bedrock — e.g. Joanna, Matthew, Amy.
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_VOICE", default_value = polly::DEFAULT_VOICE,
          value_parser = voice_id)]
    speech_voice: String,

    /// The Polly engine of that voice (the voice must have it).
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_ENGINE", default_value = polly::DEFAULT_ENGINE,
          value_parser = ["standard", "neural", "long-form", "generative"])]
    speech_engine: String,

    /// Polly's region. Default: AWS_REGION, else us-east-1.
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_REGION")]
    speech_region: Option<String>,

    /// Polly's endpoint instead of the region's public one: a VPC endpoint, or the Bedrock
    /// simulator (`switchboard sim`) behind the gateway, which renders a text as a phrase
    /// tone its Nova Sonic then hears as those words.
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_ENDPOINT_URL")]
    speech_endpoint_url: Option<String>,

    /// A PEM file of CA certificates Polly's endpoint is trusted by, instead of the system's.
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_CA_FILE")]
    speech_ca_file: Option<PathBuf>,

    /// A folder with Polly's AWS credentials as files (as --judge-credentials-dir), instead
    /// of the default credential chain.
    #[arg(long, env = "SWITCHBOARD_TEST_SPEECH_CREDENTIALS_DIR")]
    speech_credentials_dir: Option<PathBuf>,
}

/// A Polly voice id as given: 1 to 32 ASCII letters (Polly says whether it has the voice).
fn voice_id(value: &str) -> Result<String, String> {
    if (1..=32).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(value.to_owned())
    } else {
        Err("a Polly voice id is a name of letters, e.g. Joanna".into())
    }
}

/// How old credential files may be before they are read again.
const CREDENTIALS_MAX_AGE: Duration = Duration::from_secs(300);

/// How to reach an AWS service: the region (default AWS_REGION, else us-east-1), endpoint,
/// CA file, and credential files (checked now) instead of the default chain, for `whose`.
fn aws_settings(
    region: Option<String>,
    (endpoint_url, ca_file): (Option<String>, Option<PathBuf>),
    credentials_dir: Option<PathBuf>,
    whose: &str,
) -> anyhow::Result<BedrockConfig> {
    let region = region.or_else(|| std::env::var("AWS_REGION").ok()).unwrap_or_else(|| "us-east-1".into());
    let mut config = BedrockConfig::new(region);
    config.endpoint_url = endpoint_url;
    config.ca_cert_file = ca_file;
    if let Some(dir) = credentials_dir {
        let files = CredentialFiles::new(dir, CREDENTIALS_MAX_AGE);
        files.read().map_err(|e| anyhow::anyhow!("{whose} AWS credentials: {}", DisplayErrorContext(&e)))?;
        config.credential_files = Some(files);
    }
    Ok(config)
}

/// The judge of `--judge-model`, if given.
async fn judge(
    model_id: Option<String>,
    region: Option<String>,
    endpoint: (Option<String>, Option<PathBuf>),
    credentials_dir: Option<PathBuf>,
) -> anyhow::Result<Option<Judge>> {
    let Some(model_id) = model_id else { return Ok(None) };
    let bedrock = aws_settings(region, endpoint, credentials_dir, "the judge's")?;
    let model = BedrockTextModel::connect(&bedrock).await.map_err(|e| anyhow::anyhow!("--judge-model: {e}"))?;
    Ok(Some(Judge::new(Arc::new(model), model_id)))
}

/// Scenarios failed (the report says which and why).
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {total} scenario(s) did not pass (the report above says where)")]
pub struct TestFailed {
    /// Scenarios that failed or could not run.
    pub failed: usize,
    /// Scenarios run.
    pub total: usize,
}

/// Loads, checks and runs the scenarios; fails when any does not pass. With
/// `--summary-file`, the summary is written whatever the outcome, a refusal included.
pub async fn run(mut args: TestArgs) -> anyhow::Result<()> {
    let summary_file = args.summary_file.take();
    let result = suite(args).await;
    if let Some(path) = summary_file {
        let summary = match &result {
            Ok(results) => summary::of(results),
            Err(error) => summary::refused(&format!("{error:#}")),
        };
        std::fs::write(&path, summary.encode())
            .map_err(|e| anyhow::anyhow!("cannot write the summary to {}: {e}", path.display()))?;
    }
    let results = result?;
    let totals = Totals::of(&results);
    if !totals.ok() {
        return Err(TestFailed { failed: totals.total - totals.passed, total: totals.total }.into());
    }
    Ok(())
}

/// Loads, checks and runs the scenarios, prints the report; the results (none with --check).
async fn suite(args: TestArgs) -> anyhow::Result<Vec<scenario::run::ScenarioResult>> {
    let TestArgs {
        paths,
        gateway,
        api_key,
        candidates,
        agents,
        junit,
        jobs,
        check,
        bedrock,
        sim_script,
        summary_file: _,
        judge_model,
        judge_region,
        judge_endpoint_url,
        judge_ca_file,
        judge_credentials_dir,
        speech_voice,
        speech_engine,
        speech_region,
        speech_endpoint_url,
        speech_ca_file,
        speech_credentials_dir,
    } = args;
    let planned = scenario::load(&paths, agents.as_deref())?;
    if check {
        println!("{} scenario file(s) checked: no problems", planned.len());
        return Ok(Vec::new());
    }
    let target = gateway.as_deref().map_or_else(|| "local mode (one per folder of agents)".to_owned(), str::to_owned);
    println!("Running {} scenario(s) against {target}, {jobs} at a time\n", planned.len());
    let judge = judge(judge_model, judge_region, (judge_endpoint_url, judge_ca_file), judge_credentials_dir).await?;
    if let Some(judge) = &judge {
        println!("Judged expectations are checked by {} (a model's verdict, not a match)", judge.model_id());
    }
    let local = LocalSettings { bedrock, sim_script };
    if !candidates.is_empty() {
        println!("Held rollouts under test, served by their candidate pods: {}", candidates.join(", "));
    }
    let candidates = candidates.into_iter().collect();
    let endpoint = (speech_endpoint_url, speech_ca_file);
    let aws = aws_settings(speech_region, endpoint, speech_credentials_dir, "Amazon Polly's")?;
    let speech = PollySettings { voice: speech_voice, engine: speech_engine, aws };
    let options = SuiteOptions { speech, gateway, api_key, jobs: usize::from(jobs), local, judge, candidates };
    let started = std::time::Instant::now();
    let results = scenario::run_suite(planned, &options).await?;
    let elapsed = started.elapsed();
    print!("{}", report::render(&results, elapsed));
    if let Some(path) = &junit {
        junit::write(path, &results, elapsed)?;
        println!("JUnit report: {}", path.display());
    }
    Ok(results)
}
