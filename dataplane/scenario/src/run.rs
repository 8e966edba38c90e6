//! Runs one scenario as a client of the session protocol: opens a session at a gateway
//! (local mode's or a cluster's), reads the opening, then for each step sends the caller's
//! text, speech ([`super::speech`]) or keys pressed (one `bidi_dtmf` a key, [`KEY_GAP`] apart, as the
//! SIP edge forwards a phone's RFC 4733 telephone events), answers the consent requests the step lists, reads until the turn ends, and checks
//! the step's expectations. The scenario stops at its first step with a divergence.
//!
//! A turn ends with `bidi_response_complete` whose `stop_reason` is not `handoff` (a handoff
//! goes on with the next agent's answer), with an error while no answer is under way, or
//! when the server closes; the runner then waits [`SETTLE`] for stragglers, and any new
//! answer in that time continues the turn. The session itself, as a client of the protocol,
//! is in `run/session.rs`.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::expect::{self, Divergence, ExpectError};
use super::file::{ScenarioFile, Step};
use super::judge::{self, Judge};
use super::locate::KeyPath;
use super::observe::{ObserveError, SessionView, TurnEnd};
use super::speech::{self, Phrases};

mod session;
use session::{Input, Session};

/// How long a turn that looks finished stays open for messages that continue it.
pub const SETTLE: Duration = Duration::from_millis(150);
/// How long the session may stay quiet after it opened before the first step (the
/// greeting comes at once when there is one).
pub const OPENING_QUIET: Duration = Duration::from_millis(300);
/// A turn's patience when the scenario sets none.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a scenario's session is started again while the gateway says its agent has no
/// ready pod (4503), or while an agent under test is served by its live pods (a gateway
/// that has not yet seen the routing table listing its candidate).
pub const START_PATIENCE: Duration = Duration::from_secs(30);
/// The time between two keys of a `keys:` step: a quick person's pace on a keypad, well
/// inside the core's rate (10 keys a second) and its pause that ends an entry (1.5 s).
pub const KEY_GAP: Duration = Duration::from_millis(120);
/// The pause between two such starts.
const START_PAUSE: Duration = Duration::from_secs(1);

/// A scenario could not be run to a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The WebSocket connection could not be opened.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// The URL or a header is not usable.
    #[error("{0}")]
    Request(String),
    /// A message could not be sent.
    #[error("cannot send to the server: {0}")]
    Send(#[source] Box<tokio_tungstenite::tungstenite::Error>),
    /// The server sent something that is not the session protocol.
    #[error(transparent)]
    Protocol(#[from] ObserveError),
    /// An expectation could not be evaluated.
    #[error(transparent)]
    Expect(#[from] ExpectError),
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The session endpoint, e.g. `ws://127.0.0.1:8080/v1/session`.
    pub url: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// Each agent's workflow entry node, when the agents are known (for `workflow:`).
    pub entries: std::collections::BTreeMap<String, String>,
    /// The audio of `speech:` texts: phrase tones the simulator behind `url` knows, or
    /// what Amazon Polly rendered.
    pub phrases: Phrases,
    /// The model that checks judged expectations, if any.
    pub judge: Option<Judge>,
    /// Agents whose held rollout is under test (`--candidate`): the sessions ask the gateway
    /// for candidate pods, and a scenario fails where one of these is served by its live pods.
    pub candidates: std::collections::BTreeSet<String>,
}

/// The input of step `i` of `file`, and how the report names it.
fn input(file: &ScenarioFile, i: usize, step: &Step, phrases: &Phrases) -> Result<(Input, String), RunError> {
    if let Some(text) = &step.speech {
        let audio = phrases.audio(text).unwrap_or_else(|| Err("nothing here renders speech".into()));
        let audio = audio.map_err(|why| {
            let line = file.line_of(&KeyPath::default().key("steps").index(i).key("speech"));
            let line = line.map_or_else(String::new, |line| format!(" (line {line})"));
            RunError::Request(format!("step {} of {}{line}: speech: {text:?}: {why}", i + 1, file.scenario.steps.len()))
        })?;
        return Ok((Input::Audio(audio), format!("(speech) {text}")));
    }
    if let Some(wav) = &step.audio {
        let path = file.path.parent().unwrap_or(std::path::Path::new(".")).join(wav);
        let pcm = speech::read_wav(&path).map_err(|e| RunError::Request(e.to_string()))?;
        return Ok((Input::Audio(speech::with_trailing_silence(pcm)), format!("(audio) {wav}")));
    }
    if let (Some(keys), None) = (&step.keys, &step.say) {
        return Ok((Input::Keys(keys.clone()), format!("(keys) {keys}")));
    }
    let said = step.say.clone().unwrap_or_default();
    Ok((Input::Text(said.clone()), said))
}

/// The verdict on one scenario.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// The file.
    pub path: PathBuf,
    /// The scenario's name.
    pub name: String,
    /// How long it ran.
    pub duration: Duration,
    /// Its steps.
    pub steps: usize,
    /// Passed, failed, or could not run.
    pub outcome: Outcome,
    /// Judged expectations (`judge.rubric`) a judge model found to hold.
    pub judged: usize,
    /// Judged expectations not checked: no judge model was given.
    pub unjudged: usize,
}

/// How a scenario ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Every step's expectations held.
    Passed,
    /// A step's did not.
    Failed(Box<Failure>),
    /// The scenario could not be run (no connection, a broken server).
    Broken(String),
}

