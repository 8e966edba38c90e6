//! Scenario tests of agents' behaviour (`switchboard test`): YAML files next to the agents
//! (`examples/banking/tests/*.yaml`) that play a caller's turns and say what must hold after
//! each — the agent answering, tool calls, handoffs, memory, transcript text, consent
//! requests, workflow node, no error, latency budgets.
//!
//! The parts, in the order they are used: [`mod@file`] parses a scenario (refusing unknown
//! keys), [`check`] refuses expectations that could never match the folder's agents (with
//! [`locate`] finding their lines), [`target`] starts local mode in-process (with the
//! `local` feature: `switchboard-local` and the simulator) or takes a gateway URL, [`run`]
//! plays each scenario over the session protocol, [`observe`] and [`expect`] hold and judge
//! what came back, [`report`], [`junit`] and [`summary`] tell the results. This module finds
//! the files, groups them by their folder of agents and runs them, several at once.
//!
//! Where the agents are: a folder given is the agents' folder when it has a `tests/`
//! subfolder (its scenarios are `tests/*.yaml`), otherwise a folder of scenarios whose
//! parent holds the agents; a file's agents are in its folder or the folder above.
//! `--agents` says it outright.

pub mod check;
pub mod expect;
pub mod file;
pub mod judge;
pub mod junit;
pub mod locate;
pub mod observe;
pub mod polly;
pub mod report;
pub mod run;
pub mod speech;
pub mod summary;
pub mod target;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use futures_util::StreamExt;

use check::{CheckError, Facts};
use file::ScenarioFile;
use run::{Connection, ScenarioResult};
use speech::{Phrases, SpeechError};
use target::{LocalSettings, LocalTarget, TargetError};

/// The folder, under a folder of agents, that holds its scenarios.
pub const TESTS_FOLDER: &str = "tests";

/// A suite could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// A path given does not exist or cannot be listed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No scenario files where the paths point.
    #[error("no scenario files (*.yaml) in {0}")]
    NoScenarios(String),
    /// Scenario files were refused before anything ran.
    #[error("{} problem(s) in the scenario files; nothing was run:\n{}", .0.len(), .0.join("\n"))]
    Refused(Vec<String>),
    /// A folder of agents could not be read.
    #[error(transparent)]
    Agents(#[from] CheckError),
    /// Scenarios without a folder of agents need a gateway.
    #[error(
        "{0}: no folder of agents found next to it (in its folder or the one above): pass --agents DIR, or --gateway URL"
    )]
    NoAgents(PathBuf),
    /// Local mode could not start.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Speech steps could not be prepared.
    #[error(transparent)]
    Speech(#[from] SpeechError),
}

/// A scenario ready to run and the folder of agents it is for.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The parsed, checked file.
    pub file: ScenarioFile,
    /// Its folder of agents, when known.
    pub agents: Option<PathBuf>,
}

