//! Workflow state of one session: the current node, transitions checked against the
//! graph, and the deterministic `when` conditions evaluated on session state.
//!
//! The model moves along edges without a condition, either explicitly (the
//! `workflow_goto` tool) or implicitly by calling a tool (or handoff) that belongs to a
//! node it can reach that way; the core then walks the shortest such path. Edges with a
//! condition are taken only by the core, as soon as their condition holds, and never by
//! the model.

use std::collections::{BTreeSet, HashMap, VecDeque};

use switchboard_crds::workflow::{EdgeCondition, NodeKind, WorkflowSpec};

use super::memory::Memory;

/// Most automatic (condition-driven) steps taken in a row, so a cycle of conditions that
/// all hold cannot loop forever.
pub const MAX_AUTO_STEPS: usize = 32;

/// Where a session is in its workflow and what has happened in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowState {
    node: String,
    visited: Vec<String>,
    succeeded: BTreeSet<String>,
    failed: BTreeSet<String>,
    /// Skills in use at this step, in the order they were used.
    skills: Vec<String>,
}

/// A transition that was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The node left.
    pub from: String,
    /// The node entered.
    pub to: String,
    /// True when a `when` condition made it, false when the model chose it.
    pub by_condition: bool,
}

/// Why a transition the model asked for was refused; the model reads the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// No such node.
    #[error("there is no workflow step {0:?}; the steps are: {1}")]
    UnknownNode(String, String),
    /// The node exists but cannot be reached from here by the model.
    #[error("cannot move from step {from:?} to {to:?}: {reachable}")]
    NotReachable {
        /// The current node.
        from: String,
        /// The node asked for.
        to: String,
        /// What can be reached instead.
        reachable: String,
    },
}

impl WorkflowState {
    /// A session at the workflow's entry node.
    pub fn new(workflow: &WorkflowSpec) -> Self {
        Self {
            node: workflow.entry.clone(),
            visited: vec![workflow.entry.clone()],
            succeeded: BTreeSet::new(),
            failed: BTreeSet::new(),
            skills: Vec::new(),
        }
    }

    /// A session going on at `node` after visiting `visited` (elsewhere: another pod, a
    /// resume). A node this workflow lacks starts it at the entry; unknown visited nodes
    /// are dropped.
    pub fn resume(workflow: &WorkflowSpec, node: &str, visited: &[String]) -> Self {
        if workflow.node(node).is_none() {
            return Self::new(workflow);
        }
        let mut visited: Vec<String> = visited.iter().filter(|v| workflow.node(v).is_some()).cloned().collect();
        if visited.last().map(String::as_str) != Some(node) {
            visited.push(node.to_owned());
        }
        Self { node: node.to_owned(), visited, succeeded: BTreeSet::new(), failed: BTreeSet::new(), skills: Vec::new() }
    }

    /// The current node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Nodes visited, in order (the entry first).
    pub fn visited(&self) -> &[String] {
        &self.visited
    }

    /// The skills in use at the current step, in the order they were used.
    pub fn skills(&self) -> &[String] {
        &self.skills
    }

    /// Puts `skill` in use: beside the skills in use when `beside` is true, else instead of
    /// them. Using a skill already in use changes nothing.
    pub fn use_skill(&mut self, skill: &str, beside: bool) {
        if self.skills.iter().any(|s| s == skill) {
            return;
        }
        if !beside {
            self.skills.clear();
        }
        self.skills.push(skill.to_owned());
    }

    /// Records a tool's outcome for `toolSucceeded` / `toolFailed` conditions.
    pub fn record_tool(&mut self, tool: &str, success: bool) {
        if success {
            self.succeeded.insert(tool.to_owned());
        } else {
            self.failed.insert(tool.to_owned());
        }
    }

    /// Whether `condition` holds on this state and `memory`.
    pub fn holds(&self, condition: &EdgeCondition, memory: &Memory) -> bool {
        if condition.is_empty() {
            return false;
        }
        condition.tool_succeeded.as_ref().is_none_or(|t| self.succeeded.contains(t))
            && condition.tool_failed.as_ref().is_none_or(|t| self.failed.contains(t))
            && condition.memory_set.as_ref().is_none_or(|k| memory.get(k).is_some_and(|v| !v.is_null()))
            && condition.memory_equals.as_ref().is_none_or(|eq| memory.text_of(&eq.key).as_deref() == Some(&eq.value))
    }

