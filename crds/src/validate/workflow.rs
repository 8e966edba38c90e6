//! Checks of a Workflow on its own: the graph's shape.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Problem, Reason, duplicates};
use crate::workflow::{MAX_NODE_LINE_CHARS, NodeKind, WorkflowSpec};

/// Every problem with a Workflow spec's graph.
pub fn validate_workflow(spec: &WorkflowSpec) -> Vec<Problem> {
    let mut problems = Vec::new();
    let ids: BTreeSet<&str> = spec.nodes.iter().map(|n| n.id.as_str()).collect();

    if spec.nodes.is_empty() {
        problems.push(Problem::new(Reason::InvalidField, "spec.nodes", "must list at least one node"));
    }
    if !ids.contains(spec.entry.as_str()) {
        problems.push(Problem::new(
            Reason::NoEntryNode,
            "spec.entry",
            format!(
                "entry node {:?} is not among the nodes ({}); set spec.entry to one of them",
                spec.entry,
                ids.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    for dup in duplicates(spec.nodes.iter().map(|n| n.id.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.nodes",
            format!("node id {dup:?} is used more than once; node ids must be unique"),
        ));
    }
    for (i, node) in spec.nodes.iter().enumerate() {
        let field = format!("spec.nodes[{i}]");
        if !is_node_id(&node.id) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.id"),
                format!("{:?} is not a valid node id (lowercase letters, digits and '_', starting with a letter, at most 63)", node.id),
            ));
        }
        if node.kind == NodeKind::Tool && node.tools.is_empty() {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.tools"),
                format!("tool node {:?} lists no tools; list the tools it may call", node.id),
            ));
        }
        if node.kind != NodeKind::Handoff && node.handoff_to.is_some() {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.handoffTo"),
                format!("node {:?} is of kind {:?}; only handoff nodes may set handoffTo", node.id, node.kind),
            ));
        }
        for (list, entries) in [("tools", &node.tools), ("denyTools", &node.deny_tools)] {
            for (j, entry) in entries.iter().enumerate() {
                if !crate::agent::is_valid_pattern(entry) {
                    problems.push(Problem::new(
                        Reason::InvalidField,
                        format!("{field}.{list}[{j}]"),
                        format!("{entry:?} is not a tool name or pattern (letters, digits, '_', '-', and '*' or '?' as wildcards, at most 64)"),
                    ));
                }
            }
        }
        if let Some(line) = &node.say {
            check_line(&mut problems, &field, &node.id, &line.text);
        }
        for dup in duplicates(node.tools.iter().map(String::as_str)) {
            problems.push(Problem::new(
                Reason::DuplicateName,
                format!("{field}.tools"),
                format!("tool {dup:?} is listed more than once in node {:?}", node.id),
            ));
        }
    }

    let kinds: BTreeMap<&str, NodeKind> = spec.nodes.iter().map(|n| (n.id.as_str(), n.kind)).collect();
    for (i, edge) in spec.edges.iter().enumerate() {
        let field = format!("spec.edges[{i}]");
        for (end, id) in [("from", &edge.from), ("to", &edge.to)] {
            if !ids.contains(id.as_str()) {
                problems.push(Problem::new(
                    Reason::DanglingEdge,
                    format!("{field}.{end}"),
                    format!("edge {} -> {} names node {id:?}, which does not exist", edge.from, edge.to),
                ));
            }
        }
        if kinds.get(edge.from.as_str()) == Some(&NodeKind::End) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.from"),
                format!("edge {} -> {} leaves an end node; end nodes have no outgoing edges", edge.from, edge.to),
            ));
        }
        if edge.when.as_ref().is_some_and(|w| w.is_empty()) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.when"),
                "sets no condition; remove `when` or set toolSucceeded, toolFailed, memorySet or memoryEquals",
            ));
        }
    }

    if ids.contains(spec.entry.as_str()) {
        let reachable = reachable_from(spec);
        for (i, node) in spec.nodes.iter().enumerate() {
            if !reachable.contains(node.id.as_str()) {
                problems.push(Problem::new(
                    Reason::UnreachableNode,
                    format!("spec.nodes[{i}]"),
                    format!(
                        "node {:?} cannot be reached from the entry node {:?}; add an edge to it or remove it",
                        node.id, spec.entry
                    ),
                ));
            }
        }
    }
    problems
}

/// The text of node `id`'s `say` line is something to say, short, and can be quoted.
fn check_line(problems: &mut Vec<Problem>, field: &str, id: &str, text: &str) {
    let problem = if text.trim().is_empty() {
        Some("is empty: write the line the agent says on entering the node, or remove `say`".to_owned())
    } else if text.chars().count() > MAX_NODE_LINE_CHARS {
        Some(format!(
            "is {} characters long, more than {MAX_NODE_LINE_CHARS}; a line said on a call should be short",
            text.chars().count()
        ))
    } else if text.contains('"') {
        Some("contains a double quote (\"): the line is quoted to the voice model; use single quotes".to_owned())
    } else {
        None
    };
    if let Some(problem) = problem {
        problems.push(Problem::new(
            Reason::InvalidField,
            format!("{field}.say.text"),
            format!("node {id:?}: {problem}"),
        ));
    }
}

/// The ids of the nodes reachable from the entry node along edges.
pub(crate) fn reachable_from(spec: &WorkflowSpec) -> BTreeSet<&str> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in &spec.edges {
        out.entry(e.from.as_str()).or_default().push(e.to.as_str());
    }
    let mut seen = BTreeSet::from([spec.entry.as_str()]);
    let mut queue = VecDeque::from([spec.entry.as_str()]);
    while let Some(n) = queue.pop_front() {
        for &next in out.get(n).into_iter().flatten() {
            if seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    seen
}

fn is_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 63
        && id.as_bytes()[0].is_ascii_lowercase()
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::super::{Reason, validate_workflow};
    use crate::workflow::WorkflowSpec;

    #[test]
    fn a_node_line_must_be_short_sayable_and_quotable() {
        let spec: WorkflowSpec = serde_yaml::from_str(
            r#"
entry: start
nodes:
  - { id: start }
  - id: disclose
    say: { text: "Calls are recorded.", uninterruptible: true }
edges:
  - { from: start, to: disclose }
"#,
        )
        .expect("a workflow spec");
        let fine = validate_workflow(&spec);
        assert!(fine.is_empty(), "{fine:?}");
        // What the schema also refuses (the catalog checks it), the operator's checks say too.
        let long = "a".repeat(513);
        for (text, said) in [("  ", "is empty"), (long.as_str(), "more than 512"), ("say \"this\"", "double quote")] {
            let mut spec = spec.clone();
            spec.nodes[1].say.as_mut().expect("a line").text = text.to_owned();
            let got = validate_workflow(&spec);
            assert_eq!(got.len(), 1, "{text}: {got:?}");
            assert_eq!(got[0].reason, Reason::InvalidField);
            assert_eq!(got[0].field, "spec.nodes[1].say.text", "{got:?}");
            assert!(got[0].message.contains("\"disclose\"") && got[0].message.contains(said), "{said}: {got:?}");
        }
    }
}