/// How to run a suite.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// A running gateway's session URL; `None`: local mode for each folder of agents.
    pub gateway: Option<String>,
    /// The API key for the gateway.
    pub api_key: Option<String>,
    /// Scenarios run at once.
    pub jobs: usize,
    /// Local mode's settings.
    pub local: LocalSettings,
    /// How Amazon Polly renders `speech:` texts where the simulator's phrase tones cannot be
    /// used (against a gateway, or local mode with real Bedrock).
    pub speech: polly::PollySettings,
    /// The model that checks judged expectations; `None`: they are not checked (and the
    /// report says so).
    pub judge: Option<judge::Judge>,
    /// Agents whose held rollout is under test, at a gateway: served by their candidate
    /// pods, or the scenario fails ([`run::Connection::candidates`]).
    pub candidates: BTreeSet<String>,
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, SuiteError> {
    let io = |source| SuiteError::Io { path: dir.to_owned(), source };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Loads facts for folders once each.
#[derive(Default)]
struct FactsCache(BTreeMap<PathBuf, Option<Facts>>);

impl FactsCache {
    fn get(&mut self, dir: &Path) -> Result<Option<&Facts>, CheckError> {
        if !self.0.contains_key(dir) {
            let facts = if dir.is_dir() { Facts::load(dir)? } else { None };
            self.0.insert(dir.to_owned(), facts);
        }
        Ok(self.0.get(dir).and_then(Option::as_ref))
    }

    /// The first of `candidates` that holds agents. A guessed folder whose YAML cannot be
    /// read is not a folder of agents (it may hold other YAML); one whose agents are invalid
    /// is still an error.
    fn agents_among(&mut self, candidates: &[Option<&Path>]) -> Result<Option<PathBuf>, CheckError> {
        for dir in candidates.iter().flatten() {
            match self.get(dir) {
                Ok(Some(_)) => return Ok(Some(dir.to_path_buf())),
                Ok(None) => {}
                Err(error @ CheckError::Load { .. }) => {
                    tracing::debug!("{} is not a folder of agents: {error}", dir.display());
                    self.0.insert(dir.to_path_buf(), None);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(None)
    }
}

/// The folder `path` is in (`.` for a bare name), `None` at the root.
fn parent(path: &Path) -> Option<&Path> {
    match path.parent() {
        Some(dir) if dir.as_os_str().is_empty() => Some(Path::new(".")),
        other => other,
    }
}

/// The folder of agents whose `tests` folder `dir` is (the layout scenarios live in). Another
/// folder's parent is not guessed at: it may be anything, `/tmp` included, and a folder of
/// agents is read whole, subfolders too (a scenario folder in `/tmp` read every agent that
/// other programs left under `/tmp`, and failed on theirs).
fn tests_owner(dir: Option<&Path>) -> Option<&Path> {
    dir.filter(|dir| dir.file_name() == Some(std::ffi::OsStr::new(TESTS_FOLDER))).and_then(parent)
}

/// The scenario files `paths` name, each with its folder of agents (`agents` overrides).
fn discover(
    paths: &[PathBuf],
    agents: Option<&Path>,
    cache: &mut FactsCache,
) -> Result<Vec<(PathBuf, Option<PathBuf>)>, SuiteError> {
    let mut out = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|source| SuiteError::Io { path: path.clone(), source })?;
        let (files, candidates): (Vec<PathBuf>, Vec<Option<&Path>>) = if meta.is_file() {
            (vec![path.clone()], vec![tests_owner(parent(path))])
        } else if path.join(TESTS_FOLDER).is_dir() {
            (yaml_files(&path.join(TESTS_FOLDER))?, vec![Some(path.as_path())])
        } else {
            (yaml_files(path)?, vec![tests_owner(Some(path.as_path()))])
        };
        if files.is_empty() {
            return Err(SuiteError::NoScenarios(path.display().to_string()));
        }
        let dir = match agents {
            Some(dir) => Some(dir.to_owned()),
            None => cache.agents_among(&candidates)?,
        };
        out.extend(files.into_iter().map(|f| (f, dir.clone())));
    }
    Ok(out)
}

/// Finds, parses and checks every scenario `paths` name; refuses them all, with every
/// problem, when any file has one.
pub fn load(paths: &[PathBuf], agents: Option<&Path>) -> Result<Vec<Planned>, SuiteError> {
    let mut cache = FactsCache::default();
    let mut planned = Vec::new();
    let mut problems = Vec::new();
    for (path, agents) in discover(paths, agents, &mut cache)? {
        let file = match ScenarioFile::read(&path) {
            Ok(file) => file,
            Err(error) => {
                problems.push(error.to_string());
                continue;
            }
        };
        let facts = match &agents {
            Some(dir) => cache.get(dir)?,
            None => None,
        };
        problems.extend(check::check(&file, facts).iter().map(ToString::to_string));
        planned.push(Planned { file, agents });
    }
    if !problems.is_empty() {
        return Err(SuiteError::Refused(problems));
    }
    Ok(planned)
}

/// Each agent's workflow entry node, for the agents of `dir`.
fn entries(dir: Option<&Path>) -> Result<BTreeMap<String, String>, SuiteError> {
    let facts = match dir {
        Some(dir) => Facts::load(dir)?,
        None => None,
    };
    Ok(facts.map(|f| f.agents.into_iter().map(|(name, a)| (name, a.entry)).collect()).unwrap_or_default())
}

/// Local mode's settings for `files`: when they speak (`speech:`) and local mode runs the
/// simulator, its script with their phrases added (written to a temporary file, which the
/// caller removes once the simulator has read it), and the phrase ids.
fn with_phrases<'a>(
    settings: &LocalSettings,
    files: impl Iterator<Item = &'a ScenarioFile>,
) -> Result<(LocalSettings, Phrases), SuiteError> {
    let texts = speech_texts(files);
    if texts.is_empty() || settings.bedrock || !cfg!(feature = "local") {
        return Ok((settings.clone(), Phrases::default()));
    }
    let script = match &settings.sim_script {
        Some(path) => std::fs::read_to_string(path).map_err(|source| SuiteError::Io { path: path.clone(), source })?,
        None => default_script(),
    };
    let phrases = Phrases::assign(texts, &Phrases::taken(&script)?)?;
    let path = std::env::temp_dir().join(format!("switchboard-test-sim-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&path, phrases.add_to_script(&script)?)
        .map_err(|source| SuiteError::Io { path: path.clone(), source })?;
    Ok((LocalSettings { sim_script: Some(path), ..settings.clone() }, phrases))
}

/// The `speech:` texts of `files`' steps.
fn speech_texts<'a>(files: impl Iterator<Item = &'a ScenarioFile>) -> Vec<&'a str> {
    files.flat_map(|f| f.scenario.steps.iter().filter_map(|s| s.speech.as_deref())).collect()
}

/// `files`' `speech:` texts rendered by Amazon Polly (nothing when they have none).
async fn spoken_by_polly<'a>(
    settings: &polly::PollySettings,
    files: impl Iterator<Item = &'a ScenarioFile>,
) -> Result<Phrases, SuiteError> {
    let texts = speech_texts(files);
    if texts.is_empty() {
        return Ok(Phrases::default());
    }
    let polly = polly::Polly::connect(settings).await?;
    tracing::info!(texts = texts.len(), voice = settings.voice, "rendering the speech: steps with Amazon Polly");
    Ok(Phrases::rendered(polly.render_all(texts).await))
}

