//! Checks a parsed scenario before anything runs: expectations that could never match
//! (a handoff to an agent the folder lacks, a tool no agent has, a consent request from a
//! tool that never asks), regular expressions that do not compile, steps with nothing to
//! say or more than one way of saying it, and WAV files that are missing or not 16 kHz mono
//! PCM16. Each problem names the file,
//! the line and what to change.
//!
//! What the folder's agents can do comes from their resolved specs ([`Facts`]), the same
//! resolution local mode and the operator use; without a folder of agents (a scenario run
//! against a gateway on its own) only the checks that need no agents are made.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use switchboard_crds::agent::{Consent, USE_SKILL_TOOL};
use switchboard_crds::runtime::{RETURN_PREFIX, TRANSFER_PREFIX};
use switchboard_crds::{Catalog, RuntimeSpec};

use super::file::{Expect, Opening, ScenarioFile, TranscriptExpect};
use super::locate::KeyPath;
use super::speech;

/// A folder of agents could not be read for the checks.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The folder's YAML could not be loaded.
    #[error("cannot read the agents of {dir}: {source}")]
    Load {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<switchboard_crds::LoadError>,
    },
    /// An agent of the folder is invalid.
    #[error("agent {agent} of {dir} is not valid: {problems}")]
    Invalid {
        /// The folder.
        dir: PathBuf,
        /// The agent.
        agent: String,
        /// Its problems, `; `-separated.
        problems: String,
    },
}

/// A problem of a scenario file, found before running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub path: PathBuf,
    /// The line, when it could be found.
    pub line: Option<usize>,
    /// The key path, e.g. `steps[2].expect.tools[0].name`.
    pub key: String,
    /// What is wrong and what to change.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}: {}", self.path.display(), self.key, self.message),
            None => write!(f, "{}: {}: {}", self.path.display(), self.key, self.message),
        }
    }
}

/// What one agent of the folder can do.
#[derive(Clone, Debug, Default)]
pub struct AgentFacts {
    /// Its own tools, its transfer tools, and `use_skill` when it has skills.
    pub tools: BTreeSet<String>,
    /// Its tools that ask for consent.
    pub consent: BTreeSet<String>,
    /// Its workflow's nodes.
    pub nodes: BTreeSet<String>,
    /// Its workflow's entry node.
    pub entry: String,
    /// The agents it transfers to.
    pub handoffs: Vec<String>,
    /// Memory keys its tools remember.
    pub remembers: BTreeSet<String>,
    /// Whether a client may start a session with it (exposed, or the default).
    pub startable: bool,
}

/// What the folder's agents can do, by agent name.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The agents.
    pub agents: BTreeMap<String, AgentFacts>,
}

impl Facts {
    /// Loads and resolves the agents of `dir` (`Ok(None)` when it holds none).
    pub fn load(dir: &Path) -> Result<Option<Self>, CheckError> {
        let catalog = Catalog::load_paths(&[dir])
            .map_err(|source| CheckError::Load { dir: dir.to_owned(), source: Box::new(source) })?;
        let mut specs = Vec::new();
        for agent in catalog.agents() {
            let spec = catalog.resolve_agent(agent).map_err(|problems| CheckError::Invalid {
                dir: dir.to_owned(),
                agent: agent.metadata.name.clone().unwrap_or_default(),
                problems: problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
            })?;
            specs.push(spec);
        }
        Ok((!specs.is_empty()).then(|| Self::from_specs(&specs)))
    }

    /// The facts of resolved specs.
    pub fn from_specs(specs: &[RuntimeSpec]) -> Self {
        let agents = specs
            .iter()
            .map(|spec| {
                let facts = AgentFacts {
                    tools: spec
                        .tools
                        .iter()
                        .map(|t| t.name.clone())
                        .chain(spec.handoffs.iter().map(|h| h.tool.clone()))
                        .chain((!spec.skills.is_empty()).then(|| USE_SKILL_TOOL.to_owned()))
                        .collect(),
                    consent: spec
                        .tools
                        .iter()
                        .filter(|t| t.consent == Consent::Required)
                        .map(|t| t.name.clone())
                        .collect(),
                    nodes: spec.workflow.spec.nodes.iter().map(|n| n.id.clone()).collect(),
                    entry: spec.workflow.spec.entry.clone(),
                    handoffs: spec.handoffs.iter().map(|h| h.agent.clone()).collect(),
                    remembers: spec.tools.iter().filter_map(|t| t.remember.as_ref().map(|r| r.key.clone())).collect(),
                    startable: spec.gateway.expose || spec.gateway.default,
                };
                (spec.agent.name.clone(), facts)
            })
            .collect();
        Self { agents }
    }

    /// Agents a session can be handed to: transfer targets, and the agents that transfer
    /// (a handed-to agent returns to them).
    fn handoff_targets(&self) -> BTreeSet<&str> {
        let transfers = self.agents.values().flat_map(|a| a.handoffs.iter().map(String::as_str));
        let callers = self.agents.iter().filter(|(_, a)| !a.handoffs.is_empty()).map(|(n, _)| n.as_str());
        transfers.chain(callers).collect()
    }

