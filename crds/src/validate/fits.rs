//! Whether a Workflow fits the Agent that runs it: its nodes and edges name only the Agent's
//! tools and handoff targets. Checked for the Agent's own Workflow and for each variant's.

use std::collections::BTreeSet;

use super::{Problem, Reason};
use crate::agent::{AgentSpec, glob_match, is_pattern};
use crate::workflow::{NodeKind, WorkflowSpec};

/// The Workflow may only use tools and handoff targets the Agent defines.
pub(super) fn check_workflow_fits(spec: &AgentSpec, workflow: &WorkflowSpec, problems: &mut Vec<Problem>) {
    let tools: BTreeSet<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    let targets: BTreeSet<&str> = spec.handoffs.iter().map(|h| h.agent.as_str()).collect();
    let wf = &spec.workflow_ref.name;
    let unknown_tool = |node: &str, tool: &str| {
        Problem::new(
            Reason::UnknownTool,
            "spec.tools",
            format!(
                "workflow {wf:?} node {node:?} uses tool {tool:?}, which this agent does not define; add it to spec.tools or remove it from the node"
            ),
        )
    };
    for node in &workflow.nodes {
        for tool in &node.tools {
            let known = if is_pattern(tool) {
                tools.iter().any(|t| glob_match(tool, t))
            } else {
                tools.contains(tool.as_str())
            };
            if !known {
                problems.push(unknown_tool(&node.id, tool));
            }
        }
        if let (NodeKind::Handoff, Some(target)) = (node.kind, &node.handoff_to)
            && !targets.contains(target.as_str())
        {
            problems.push(Problem::new(
                Reason::HandoffTargetNotFound,
                "spec.handoffs",
                format!(
                    "workflow {wf:?} node {:?} hands off to {target:?}, which is not among this agent's spec.handoffs",
                    node.id
                ),
            ));
        }
    }
    for edge in &workflow.edges {
        for tool in edge.when.iter().flat_map(|w| w.tools()) {
            if !tools.contains(tool) {
                problems.push(unknown_tool(&format!("{} -> {}", edge.from, edge.to), tool));
            }
        }
    }
}
