//! Validation and resolution, from inline YAML and the shipped examples.

#[path = "../common/mod.rs"]
mod common;
mod inputs;

use common::{catalog, problems};
use switchboard_crds::validate::{Problem, Reason};
use switchboard_crds::{Catalog, Mode};

const PERSONA: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: { name: p }
spec:
  displayName: Pat
  systemPrompt: "You are {name}. {memory}"
"#;

const WORKFLOW: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: { name: w }
spec:
  entry: start
  nodes:
    - { id: start, kind: message, instruction: Talk. }
    - { id: check, kind: tool, tools: [lookup] }
    - { id: bye, kind: end }
  edges:
    - { from: start, to: check }
    - { from: check, to: bye, when: { toolSucceeded: lookup } }
"#;

const AGENT: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: { name: a }
spec:
  mode: text
  personaRef: { name: p }
  workflowRef: { name: w }
  tools:
    - name: lookup
      description: Look something up.
      inputSchema: { type: object, properties: { q: { type: string } }, required: [q] }
      http: { url: "http://tools:8080/lookup" }
"#;

fn reasons(docs: &[&str]) -> Vec<Reason> {
    problems(docs).into_iter().map(|p| p.reason).collect()
}

#[test]
fn a_valid_agent_resolves_with_defaults() {
    let c = catalog(&[PERSONA, WORKFLOW, AGENT]);
    let agent = c.agent("default", "a").expect("agent");
    let spec = c.resolve_agent(agent).expect("valid");
    assert_eq!(spec.agent.namespace, "default");
    assert_eq!(spec.mode, Mode::Text);
    assert_eq!(spec.persona.spec.voice, "matthew");
    assert_eq!(spec.model.voice_model_id, "amazon.nova-2-sonic-v1:0");
    assert_eq!(spec.workflow.spec.entry, "start");
    assert_eq!(spec.tools[0].http.as_ref().map(|h| h.timeout_ms), Some(5000));
    let json = spec.to_canonical_json();
    let back = switchboard_crds::RuntimeSpec::parse(&json).expect("round trip");
    assert_eq!(back, spec);
}

#[test]
fn missing_persona_and_workflow_are_named() {
    let p = problems(&[AGENT]);
    assert_eq!(p[0].reason, Reason::PersonaNotFound);
    assert_eq!(
        p[0].message,
        "persona \"p\" does not exist in namespace \"default\"; create it or fix spec.personaRef.name"
    );
    assert!(p.iter().any(|p| p.reason == Reason::WorkflowNotFound && p.message.contains("workflow \"w\"")));
}

#[test]
fn workflow_graph_problems() {
    let wf = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: { name: w }
spec:
  entry: nowhere
  nodes:
    - { id: start }
    - { id: start }
    - { id: island }
    - { id: bye, kind: end }
  edges:
    - { from: start, to: ghost }
    - { from: bye, to: start }
    - { from: start, to: bye, when: {} }
"#;
    let c = catalog(&[wf]);
    let w = c.workflows().next().expect("workflow");
    let got: Vec<Reason> =
        switchboard_crds::validate::validate_workflow(&w.spec).into_iter().map(|p| p.reason).collect();
    assert!(got.contains(&Reason::NoEntryNode), "{got:?}");
    assert!(got.contains(&Reason::DuplicateName), "{got:?}");
    assert!(got.contains(&Reason::DanglingEdge), "{got:?}");
    assert!(got.contains(&Reason::InvalidField), "{got:?}"); // edge out of an end node, empty `when`
    // With a valid entry, unreachable nodes are reported.
    let wf2 = wf.replace("entry: nowhere", "entry: start");
    let c = catalog(&[&wf2]);
    let problems = switchboard_crds::validate::validate_workflow(&c.workflows().next().expect("wf").spec);
    let unreachable: Vec<&str> =
        problems.iter().filter(|p| p.reason == Reason::UnreachableNode).map(|p| p.message.as_str()).collect();
    assert_eq!(unreachable.len(), 1, "{problems:?}");
    assert!(unreachable[0].contains("\"island\""));
}

