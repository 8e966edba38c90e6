//! Property tests of validation and resolution over generated graphs and agents.

use proptest::prelude::*;
use switchboard_crds::agent::{AgentSpec, BuiltinKind, BuiltinTool, HandoffTarget, ToolSpec};
use switchboard_crds::persona::{PersonaSpec, TEMPLATE_PLACEHOLDERS};
use switchboard_crds::validate::{Reason, References, validate_agent, validate_persona, validate_workflow};
use switchboard_crds::workflow::{NodeKind, WorkflowEdge, WorkflowNode, WorkflowSpec};
use switchboard_crds::{Agent, Persona, RuntimeSpec, Workflow, resolve};

fn node(id: String, kind: NodeKind) -> WorkflowNode {
    WorkflowNode {
        id,
        kind,
        instruction: String::new(),
        tools: vec![],
        deny_tools: vec![],
        handoff_to: None,
        say: None,
    }
}

fn edge(from: &str, to: &str) -> WorkflowEdge {
    WorkflowEdge { from: from.into(), to: to.into(), description: None, when: None }
}

/// A valid graph: node i>0 hangs off a random earlier non-end node (so all are reachable),
/// plus extra edges between random nodes that leave no end node.
fn valid_workflow() -> impl Strategy<Value = WorkflowSpec> {
    (2usize..40).prop_flat_map(|n| {
        let parents = proptest::collection::vec(any::<prop::sample::Index>(), n - 1);
        let ends = proptest::collection::vec(any::<bool>(), n);
        let extra = proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..n);
        (Just(n), parents, ends, extra).prop_map(|(n, parents, ends, extra)| {
            // Node 0 and every parent are message nodes; leaves may be end nodes.
            let ids: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            let mut is_parent = vec![false; n];
            let mut edges = Vec::new();
            for (i, p) in parents.iter().enumerate() {
                let parent = p.index(i + 1);
                is_parent[parent] = true;
                edges.push(edge(&ids[parent], &ids[i + 1]));
            }
            let kinds: Vec<NodeKind> = (0..n)
                .map(|i| if !is_parent[i] && i > 0 && ends[i] { NodeKind::End } else { NodeKind::Message })
                .collect();
            for (a, b) in extra {
                let (a, b) = (a.index(n), b.index(n));
                if kinds[a] != NodeKind::End {
                    edges.push(edge(&ids[a], &ids[b]));
                }
            }
            WorkflowSpec {
                entry: ids[0].clone(),
                nodes: ids.iter().zip(kinds).map(|(id, k)| node(id.clone(), k)).collect(),
                edges,
            }
        })
    })
}

fn persona() -> PersonaSpec {
    PersonaSpec {
        display_name: "Pat".into(),
        system_prompt: "You are {name}.".into(),
        voice: "matthew".into(),
        language: "en-US".into(),
        greeting: None,
        speak_first: false,
        response_style: Default::default(),
        turn_taking: Default::default(),
        languages: Vec::new(),
    }
}

fn agent_spec(tools: Vec<ToolSpec>, handoffs: Vec<HandoffTarget>) -> AgentSpec {
    serde_json::from_value::<AgentSpec>(serde_json::json!({
        "mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}
    }))
    .map(|mut s| {
        s.tools = tools;
        s.handoffs = handoffs;
        s
    })
    .expect("minimal agent spec")
}

