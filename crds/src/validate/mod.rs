//! Pure validation of Agents, Workflows and Personas.
//!
//! Every check returns *all* the problems it finds, each with a reason (used as the
//! `Accepted` condition's reason), the field it concerns, and a message a person can act
//! on. The CRD schema enforces what it can (types, enums, lengths, patterns); the rules
//! here repeat those that matter for safety (so a server that drops CEL rules, or a file
//! run locally, gets the same answer) and add the cross-object checks a schema cannot make.

mod agent;
mod authority;
mod fits;
mod knowledge;
mod model;
mod persona;
mod record;
mod telephony;
mod variant;
mod workflow;

pub use agent::{References, validate_agent};
pub use knowledge::{Gathered, gather_knowledge};
pub use persona::validate_persona;
pub use record::rule_problems as redact_rule_problems;
pub use variant::{VariantRefs, check_variants};
pub use workflow::validate_workflow;

use std::fmt;

/// Why a spec is not accepted. The name is the `Accepted` condition's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// The referenced Persona does not exist.
    PersonaNotFound,
    /// The referenced Workflow does not exist.
    WorkflowNotFound,
    /// The referenced Persona is itself invalid.
    PersonaInvalid,
    /// The referenced Workflow is itself invalid.
    WorkflowInvalid,
    /// A handoff names an Agent that does not exist.
    HandoffTargetNotFound,
    /// A workflow node or condition names a tool the Agent does not define.
    UnknownTool,
    /// A tool's input schema is not a valid JSON Schema for an object.
    InvalidToolSchema,
    /// Two things that must have distinct names share one.
    DuplicateName,
    /// The workflow's entry node does not exist.
    NoEntryNode,
    /// An edge names a node that does not exist.
    DanglingEdge,
    /// A node cannot be reached from the entry node.
    UnreachableNode,
    /// The system prompt template has an unknown or malformed placeholder.
    InvalidTemplate,
    /// A field violates a rule of its own (range, pattern, combination).
    InvalidField,
    /// A ConfigMap the Agent's knowledge or a skill reads does not exist, or lacks the key.
    ConfigMapNotFound,
    /// The Agent's knowledge is larger than `spec.knowledge.maxBytes`.
    KnowledgeTooLarge,
    /// A skill names a skill the Agent does not have.
    UnknownSkill,
}

impl Reason {
    /// The reason as written in conditions and Events.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::PersonaNotFound => "PersonaNotFound",
            Reason::WorkflowNotFound => "WorkflowNotFound",
            Reason::PersonaInvalid => "PersonaInvalid",
            Reason::WorkflowInvalid => "WorkflowInvalid",
            Reason::HandoffTargetNotFound => "HandoffTargetNotFound",
            Reason::UnknownTool => "UnknownTool",
            Reason::InvalidToolSchema => "InvalidToolSchema",
            Reason::DuplicateName => "DuplicateName",
            Reason::NoEntryNode => "NoEntryNode",
            Reason::DanglingEdge => "DanglingEdge",
            Reason::UnreachableNode => "UnreachableNode",
            Reason::InvalidTemplate => "InvalidTemplate",
            Reason::InvalidField => "InvalidField",
            Reason::ConfigMapNotFound => "ConfigMapNotFound",
            Reason::KnowledgeTooLarge => "KnowledgeTooLarge",
            Reason::UnknownSkill => "UnknownSkill",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing wrong with a spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The condition reason.
    pub reason: Reason,
    /// The field concerned, as a path such as `spec.nodes[2].tools[0]`.
    pub field: String,
    /// What is wrong and what to do, in plain language.
    pub message: String,
}

impl Problem {
    /// A problem with `field`.
    pub fn new(reason: Reason, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { reason, field: field.into(), message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.reason, self.field, self.message)
    }
}

/// Summarises problems for a condition: the first problem's reason, and every message.
pub fn summarize(problems: &[Problem]) -> Option<(Reason, String)> {
    let first = problems.first()?;
    let message = problems.iter().map(|p| format!("{}: {}", p.field, p.message)).collect::<Vec<_>>().join("; ");
    Some((first.reason, message))
}

/// Checks that `name` is a Kubernetes object name (RFC 1123 DNS label, as Agents need for
/// their Services).
pub(crate) fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
}

/// Collects names that occur more than once, in first-seen order.
pub(crate) fn duplicates<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = std::collections::BTreeSet::new();
    let mut dups = Vec::new();
    for n in names {
        if !seen.insert(n) && !dups.contains(&n) {
            dups.push(n);
        }
    }
    dups
}