#[test]
fn an_invalid_workflow_makes_its_agents_invalid() {
    let wf = WORKFLOW.replace("entry: start", "entry: begin");
    assert_eq!(reasons(&[PERSONA, &wf, AGENT]), [Reason::WorkflowInvalid]);
}

#[test]
fn node_tools_must_be_defined_by_the_agent() {
    let agent = AGENT.replace("name: lookup", "name: search");
    let p = problems(&[PERSONA, WORKFLOW, &agent]);
    let unknown: Vec<&Problem> = p.iter().filter(|p| p.reason == Reason::UnknownTool).collect();
    // Once in node "check", once in the edge condition.
    assert_eq!(unknown.len(), 2, "{p:?}");
    assert!(unknown[0].message.contains("node \"check\" uses tool \"lookup\""));
}

#[test]
fn handoff_targets_must_exist() {
    let agent = format!("{AGENT}  handoffs:\n    - agent: billing\n");
    let p = problems(&[PERSONA, WORKFLOW, &agent]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].reason, Reason::HandoffTargetNotFound);
    assert!(p[0].message.contains("agent \"billing\" does not exist"));

    let billing = AGENT.replace("name: a }", "name: billing }");
    assert!(problems(&[PERSONA, WORKFLOW, &agent, &billing]).is_empty());
}

#[test]
fn handoff_nodes_must_target_a_listed_handoff() {
    let wf = WORKFLOW.replace(
        "    - { id: bye, kind: end }",
        "    - { id: bye, kind: end }\n    - { id: away, kind: handoff, handoffTo: billing }",
    ) + "    - { from: start, to: away }\n";
    let p = problems(&[PERSONA, &wf, AGENT]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].reason, Reason::HandoffTargetNotFound);
    assert!(p[0].message.contains("node \"away\" hands off to \"billing\""));
}

#[test]
fn tool_schema_and_target_problems() {
    let bad_schema =
        AGENT.replace("{ type: object, properties: { q: { type: string } }, required: [q] }", "{ type: array }");
    assert_eq!(reasons(&[PERSONA, WORKFLOW, &bad_schema]), [Reason::InvalidToolSchema]);
    let broken = AGENT.replace("{ q: { type: string } }", "{ q: { type: 12 } }");
    let p = problems(&[PERSONA, WORKFLOW, &broken]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].message.contains("not a valid JSON Schema"), "{}", p[0].message);
    let two_targets = AGENT.replace(
        r#"http: { url: "http://tools:8080/lookup" }"#,
        "http: { url: \"http://x\" }\n      builtin: { kind: currentTime }",
    );
    let p = problems(&[PERSONA, WORKFLOW, &two_targets]);
    assert!(p[0].message.contains("exactly one of http, mcp, builtin and client"), "{p:?}");
    let dup = AGENT.to_owned() + "    - name: lookup\n      description: again\n      builtin: { kind: currentTime }\n";
    assert_eq!(reasons(&[PERSONA, WORKFLOW, &dup]), [Reason::DuplicateName]);
    let reserved = AGENT.replace("name: lookup", "name: transfer_to_x");
    assert!(problems(&[PERSONA, WORKFLOW, &reserved]).iter().any(|p| p.message.contains("reserved for handoff")));
}

