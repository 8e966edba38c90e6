//! The CEL rules in the CRDs (enforced by API servers from 1.25 on) and the pure validator
//! (which also covers servers that drop CEL, such as 1.20, and local mode) agree: every
//! object one refuses, the other refuses too. The rules are evaluated client-side with
//! kube's CEL interpreter.

use proptest::prelude::*;
use switchboard_crds::validate::{References, validate_agent, validate_workflow};
use switchboard_crds::{Agent, Workflow};

fn agent(spec: serde_json::Value) -> Agent {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a"}, "spec": spec
    }))
    .expect("agent")
}

fn workflow(spec: serde_json::Value) -> Workflow {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Workflow", "metadata": {"name": "w"}, "spec": spec
    }))
    .expect("workflow")
}

/// The CEL verdict: `Ok` or the rule messages that failed.
fn cel<K: kube::CustomResourceExt + serde::Serialize>(obj: &K) -> Result<(), String> {
    kube::core::cel::validate_cel(obj).map_err(|e| e.to_string())
}

fn agent_problems(a: &Agent) -> Vec<String> {
    let wf = workflow(serde_json::json!({"entry": "s", "nodes": [{"id": "s"}]}));
    let persona =
        serde_json::from_value(serde_json::json!({"displayName": "P", "systemPrompt": "x"})).expect("persona");
    validate_agent(
        "a",
        "ns",
        &a.spec,
        References {
            persona: Some(&persona),
            workflow: Some(&wf.spec),
            agent_exists: &|_| true,
            config_maps: &Default::default(),
        },
    )
    .into_iter()
    .map(|p| p.message)
    .collect()
}

fn tool(name: &str, http: bool, mcp: bool, builtin: bool) -> serde_json::Value {
    let mut t = serde_json::json!({"name": name, "description": "d"});
    if http {
        t["http"] = serde_json::json!({"url": "http://x"});
    }
    if mcp {
        t["mcp"] = serde_json::json!({"url": "http://y"});
    }
    if builtin {
        t["builtin"] = serde_json::json!({"kind": "currentTime"});
    }
    t
}

/// `tool` storing its result under memory `key`, as an identity provider or not.
fn remembering(mut tool: serde_json::Value, key: &str, provider: bool) -> serde_json::Value {
    tool["remember"] = serde_json::json!({ "key": key });
    if provider {
        tool["identityProvider"] = true.into();
    }
    tool
}

/// `tool` collecting an input by keypad as `spec` says.
fn keypad(mut tool: serde_json::Value, spec: serde_json::Value) -> serde_json::Value {
    tool["inputSchema"] = serde_json::json!({"type": "object", "properties": {"pin": {"type": "string"}}});
    tool["keypad"] = spec;
    tool
}

fn with(mut tool: serde_json::Value, field: &str, value: serde_json::Value) -> serde_json::Value {
    tool[field] = value;
    tool
}