/// The simulator's bundled script (none without the simulator in the build).
fn default_script() -> String {
    #[cfg(feature = "local")]
    return switchboard_sim::BANKING_SCRIPT_YAML.to_owned();
    #[cfg(not(feature = "local"))]
    String::new()
}

/// Runs `planned` (as [`load`] returns it): against the gateway of `options`, or against
/// local mode started for each folder of agents. Results come in the order planned.
pub async fn run_suite(planned: Vec<Planned>, options: &SuiteOptions) -> Result<Vec<ScenarioResult>, SuiteError> {
    let mut groups: BTreeMap<Option<PathBuf>, Vec<(usize, ScenarioFile)>> = BTreeMap::new();
    for (i, p) in planned.into_iter().enumerate() {
        groups.entry(p.agents).or_default().push((i, p.file));
    }
    let mut results = Vec::new();
    for (dir, files) in groups {
        let mut local = None;
        let mut phrases = Phrases::default();
        let url = match &options.gateway {
            Some(url) => target::session_url(url),
            None => {
                let Some(dir) = &dir else {
                    return Err(SuiteError::NoAgents(files[0].1.path.clone()));
                };
                let (settings, spoken) = with_phrases(&options.local, files.iter().map(|(_, f)| f))?;
                let started = LocalTarget::start(dir, &settings).await;
                if let Some(script) = settings.sim_script.as_ref().filter(|_| !spoken.is_empty()) {
                    let _ = std::fs::remove_file(script);
                }
                let started = started?;
                phrases = spoken;
                let url = started.url.clone();
                local = Some(started);
                url
            }
        };
        if phrases.is_empty() {
            phrases = spoken_by_polly(&options.speech, files.iter().map(|(_, f)| f)).await?;
        }
        let connection = Connection {
            url,
            api_key: options.api_key.clone(),
            entries: entries(dir.as_deref())?,
            phrases,
            judge: options.judge.clone(),
            candidates: options.candidates.clone(),
        };
        let runs = files.iter().map(|(i, file)| {
            let connection = &connection;
            async move { (*i, run::run(file, connection).await) }
        });
        let done: Vec<(usize, ScenarioResult)> =
            futures_util::stream::iter(runs).buffer_unordered(options.jobs.max(1)).collect().await;
        results.extend(done);
        if let Some(local) = local {
            local.stop().await;
        }
    }
    results.sort_by_key(|(i, _)| *i);
    Ok(results.into_iter().map(|(_, r)| r).collect())
}