#[test]
fn client_tool_problems() {
    let client = |extra: &str| {
        AGENT.replace(
            r#"http: { url: "http://tools:8080/lookup" }"#,
            &format!("client: {{ timeoutSeconds: 10 }}{extra}"),
        )
    };
    assert!(problems(&[PERSONA, WORKFLOW, &client("")]).is_empty(), "a client tool is accepted");
    let cached = client("\n      cacheTtlSeconds: 30");
    let p = problems(&[PERSONA, WORKFLOW, &cached]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!((p[0].reason, p[0].field.as_str()), (Reason::InvalidField, "spec.tools[0].cacheTtlSeconds"));
    assert!(p[0].message.contains("runs in the client, whose answer is not trusted"), "{p:?}");
    let provider = client("\n      identityProvider: true\n      remember: { key: verifiedUser }");
    let fields: Vec<String> = problems(&[PERSONA, WORKFLOW, &provider]).into_iter().map(|p| p.field).collect();
    assert!(fields.contains(&"spec.tools[0].identityProvider".to_owned()), "{fields:?}");
    assert!(fields.contains(&"spec.tools[0].remember".to_owned()), "{fields:?}");
    let schema =
        AGENT.replace(r#"http: { url: "http://tools:8080/lookup" }"#, "client: { outputSchema: { type: 12 } }");
    let p = problems(&[PERSONA, WORKFLOW, &schema]);
    assert_eq!((p[0].reason, p[0].field.as_str()), (Reason::InvalidToolSchema, "spec.tools[0].client.outputSchema"));
}

#[test]
fn persona_template_and_scaling_rules() {
    let persona = PERSONA.replace("{memory}", "{memroy}");
    let p = problems(&[&persona, WORKFLOW, AGENT]);
    assert_eq!(p[0].reason, Reason::PersonaInvalid);
    assert!(p[0].message.contains("unknown placeholder {memroy}"), "{}", p[0].message);

    let both = format!("{AGENT}  replicas: 2\n  autoscaling: {{ minReplicas: 3, maxReplicas: 2 }}\n");
    let msgs: Vec<String> = problems(&[PERSONA, WORKFLOW, &both]).into_iter().map(|p| p.message).collect();
    assert!(msgs.iter().any(|m| m == "set either replicas or autoscaling, not both"), "{msgs:?}");
    assert!(msgs.iter().any(|m| m.contains("minReplicas <= maxReplicas")), "{msgs:?}");

    let openai = format!("{AGENT}  model: {{ provider: openai }}\n");
    assert!(problems(&[PERSONA, WORKFLOW, &openai]).iter().any(|p| p.field == "spec.model.endpoint"));
}

#[test]
fn schema_violations_are_rejected_on_load() {
    let mut c = Catalog::new();
    let bad = AGENT.replace("mode: text", "mode: telepathy");
    let e = c.add_yaml(&bad, "agent.yaml").expect_err("schema violation").to_string();
    assert!(e.contains("agent.yaml, document 1") && e.contains("spec.mode") && e.contains("telepathy"), "{e}");
    let e = c
        .add_yaml("apiVersion: switchboard.dev/v1\nkind: Agent\nmetadata: {name: x}\n", "x.yaml")
        .expect_err("version");
    assert!(e.to_string().contains("is not served"), "{e}");
    let e = c.add_yaml(&format!("{PERSONA}---{PERSONA}"), "dup.yaml").expect_err("duplicate");
    assert!(e.to_string().contains("Persona default/p is defined twice"), "{e}");
    c.add_yaml("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", "s.yaml").expect("other kinds are skipped");
    assert_eq!(c.skipped(), ["s.yaml: Secret (v1)"]);
    // ConfigMaps are kept (an Agent's knowledge may read them), once each.
    c.add_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n", "cm.yaml")
        .expect("a ConfigMap");
    let e = c.add_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n", "cm2.yaml").expect_err("twice");
    assert!(e.to_string().contains("ConfigMap default/cm is defined twice"), "{e}");
    let e = c
        .add_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\ndata: {a: [1]}\n", "n.yaml")
        .expect_err("not text");
    assert!(e.to_string().contains("data must map keys to strings"), "{e}");
}

#[test]
fn the_banking_examples_resolve() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let c = Catalog::load_paths(&[dir]).expect("examples load");
    let mut modes = Vec::new();
    let mut voices = std::collections::BTreeSet::new();
    for agent in c.agents() {
        let spec = c.resolve_agent(agent).unwrap_or_else(|p| panic!("{p:?}"));
        // Every agent is valid as it ships: a voice or hybrid one's Persona voice is one its
        // Nova Sonic model has (banking amy, disputes olivia).
        assert!(c.validate_agent(agent).is_empty(), "{}: {:?}", spec.agent.name, c.validate_agent(agent));
        modes.push((spec.agent.name.clone(), spec.mode));
        voices.insert(spec.persona.spec.voice.clone());
        let tools: Vec<&str> = spec.handoffs.iter().map(|h| h.tool.as_str()).collect();
        match spec.agent.name.as_str() {
            "triage" => {
                assert_eq!(tools, ["transfer_to_idv", "transfer_to_banking"]);
                assert!(spec.app_context.identity, "the front desk takes the app's signed-in customer");
            }
            "idv" => {
                assert_eq!(tools, ["transfer_to_banking", "transfer_to_disputes"]);
                assert_eq!(spec.tools[0].name, "perform_idv_check");
                assert_eq!(spec.tools[0].remember.as_ref().map(|r| r.key.as_str()), Some("verifiedUser"));
                assert!(spec.tools[0].identity_provider, "idv's check is the identity provider");
            }
            _ => {
                assert!(tools.is_empty());
                for tool in &spec.tools {
                    assert_eq!(tool.required_memory(), ["verifiedUser"], "{}", tool.name);
                    if tool.name == "save_preferences" || tool.name == "show_card" {
                        // The caller's own preferences, which the gateway keeps by the verified
                        // caller, and the card banking shows them: no account to bind.
                        assert!(tool.bind.is_empty(), "{:?}", tool.bind);
                    } else {
                        assert_eq!(tool.bind["accountNumber"], "verifiedUser.accountNumber", "{}", tool.name);
                    }
                }
            }
        }
    }
    assert_eq!(
        modes,
        [
            ("banking".to_owned(), Mode::Hybrid),
            ("disputes".to_owned(), Mode::Hybrid),
            ("idv".to_owned(), Mode::Voice),
            ("triage".to_owned(), Mode::Hybrid)
        ]
    );
    assert_eq!(voices.len(), 4, "every persona has its own voice: {voices:?}");
}

#[test]
fn a_voice_agent_needs_a_voice_its_sonic_model_has() {
    let voice = |mode: &str, model: &str, voice: &str| {
        let agent = AGENT.replace("mode: text", &format!("mode: {mode}\n  model: {{ voiceModelId: \"{model}\" }}"));
        let persona = PERSONA.replace("  displayName: Pat", &format!("  displayName: Pat\n  voice: {voice}"));
        problems(&[&persona, WORKFLOW, &agent])
    };
    assert!(voice("voice", "amazon.nova-2-sonic-v1:0", "olivia").is_empty());
    assert!(voice("hybrid", "amazon.nova-2-5-sonic", "kiara").is_empty());
    assert!(voice("voice", "us.amazon.nova-2-sonic-v1:0", "carolina").is_empty(), "an inference profile");
    assert!(voice("voice", "arn:aws:bedrock:us-east-1:123456789012:custom-model/x", "robot").is_empty(), "unknown");
    assert!(voice("text", "amazon.nova-sonic-v1:0", "nobody").is_empty(), "text agents speak no voice");

    let wrong = voice("voice", "amazon.nova-2-5-sonic", "greta");
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert_eq!((wrong[0].reason, wrong[0].field.as_str()), (Reason::InvalidField, "spec.personaRef"));
    assert!(wrong[0].message.contains("no voice \"greta\"") && wrong[0].message.contains("tina"), "{wrong:?}");

    let retired = voice("voice", "amazon.nova-sonic-v1:0", "matthew");
    assert_eq!(retired.len(), 1, "{retired:?}");
    assert_eq!(retired[0].field, "spec.model.voiceModelId");
    assert!(retired[0].message.contains("end of life on 2026-09-14"), "{retired:?}");
}

#[test]
fn credentials_go_in_secret_headers_not_plain_headers() {
    let plain = AGENT.replace(
        r#"http: { url: "http://tools:8080/lookup" }"#,
        r#"http: { url: "http://tools:8080/lookup", headers: { Authorization: "Bearer abc", X-Tenant: bank } }"#,
    );
    let found = problems(&[PERSONA, WORKFLOW, &plain]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].field, "spec.tools[0].http.headers.Authorization");
    assert!(found[0].message.contains("secretHeaders"), "{}", found[0].message);

    let secret = AGENT.replace(
        r#"http: { url: "http://tools:8080/lookup" }"#,
        r#"http: { url: "http://tools:8080/lookup", headers: { X-Tenant: bank }, secretHeaders: [{ name: Authorization, secretKeyRef: { name: crm, key: token }, prefix: "Bearer " }] }"#,
    );
    assert!(problems(&[PERSONA, WORKFLOW, &secret]).is_empty());

    let twice = AGENT.replace(
        r#"http: { url: "http://tools:8080/lookup" }"#,
        r#"mcp: { url: "http://tools:8080/mcp", headers: { x-api-version: "2" }, secretHeaders: [{ name: X-Api-Version, secretKeyRef: { name: crm, key: v } }] }"#,
    );
    let found = problems(&[PERSONA, WORKFLOW, &twice]);
    assert!(found.iter().any(|p| p.reason == Reason::DuplicateName && p.field == "spec.tools[0].mcp"), "{found:?}");
}