#[test]
fn each_agent_rule_fails_with_its_message() {
    let base = serde_json::json!({"mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}});
    assert_eq!(cel(&agent(base.clone())), Ok(()));
    let mut varied = base.clone();
    varied["variants"] = serde_json::json!([{"name": "a", "weight": 95}, {"name": "b", "weight": 5}]);
    assert_eq!(cel(&agent(varied)), Ok(()), "weights that add up to 100 pass");
    let cases = [
        (
            serde_json::json!({"replicas": 1, "autoscaling": {"minReplicas": 1, "maxReplicas": 2}}),
            "set either replicas or autoscaling, not both",
        ),
        (
            serde_json::json!({"autoscaling": {"minReplicas": 3, "maxReplicas": 2}}),
            "maxReplicas must be at least minReplicas",
        ),
        (
            serde_json::json!({"model": {"provider": "openai"}}),
            "provider openai needs the server's base URL in endpoint",
        ),
        (
            serde_json::json!({"tools": [tool("t", true, false, true)]}),
            "set exactly one of http, mcp, builtin and client",
        ),
        (
            serde_json::json!({"tools": [tool("t", false, false, false)]}),
            "set exactly one of http, mcp, builtin and client",
        ),
        (serde_json::json!({"tools": [tool("return_to_x", true, false, false)]}), "reserved for handoffs"),
        (
            serde_json::json!({"tools": [{"name": "t", "description": "d", "client": {}, "cacheTtlSeconds": 60}]}),
            "a client tool's answer comes from the user's app and is not trusted",
        ),
        (
            serde_json::json!({"tools": [{"name": "t", "description": "d", "client": {}, "remember": {"key": "k"}}]}),
            "a client tool's answer comes from the user's app and is not trusted",
        ),
        (
            serde_json::json!({"tools": [remembering(tool("t", true, false, false), "verifiedUser", false)]}),
            "only a tool with identityProvider: true may remember into an identity key",
        ),
        (
            serde_json::json!({"identityKeys": ["caller"], "tools": [remembering(tool("t", true, false, false), "caller", false)]}),
            "only a tool with identityProvider: true may remember into an identity key",
        ),
        (
            serde_json::json!({"appContext": {"memory": ["page", "verifiedUser"]}}),
            "spec.appContext.memory may not list an identity key",
        ),
        (
            serde_json::json!({"identityKeys": ["caller"], "appContext": {"identity": true, "memory": ["caller"]}}),
            "spec.appContext.memory may not list an identity key",
        ),
        (
            serde_json::json!({"skills": [{"name": "fees", "description": "d", "delegatesTo": ["limits"]}]}),
            "a skill's delegatesTo must name other skills of spec.skills",
        ),
        (
            serde_json::json!({"skills": [{"name": "fees", "description": "d", "delegatesTo": ["fees"]}]}),
            "a skill's delegatesTo must name other skills of spec.skills",
        ),
        (
            serde_json::json!({"skills": [{"name": "fees", "description": "d", "tools": ["quote"]}]}),
            "a skill's tools must be tools of spec.tools",
        ),
        (
            serde_json::json!({"knowledge": {"dataContext": {"text": "x", "configMapRef": {"name": "c"}}}}),
            "set exactly one of text and configMapRef",
        ),
        (
            serde_json::json!({"skills": [{"name": "fees", "description": "d", "dataContext": {}}]}),
            "set exactly one of text and configMapRef",
        ),
        (
            serde_json::json!({"variants": [{"name": "a", "weight": 60}, {"name": "b", "weight": 30}]}),
            "the weights of spec.variants must add up to 100",
        ),
        (
            serde_json::json!({"tools": [keypad(tool("t", false, false, true), serde_json::json!({"input": "pin"}))]}),
            "keypad collects an input of an http or mcp tool",
        ),
        (
            serde_json::json!({"tools": [with(keypad(tool("t", true, false, false), serde_json::json!({"input": "pin"})), "cacheTtlSeconds", serde_json::json!(60))]}),
            "a tool with a keypad input is not cached",
        ),
        (
            serde_json::json!({"tools": [with(keypad(tool("t", true, false, false), serde_json::json!({"input": "pin"})), "bind", serde_json::json!({"pin": "verifiedUser.pin"}))]}),
            "keypad.input is also bound",
        ),
        (
            serde_json::json!({"tools": [keypad(tool("t", true, false, false), serde_json::json!({"input": "pin", "minDigits": 6, "maxDigits": 4}))]}),
            "keypad.minDigits is more than keypad.maxDigits",
        ),
    ];
    for (extra, message) in cases {
        let mut spec = base.clone();
        for (k, v) in extra.as_object().expect("object") {
            spec[k] = v.clone();
        }
        let a = agent(spec);
        let err = cel(&a).expect_err(message);
        assert!(err.contains(message), "CEL said {err:?}, expected {message:?}");
        assert!(!agent_problems(&a).is_empty(), "the validator accepts what CEL refuses: {message}");
    }
}

#[test]
fn each_workflow_rule_fails_with_its_message() {
    let ok = serde_json::json!({"entry": "s", "nodes": [{"id": "s", "say": {"text": "Calls are recorded.", "uninterruptible": true}}, {"id": "t", "kind": "tool", "tools": ["x"]}],
        "edges": [{"from": "s", "to": "t", "when": {"memorySet": "k"}}]});
    assert_eq!(cel(&workflow(ok)), Ok(()));
    let cases = [
        (serde_json::json!({"entry": "nope", "nodes": [{"id": "s"}]}), "entry must be the id of one of the nodes"),
        (
            serde_json::json!({"entry": "s", "nodes": [{"id": "s", "handoffTo": "x"}]}),
            "only handoff nodes may set handoffTo",
        ),
        (
            serde_json::json!({"entry": "s", "nodes": [{"id": "s", "kind": "tool"}]}),
            "a tool node must list the tools it may call",
        ),
        (
            serde_json::json!({"entry": "s", "nodes": [{"id": "s"}], "edges": [{"from": "s", "to": "s", "when": {}}]}),
            "set at least one of",
        ),
        (
            serde_json::json!({"entry": "s", "nodes": [{"id": "s", "say": {"text": "  "}}]}),
            "say.text must say something",
        ),
        (
            serde_json::json!({"entry": "s", "nodes": [{"id": "s", "say": {"text": "say \"this\"", "uninterruptible": true}}]}),
            "say.text must not contain a double quote",
        ),
    ];
    for (spec, message) in cases {
        let w = workflow(spec);
        let err = cel(&w).expect_err(message);
        assert!(err.contains(message), "CEL said {err:?}, expected {message:?}");
        assert!(!validate_workflow(&w.spec).is_empty(), "the validator accepts what CEL refuses: {message}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Over combinations of the fields the rules look at, CEL refuses exactly when the pure
    /// validator does.
    #[test]
    fn cel_and_the_validator_agree_on_agents(
        replicas in proptest::option::of(0i32..3),
        autoscaling in proptest::option::of((1i32..4, 1i32..4)),
        openai in any::<bool>(),
        endpoint in any::<bool>(),
        tools in proptest::collection::vec((prop::sample::select(vec!["lookup", "transfer_to_x", "return_to_y"]), any::<bool>(), any::<bool>(), any::<bool>()), 0..3),
        memory in proptest::collection::vec(proptest::option::of((prop::sample::select(vec!["verifiedUser", "caller", "intent"]), any::<bool>())), 3),
        identity_keys in proptest::option::of(prop::sample::subsequence(vec!["verifiedUser", "caller"], 0..=2)),
    ) {
        let mut spec = serde_json::json!({"mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}});
        if let Some(r) = replicas { spec["replicas"] = r.into(); }
        if let Some((min, max)) = autoscaling { spec["autoscaling"] = serde_json::json!({"minReplicas": min, "maxReplicas": max}); }
        if openai { spec["model"] = serde_json::json!({"provider": "openai"}); }
        if endpoint { spec["model"]["endpoint"] = "http://vllm:8000/v1".into(); }
        // Distinct names: uniqueness is the list-map's job, not a CEL rule.
        let tools: Vec<serde_json::Value> = tools.iter().enumerate()
            .map(|(i, (name, h, m, b))| tool(&format!("{name}{i}"), *h, *m, *b))
            .zip(&memory)
            .map(|(t, remember)| match remember { Some((key, provider)) => remembering(t, key, *provider), None => t })
            .collect();
        spec["tools"] = tools.into();
        if let Some(keys) = identity_keys { spec["identityKeys"] = keys.into(); }
        let a = agent(spec);
        let cel_ok = cel(&a).is_ok();
        let problems = agent_problems(&a);
        prop_assert_eq!(cel_ok, problems.is_empty(), "CEL: {:?}; validator: {:?}", cel(&a), problems);
    }
}

fn persona(turn_taking: serde_json::Value) -> switchboard_crds::Persona {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Persona", "metadata": {"name": "p"},
        "spec": {"displayName": "P", "systemPrompt": "x", "turnTaking": turn_taking}
    }))
    .expect("persona")
}

fn persona_problems(p: &switchboard_crds::Persona) -> Vec<String> {
    switchboard_crds::validate::validate_persona(&p.spec)
        .iter()
        .map(|p| format!("{}: {}", p.field, p.message))
        .collect()
}

#[test]
fn each_turn_taking_rule_fails_with_its_message_and_the_validator_says_what_to_change() {
    let defaults = persona(serde_json::json!({}));
    assert_eq!(cel(&defaults), Ok(()));
    assert!(persona_problems(&defaults).is_empty());
    assert_eq!(defaults.spec.turn_taking, switchboard_crds::persona::TurnTaking::default());
    for (turn_taking, rule, field) in [
        (
            serde_json::json!({"maxCall": {"seconds": 60, "warningSeconds": 60}}),
            "warningSeconds must be less",
            "maxCall.warningSeconds",
        ),
        (serde_json::json!({"maxCall": {"seconds": 5, "warningSeconds": 0}}), "at least 10", "maxCall.seconds"),
        (
            serde_json::json!({"silence": {"afterSeconds": 5, "prompt": "  "}}),
            "silence.prompt must say something",
            "silence.prompt",
        ),
    ] {
        let p = persona(turn_taking.clone());
        let refused = cel(&p).expect_err("CEL refuses");
        assert!(refused.contains(rule), "{turn_taking}: {refused}");
        let problems = persona_problems(&p);
        assert!(
            problems.iter().any(|m| m.starts_with(&format!("spec.turnTaking.{field}"))),
            "{turn_taking}: {problems:?}"
        );
    }
    // Off is fine: no limit, no silence handling, whatever the lines.
    let off = persona(
        serde_json::json!({"maxCall": {"seconds": 0, "warningSeconds": 60}, "silence": {"afterSeconds": 0, "prompt": ""}}),
    );
    assert_eq!((cel(&off), persona_problems(&off)), (Ok(()), Vec::<String>::new()));
    let quoted = persona(serde_json::json!({"silence": {"prompt": "Say \"yes\" if you're there"}}));
    let problems = persona_problems(&quoted);
    assert!(problems.iter().any(|m| m.contains("double quote")), "{problems:?}");
    let long = persona(serde_json::json!({"minInterruptionMs": 9000}));
    let problems = persona_problems(&long);
    assert!(
        problems.iter().any(|m| m.starts_with("spec.turnTaking.minInterruptionMs") && m.contains("could not stop")),
        "{problems:?}"
    );
}

proptest! {
    /// The CEL rules and the validator agree on every call limit and warning.
    #[test]
    fn cel_and_the_validator_agree_on_call_limits(seconds in 0..100u32, warning in 0..100u32, after in 0..3u32, blank in any::<bool>()) {
        let prompt = if blank { " " } else { "Hello?" };
        let p = persona(serde_json::json!({
            "maxCall": {"seconds": seconds, "warningSeconds": warning},
            "silence": {"afterSeconds": after, "prompt": prompt},
        }));
        prop_assert_eq!(cel(&p).is_ok(), persona_problems(&p).is_empty(), "{:?} {:?}", cel(&p), persona_problems(&p));
    }
}