    /// Follows edges whose conditions hold, from the current node, until none does (at
    /// most [`MAX_AUTO_STEPS`]). Returns the transitions made.
    pub fn advance(&mut self, workflow: &WorkflowSpec, memory: &Memory) -> Vec<Transition> {
        let mut made = Vec::new();
        for _ in 0..MAX_AUTO_STEPS {
            let next = workflow
                .edges
                .iter()
                .find(|e| e.from == self.node && e.when.as_ref().is_some_and(|c| self.holds(c, memory)));
            let Some(edge) = next else { break };
            made.push(self.enter(&edge.to, true));
        }
        made
    }

    /// Moves along the shortest model-choosable path to `target`.
    pub fn goto(&mut self, workflow: &WorkflowSpec, target: &str) -> Result<Vec<Transition>, TransitionError> {
        if workflow.node(target).is_none() {
            let ids: Vec<&str> = workflow.nodes.iter().map(|n| n.id.as_str()).collect();
            return Err(TransitionError::UnknownNode(target.to_owned(), ids.join(", ")));
        }
        if target == self.node {
            return Ok(Vec::new());
        }
        let Some(path) = self.path_to(workflow, |id| id == target) else {
            let reachable: Vec<String> =
                reachable(workflow, &self.node).into_iter().filter(|n| n != &self.node).collect();
            let reachable = if reachable.is_empty() {
                "no step can be chosen from here".to_owned()
            } else {
                format!("from here you can move to: {}", reachable.join(", "))
            };
            return Err(TransitionError::NotReachable { from: self.node.clone(), to: target.to_owned(), reachable });
        };
        Ok(path.iter().map(|to| self.enter(to, false)).collect())
    }

    /// The shortest model-choosable path (excluding the current node) to a node for which
    /// `accept` holds; empty when the current node itself is accepted.
    pub fn path_to(&self, workflow: &WorkflowSpec, accept: impl Fn(&str) -> bool) -> Option<Vec<String>> {
        if accept(&self.node) {
            return Some(Vec::new());
        }
        let mut previous: HashMap<&str, &str> = HashMap::new();
        let mut queue = VecDeque::from([self.node.as_str()]);
        while let Some(at) = queue.pop_front() {
            for edge in workflow.edges.iter().filter(|e| e.from == at && e.when.is_none()) {
                let to = edge.to.as_str();
                if to == self.node || previous.contains_key(to) {
                    continue;
                }
                previous.insert(to, at);
                if accept(to) {
                    let mut path = vec![to.to_owned()];
                    let mut cursor = to;
                    while let Some(&from) = previous.get(cursor) {
                        if from == self.node {
                            break;
                        }
                        path.push(from.to_owned());
                        cursor = from;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(to);
            }
        }
        None
    }

    fn enter(&mut self, to: &str, by_condition: bool) -> Transition {
        let from = std::mem::replace(&mut self.node, to.to_owned());
        self.visited.push(to.to_owned());
        // Skills belong to the step they were used at.
        self.skills.clear();
        Transition { from, to: to.to_owned(), by_condition }
    }

    /// Whether the session is at an `end` node.
    pub fn at_end(&self, workflow: &WorkflowSpec) -> bool {
        workflow.node(&self.node).is_some_and(|n| n.kind == NodeKind::End)
    }
}

/// Nodes reachable from `from` along edges without conditions, `from` first.
pub fn reachable(workflow: &WorkflowSpec, from: &str) -> Vec<String> {
    let mut seen = vec![from.to_owned()];
    let mut queue = VecDeque::from([from.to_owned()]);
    while let Some(at) = queue.pop_front() {
        for edge in workflow.edges.iter().filter(|e| e.from == at && e.when.is_none()) {
            if !seen.contains(&edge.to) {
                seen.push(edge.to.clone());
                queue.push_back(edge.to.clone());
            }
        }
    }
    seen
}

/// The workflow rendered for the prompt: every node with its kind and instruction, the
/// current one marked, and the moves available from it.
pub fn render(workflow: &WorkflowSpec, state: &WorkflowState) -> String {
    let mut out = String::from("Workflow steps:\n");
    for node in &workflow.nodes {
        let marker = if node.id == state.node { " (current step)" } else { "" };
        let kind = format!("{:?}", node.kind).to_lowercase();
        out.push_str(&format!("- {} [{kind}]{marker}: {}\n", node.id, node.instruction));
    }
    let moves: Vec<String> = workflow
        .edges
        .iter()
        .filter(|e| e.from == state.node)
        .map(|e| match (&e.when, &e.description) {
            (Some(_), _) => format!("- to {} happens automatically when its condition holds", e.to),
            (None, Some(d)) => format!("- to {}: {d}", e.to),
            (None, None) => format!("- to {}", e.to),
        })
        .collect();
    if moves.is_empty() {
        out.push_str("No further steps from here.\n");
    } else {
        out.push_str("From the current step:\n");
        out.push_str(&moves.join("\n"));
        out.push('\n');
    }
    out
}