#[test]
fn phone_numbers_are_e164_on_load_and_one_agents_each_in_a_folder() {
    let voice = AGENT.replace("mode: text", "mode: voice");
    let claiming = |name: &str, number: &str| {
        format!(
            "{}  telephony: {{ numbers: [\"{number}\"] }}\n",
            voice.replace("metadata: { name: a }", &format!("metadata: {{ name: {name} }}"))
        )
    };
    let e = Catalog::new().add_yaml(&claiming("a", "020 7946 0000"), "a.yaml").expect_err("not E.164").to_string();
    assert!(e.contains("spec.telephony.numbers") && e.contains("does not match"), "{e}");
    let c = common::catalog(&[PERSONA, WORKFLOW, &claiming("a", "+442079460000"), &claiming("b", "+442079460000")]);
    let by_name = |n: &str| c.agents().find(|a| a.metadata.name.as_deref() == Some(n)).expect("agent");
    assert!(c.validate_agent(by_name("a")).is_empty(), "{:?}", c.validate_agent(by_name("a")));
    let taken = c.validate_agent(by_name("b"));
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!((taken[0].reason, taken[0].field.as_str()), (Reason::DuplicateName, "spec.telephony.numbers"));
    assert!(taken[0].message.contains("+442079460000 is claimed by Agent default/a"), "{}", taken[0].message);
    let spec = c.resolve_agent(by_name("a")).expect("resolves");
    assert_eq!(
        spec.telephony.numbers,
        ["+442079460000"],
        "the numbers reach the RuntimeSpec (local mode routes with them)"
    );
}

#[test]
fn a_text_reply_in_an_outage_is_for_agents_that_speak() {
    let with = |mode: &str, fallback: &str| {
        let agent = AGENT.replace("mode: text", &format!("mode: {mode}\n  outage: {{ fallback: {fallback} }}"));
        problems(&[PERSONA, WORKFLOW, &agent])
    };
    assert!(with("voice", "{ message: Sorry, text: true }").is_empty());
    assert!(with("hybrid", "{ message: Sorry, text: true }").is_empty());
    let text = with("text", "{ message: Sorry, text: true }");
    assert_eq!(text.len(), 1, "{text:?}");
    assert_eq!((text[0].reason, text[0].field.as_str()), (Reason::InvalidField, "spec.outage.fallback.text"));
    assert!(text[0].message.contains("remove text: true"), "{text:?}");
    let alone = with("voice", "{ text: true }");
    assert_eq!(alone.len(), 1, "{alone:?}");
    assert_eq!(alone[0].field, "spec.outage.fallback");
}