fn tool(name: &str) -> ToolSpec {
    serde_json::from_value(serde_json::json!({
        "name": name, "description": "d", "builtin": {"kind": "currentTime"}
    }))
    .expect("tool")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn generated_valid_graphs_pass(wf in valid_workflow()) {
        let problems = validate_workflow(&wf);
        prop_assert!(problems.is_empty(), "{:?}", problems);
    }

    #[test]
    fn removing_a_node_leaves_dangling_edges(wf in valid_workflow(), pick in any::<prop::sample::Index>()) {
        let mut wf = wf;
        let victim = wf.nodes.remove(pick.index(wf.nodes.len())).id;
        let problems = validate_workflow(&wf);
        if victim == wf.entry {
            prop_assert!(problems.iter().any(|p| p.reason == Reason::NoEntryNode));
        } else {
            // Every non-entry node has an incoming tree edge, so an edge now dangles.
            let quoted = format!("{victim:?}");
            let dangling = problems.iter().any(|p| p.reason == Reason::DanglingEdge && p.message.contains(&quoted));
            prop_assert!(dangling, "no dangling edge to {} in {:?}", quoted, problems);
        }
    }

    #[test]
    fn an_island_is_reported_unreachable(wf in valid_workflow()) {
        let mut wf = wf;
        wf.nodes.push(node("island".into(), NodeKind::Message));
        let problems = validate_workflow(&wf);
        prop_assert_eq!(problems.len(), 1);
        prop_assert_eq!(problems[0].reason, Reason::UnreachableNode);
        prop_assert!(problems[0].message.contains("\"island\""));
    }

    #[test]
    fn arbitrary_graphs_never_panic(
        entry in "[a-z_]{0,4}",
        ids in proptest::collection::vec("[a-zA-Z0-9_ ]{0,4}", 0..8),
        edges in proptest::collection::vec(("[a-z_]{0,3}", "[a-z_]{0,3}"), 0..12),
    ) {
        let wf = WorkflowSpec {
            entry,
            nodes: ids.into_iter().map(|id| node(id, NodeKind::Decision)).collect(),
            edges: edges.iter().map(|(a, b)| edge(a, b)).collect(),
        };
        let _ = validate_workflow(&wf);
    }

    #[test]
    fn templates_of_known_placeholders_pass_and_unknown_fail(
        parts in proptest::collection::vec((prop::sample::select(TEMPLATE_PLACEHOLDERS), "[^{}]{0,12}"), 1..6),
        bad in "[a-z]{1,8}",
    ) {
        let template: String = parts.iter().map(|(p, text)| format!("{{{p}}}{text}")).collect();
        let mut p = persona();
        p.system_prompt = format!("x{template}");
        prop_assert!(validate_persona(&p).is_empty(), "{:?}", validate_persona(&p));
        prop_assume!(!TEMPLATE_PLACEHOLDERS.contains(&bad.as_str()));
        p.system_prompt = format!("x{template}{{{bad}}}");
        prop_assert_eq!(validate_persona(&p)[0].reason, Reason::InvalidTemplate);
    }

    #[test]
    fn resolution_keeps_tools_and_makes_one_transfer_tool_per_handoff(
        wf in valid_workflow(),
        tool_names in proptest::collection::btree_set("[a-z][a-z0-9_]{0,10}", 0..6),
        targets in proptest::collection::btree_set("[a-z][a-z0-9-]{0,8}[a-z]", 0..5),
    ) {
        prop_assume!(!targets.contains("a"));
        let tools: Vec<ToolSpec> = tool_names.iter().map(|n| tool(n)).collect();
        let handoffs: Vec<HandoffTarget> = targets.iter().map(|t| HandoffTarget { agent: t.clone(), description: None }).collect();
        let spec = agent_spec(tools.clone(), handoffs);
        let p = persona();
        let exists = |name: &str| targets.contains(name);
        let problems = validate_agent("a", "ns", &spec, References { persona: Some(&p), workflow: Some(&wf), agent_exists: &exists, config_maps: &Default::default() });
        prop_assert!(problems.is_empty(), "{:?}", problems);

        let mut agent = Agent::new("a", spec);
        agent.metadata.namespace = Some("ns".into());
        let rs = resolve(&agent, &Persona::new("p", p), &Workflow::new("w", wf), &Default::default());
        prop_assert_eq!(&rs.tools, &tools);
        let transfer: Vec<String> = rs.handoffs.iter().map(|h| h.tool.clone()).collect();
        let expected: Vec<String> = targets.iter().map(|t| format!("transfer_to_{t}")).collect();
        prop_assert_eq!(transfer, expected);
        // Canonical JSON is stable and round-trips.
        let json = rs.to_canonical_json();
        prop_assert_eq!(&json, &resolve(&agent, &Persona::new("p", persona()), &Workflow::new("w", rs.workflow.spec.clone()), &Default::default()).to_canonical_json());
        prop_assert_eq!(RuntimeSpec::parse(&json).expect("parses"), rs);
    }

    #[test]
    fn unknown_handoff_targets_are_always_reported(targets in proptest::collection::btree_set("[a-z]{1,6}", 1..5)) {
        let handoffs: Vec<HandoffTarget> = targets.iter().map(|t| HandoffTarget { agent: t.clone(), description: None }).collect();
        let spec = agent_spec(vec![], handoffs);
        let wf = WorkflowSpec { entry: "s".into(), nodes: vec![node("s".into(), NodeKind::Message)], edges: vec![] };
        let p = persona();
        let problems = validate_agent("zzzzzzz", "ns", &spec, References { persona: Some(&p), workflow: Some(&wf), agent_exists: &|_| false, config_maps: &Default::default() });
        prop_assert_eq!(problems.iter().filter(|p| p.reason == Reason::HandoffTargetNotFound).count(), targets.len());
    }
}

#[test]
fn builtin_tool_kinds_serialise_camel_case() {
    let t = ToolSpec { builtin: Some(BuiltinTool { kind: BuiltinKind::EndSession }), ..tool("bye") };
    let v = serde_json::to_value(&t).expect("serialises");
    assert_eq!(v["builtin"]["kind"], "endSession");
    assert_eq!(v["consent"], "never");
}