    /// Every tool name a model of the folder can call, return tools included.
    fn tools(&self) -> BTreeSet<String> {
        let own = self.agents.values().flat_map(|a| a.tools.iter().cloned());
        let returns = self
            .agents
            .iter()
            .filter(|(_, a)| !a.handoffs.is_empty())
            .map(|(name, _)| format!("{RETURN_PREFIX}{name}"));
        own.chain(returns).collect()
    }
}

fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<&str> = items.into_iter().collect();
    if items.is_empty() { "none".to_owned() } else { items.join(", ") }
}

/// The longest rubric of a judged expectation.
pub const MAX_RUBRIC_BYTES: usize = 2000;

/// Every problem of `file`, checked against `facts` when there are agents to check against.
pub fn check(file: &ScenarioFile, facts: Option<&Facts>) -> Vec<Problem> {
    let mut checker = Checker { file, facts, problems: Vec::new() };
    checker.scenario();
    // In the order of the file.
    checker.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    checker.problems
}

struct Checker<'a> {
    file: &'a ScenarioFile,
    facts: Option<&'a Facts>,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn problem(&mut self, key: KeyPath, message: impl Into<String>) {
        let line = self.file.line_of(&key);
        self.problems.push(Problem {
            path: self.file.path.clone(),
            line,
            key: key.to_string(),
            message: message.into(),
        });
    }

    fn scenario(&mut self) {
        let scenario = &self.file.scenario;
        let root = KeyPath::default();
        if scenario.steps.is_empty() {
            self.problem(root.key("steps"), "no steps: add at least one `- say: ...` with what the caller types");
        }
        if let Some(agent) = &scenario.agent {
            self.start_agent(root.key("agent"), agent);
        }
        if let Some(Opening { agent, transcript }) = &scenario.opening {
            if let Some(agent) = agent {
                self.agent(root.key("opening").key("agent"), agent);
            }
            if let Some(transcript) = transcript {
                self.transcript(root.key("opening").key("transcript"), transcript);
            }
        }
        for (i, step) in scenario.steps.iter().enumerate() {
            let at = root.key("steps").index(i);
            if let Some(keys) = &step.keys
                && let Err(error) = switchboard_core::dtmf::check(keys)
            {
                self.problem(at.key("keys"), keys_problem(keys, &error));
            }
            let given = [step.say.is_some(), step.speech.is_some(), step.audio.is_some()];
            if given.iter().filter(|g| **g).count() > 1 {
                self.problem(at.clone(), "give one of `say:`, `speech:` and `audio:` per step");
            } else if let Some(wav) = &step.audio {
                let path = self.file.path.parent().unwrap_or(Path::new(".")).join(wav);
                if let Err(e) = speech::read_wav(&path) {
                    self.problem(at.key("audio"), e.to_string());
                }
            } else if let Some(text) = &step.speech {
                if text.trim().is_empty() {
                    self.problem(at.key("speech"), "the step speaks no words: give what the caller says");
                }
            } else if step.keys.is_none() && step.say.as_deref().is_none_or(|s| s.trim().is_empty()) {
                self.problem(
                    at.clone(),
                    "the step says nothing: add `say:` with what the caller types (or `keys:` with what it presses)",
                );
            }
            self.expect(at.key("expect"), &step.expect);
        }
    }

    fn expect(&mut self, at: KeyPath, expect: &Expect) {
        if let Some(agent) = &expect.agent {
            self.agent(at.key("agent"), agent);
        }
        for (i, tool) in expect.tools.iter().flatten().enumerate() {
            self.tool(at.key("tools").index(i).key("name"), &tool.name);
            if tool.args.is_some() && tool.args_exact.is_some() {
                self.problem(at.key("tools").index(i), "give `args` (partial) or `argsExact`, not both");
            }
        }
        for (i, handoff) in expect.handoffs.iter().flatten().enumerate() {
            self.handoff(at.key("handoffs").index(i).key("to"), &handoff.to);
            if let Some(from) = &handoff.from {
                self.agent(at.key("handoffs").index(i).key("from"), from);
            }
        }
        for (i, memory) in expect.memory.iter().enumerate() {
            self.memory(at.key("memory").index(i).key("key"), &memory.key);
            if memory.absent && memory.value.is_some() {
                self.problem(at.key("memory").index(i), "give `value` (the key is set) or `absent: true`, not both");
            }
        }
        if let Some(transcript) = &expect.transcript {
            self.transcript(at.key("transcript"), transcript);
        }
        for (i, consent) in expect.consent.iter().enumerate() {
            self.consent(at.key("consent").index(i).key("tool"), &consent.tool);
        }
        if let Some(node) = &expect.workflow {
            self.node(at.key("workflow"), node, expect.agent.as_deref());
        }
        if let Some(judge) = &expect.judge {
            let words = judge.rubric.trim().len();
            if words == 0 || words > MAX_RUBRIC_BYTES {
                self.problem(at.key("judge").key("rubric"), format!("must be 1 to {MAX_RUBRIC_BYTES} bytes of text"));
            }
        }
    }

    fn transcript(&mut self, at: KeyPath, transcript: &TranscriptExpect) {
        for (i, pattern) in transcript.matches.0.iter().enumerate() {
            if let Err(error) = regex::Regex::new(pattern) {
                let key = if transcript.matches.0.len() == 1 { at.key("matches") } else { at.key("matches").index(i) };
                // The regex crate's message draws the pattern over several lines; its last says why.
                let why = error.to_string();
                let why = why.lines().last().unwrap_or_default().trim_start_matches("error: ").to_owned();
                self.problem(key, format!("the regular expression {pattern:?} does not compile: {why}"));
            }
        }
    }

    fn agent(&mut self, at: KeyPath, agent: &str) {
        let Some(facts) = self.facts else { return };
        if !facts.agents.contains_key(agent) {
            self.problem(
                at,
                format!(
                    "no agent {agent:?} in the folder; its agents: {}",
                    list(facts.agents.keys().map(String::as_str))
                ),
            );
        }
    }

    fn start_agent(&mut self, at: KeyPath, agent: &str) {
        let Some(facts) = self.facts else { return };
        match facts.agents.get(agent) {
            None => self.agent(at, agent),
            Some(a) if !a.startable => {
                let startable = facts.agents.iter().filter(|(_, a)| a.startable).map(|(n, _)| n.as_str());
                self.problem(
                    at,
                    format!(
                        "a session cannot start at {agent:?} (gateway.expose: false; the gateway refuses it with 4403): \
                         start at one of {} and reach it by handoff",
                        list(startable)
                    ),
                );
            }
            Some(_) => {}
        }
    }

    fn handoff(&mut self, at: KeyPath, to: &str) {
        let Some(facts) = self.facts else { return };
        let targets = facts.handoff_targets();
        if !targets.contains(to) {
            self.problem(
                at,
                format!(
                    "no agent of the folder hands off to {to:?}; handoffs can go to: {}",
                    list(targets.iter().copied())
                ),
            );
        }
    }

    fn tool(&mut self, at: KeyPath, tool: &str) {
        let Some(facts) = self.facts else { return };
        let tools = facts.tools();
        if !tools.contains(tool) {
            let hint = if tool.starts_with(TRANSFER_PREFIX) || tool.starts_with(RETURN_PREFIX) {
                " (handoff tools exist for each Agent's `handoffs` and back to the agents that transfer)"
            } else {
                ""
            };
            self.problem(
                at,
                format!(
                    "no agent of the folder has a tool {tool:?}{hint}; the tools: {}",
                    list(tools.iter().map(String::as_str))
                ),
            );
        }
    }

    fn consent(&mut self, at: KeyPath, tool: &str) {
        let Some(facts) = self.facts else { return };
        let asking: BTreeSet<&str> = facts.agents.values().flat_map(|a| a.consent.iter().map(String::as_str)).collect();
        if !asking.contains(tool) {
            self.problem(
                at,
                format!(
                    "{tool:?} never asks for consent (no tool of the folder named so has `consent: required`); \
                     tools that ask: {}",
                    list(asking.iter().copied())
                ),
            );
        }
    }

    fn memory(&mut self, at: KeyPath, key: &str) {
        let Some(facts) = self.facts else { return };
        let keys: BTreeSet<&str> = facts.agents.values().flat_map(|a| a.remembers.iter().map(String::as_str)).collect();
        if !keys.contains(key) {
            self.problem(
                at,
                format!(
                    "no tool of the folder remembers {key:?} (`remember.key`); keys tools set: {}",
                    list(keys.iter().copied())
                ),
            );
        }
    }

    fn node(&mut self, at: KeyPath, node: &str, agent: Option<&str>) {
        let Some(facts) = self.facts else { return };
        let known = agent.filter(|a| facts.agents.contains_key(*a));
        let nodes: BTreeSet<&str> = match known.and_then(|a| facts.agents.get(a)) {
            Some(a) => a.nodes.iter().map(String::as_str).collect(),
            None => facts.agents.values().flat_map(|a| a.nodes.iter().map(String::as_str)).collect(),
        };
        if !nodes.contains(node) {
            let whose = known.map_or("any agent's workflow".to_owned(), |a| format!("{a}'s workflow"));
            self.problem(at, format!("no node {node:?} in {whose}; its nodes: {}", list(nodes.iter().copied())));
        }
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;

/// What is wrong with a step's `keys:`, as the scenario's author can fix it (the protocol's
/// rules for `bidi_dtmf`, [`switchboard_core::dtmf::check`]).
fn keys_problem(keys: &str, error: &switchboard_core::dtmf::DtmfError) -> String {
    use switchboard_core::dtmf::{DtmfError, MAX_DIGITS};
    match error {
        DtmfError::Empty => "no keys: give the keys the caller presses, e.g. keys: \"1234#\"".to_owned(),
        DtmfError::NotAKey(bad) => {
            format!("{keys:?} holds {bad:?}, which is no key on a phone's keypad: press 0-9, *, # or A-D (no spaces)")
        }
        DtmfError::TooLong(count) => {
            format!("{count} keys in one step, more than {MAX_DIGITS}: split them over steps")
        }
        DtmfError::TooFast => error.to_string(),
    }
}