/// The first step whose expectations did not hold.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The step, from 0; `None` for the opening.
    pub step: Option<usize>,
    /// Its line in the file.
    pub line: Option<usize>,
    /// What the caller said in it.
    pub said: String,
    /// What did not hold, in the order the step lists its expectations.
    pub divergences: Vec<Divergence>,
    /// The turn as transcript lines.
    pub lines: Vec<String>,
}

/// Runs `file`'s scenario against `connection`.
pub async fn run(file: &ScenarioFile, connection: &Connection) -> ScenarioResult {
    let started = Instant::now();
    let mut judging = Judging::default();
    let outcome = match drive(file, connection, &mut judging).await {
        Ok(None) => Outcome::Passed,
        Ok(Some(failure)) => Outcome::Failed(Box::new(failure)),
        Err(error) => Outcome::Broken(error.to_string()),
    };
    ScenarioResult {
        path: file.path.clone(),
        name: file.scenario.name.clone(),
        duration: started.elapsed(),
        steps: file.scenario.steps.len(),
        outcome,
        judged: judging.held,
        unjudged: judging.unchecked,
    }
}

/// What became of a scenario's judged expectations, and the conversation a judge reads.
#[derive(Default)]
struct Judging {
    held: usize,
    unchecked: usize,
    conversation: Vec<String>,
}

async fn drive(
    file: &ScenarioFile,
    connection: &Connection,
    judging: &mut Judging,
) -> Result<Option<Failure>, RunError> {
    let scenario = &file.scenario;
    let patience = scenario.turn_timeout_ms.map_or(DEFAULT_TURN_TIMEOUT, Duration::from_millis);
    let (mut session, opening) = Session::open(scenario, connection, patience).await?;
    let mut divergences = match &scenario.opening {
        Some(expected) => expect::check_opening(expected, &opening, session.view())?,
        None => Vec::new(),
    };
    if let TurnEnd::Closed { code, reason } = &opening.end {
        divergences.insert(0, closed("an open session", *code, reason));
    }
    divergences.extend(off_candidate(session.view()));
    if !divergences.is_empty() {
        let line = first_line(file, &KeyPath::default().key("opening"), &divergences)
            .or_else(|| file.line_of(&KeyPath::default().key("agent")));
        return Ok(Some(Failure { step: None, line, said: String::new(), divergences, lines: opening.lines() }));
    }
    judging.conversation.extend(judge::transcript(opening.messages()));
    for (i, step) in scenario.steps.iter().enumerate() {
        let (sent, said) = input(file, i, step, &connection.phrases)?;
        let at = KeyPath::default().key("steps").index(i);
        let line = file.line_of(&at);
        if let Some((code, reason)) = session.closed() {
            let divergence = closed("an open session to send the step to", *code, reason);
            return Ok(Some(Failure { step: Some(i), line, said, divergences: vec![divergence], lines: Vec::new() }));
        }
        // Keys given with what the caller says are pressed when the agent starts a tool.
        let keys_on_tool = step.keys.as_deref().filter(|_| !matches!(sent, Input::Keys(_)));
        let turn = session.turn(sent, &said, &step.expect.consent, keys_on_tool, patience).await?;
        let mut divergences = expect::check(&step.expect, &turn, session.view())?;
        divergences.extend(off_candidate(session.view()));
        let lines = judge::transcript(turn.messages());
        if let (Some(expected), true) = (&step.expect.judge, divergences.is_empty()) {
            match &connection.judge {
                None => judging.unchecked += 1,
                Some(judge) => match judge.check(&expected.rubric, &judging.conversation, &lines).await {
                    None => judging.held += 1,
                    Some(divergence) => divergences.push(divergence),
                },
            }
        }
        judging.conversation.extend(lines);
        if !divergences.is_empty() {
            let line = first_line(file, &at.key("expect"), &divergences).or(line);
            return Ok(Some(Failure { step: Some(i), line, said, divergences, lines: turn.lines() }));
        }
    }
    session.close().await;
    Ok(None)
}

/// A divergence when an agent under test was served by its live pods: what passed there is
/// not what the held rollout would ship.
fn off_candidate(view: &SessionView) -> Option<Divergence> {
    view.off_candidate.as_ref().map(|agent| Divergence {
        expectation: "candidate".into(),
        expected: format!("{agent} served by its candidate pods (the held rollout under test)"),
        actual: format!(
            "its live pods served it: the gateway does not route this test session to {agent}'s candidate (its \
             routing table does not list it, or it predates candidate routing)"
        ),
    })
}

/// The line of the expectation the first divergence is about, under `at`.
fn first_line(file: &ScenarioFile, at: &KeyPath, divergences: &[Divergence]) -> Option<usize> {
    divergences.first().and_then(|d| file.line_of(&at.join(&d.expectation)))
}

fn closed(expected: &str, code: u16, reason: &str) -> Divergence {
    Divergence {
        expectation: "session".into(),
        expected: expected.into(),
        actual: format!("the server closed the session ({code}: {reason})"),
    }
}
