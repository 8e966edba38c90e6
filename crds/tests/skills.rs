//! Skills, knowledge, identity fields and tool policy (issue 28): validation with messages
//! a person can act on, and resolution into the RuntimeSpec the pods receive.

mod common;

use common::{catalog, problems};
use switchboard_crds::validate::Reason;
use switchboard_crds::{Catalog, RuntimeSpec};

const PERSONA: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: { name: p }
spec:
  displayName: Pat
  systemPrompt: "You are {name}, {role}: {description}. {skills} {examples} {dataContext}"
"#;

const WORKFLOW: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: { name: w }
spec:
  entry: start
  nodes:
    - { id: start, kind: message, tools: ["crm_*", quote], denyTools: [crm_delete_*] }
"#;

const FEES: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: { name: fees }
data:
  fees.md: "International transfer: 15 GBP"
  limits.md: "Daily card limit: 500 GBP"
"#;

const AGENT: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: { name: a }
spec:
  mode: text
  role: Account specialist
  description: Helps with fees.
  avatar: https://example.com/a.png
  personaRef: { name: p }
  workflowRef: { name: w }
  toolPolicy: { deny: [crm_export*] }
  tools:
    - { name: crm_lookup, description: d, builtin: { kind: currentTime } }
    - { name: crm_delete_contact, description: d, builtin: { kind: currentTime } }
    - { name: quote, description: d, builtin: { kind: currentTime } }
  knowledge:
    dataContext: { text: "Branches open 9 to 5." }
    files: [{ name: fees }]
  skills:
    - name: fees
      description: Questions about fees and limits.
      instructions: Quote the schedule exactly.
      tools: [quote]
      examples: [{ user: What does a wire cost?, assistant: Uses the fees skill, then quotes it. }]
      dataContext: { configMapRef: { name: fees, key: fees.md } }
      delegatesTo: [limits]
    - name: limits
      description: Card and transfer limits.
      dataContext: { configMapRef: { name: fees } }
"#;

fn resolved(docs: &[&str]) -> RuntimeSpec {
    let c = catalog(docs);
    let agent = c.agents().next().expect("an agent");
    c.resolve_agent(agent).unwrap_or_else(|p| panic!("{p:?}"))
}

fn edit(from: &str, to: &str) -> String {
    assert!(AGENT.contains(from), "{from}");
    AGENT.replace(from, to)
}

#[test]
fn skills_and_knowledge_resolve_with_their_config_maps_read() {
    let spec = resolved(&[PERSONA, WORKFLOW, FEES, AGENT]);
    assert_eq!(spec.profile.role.as_deref(), Some("Account specialist"));
    assert_eq!(spec.profile.avatar.as_deref(), Some("https://example.com/a.png"));
    assert_eq!(spec.knowledge.data_context, "Branches open 9 to 5.");
    let files: Vec<(&str, &str)> = spec.knowledge.files.iter().map(|f| (f.name.as_str(), f.text.as_str())).collect();
    assert_eq!(files, [("fees.md", "International transfer: 15 GBP"), ("limits.md", "Daily card limit: 500 GBP")]);
    let text = |i: usize| spec.skills[i].data_context.as_ref().and_then(|c| c.text.clone()).unwrap_or_default();
    // One key: the text as it is; a whole ConfigMap: every key under its name.
    assert_eq!(text(0), "International transfer: 15 GBP");
    assert_eq!(text(1), "## fees.md\nInternational transfer: 15 GBP\n\n## limits.md\nDaily card limit: 500 GBP");
    assert!(spec.skills.iter().all(|s| s.data_context.as_ref().is_some_and(|c| c.config_map_ref.is_none())));
    assert_eq!(spec.tool_policy.deny, ["crm_export*"]);
    // What the pods receive reads back the same.
    assert_eq!(RuntimeSpec::parse(&spec.to_canonical_json()).expect("parses"), spec);
}

#[test]
fn an_agent_without_the_new_fields_resolves_to_the_same_json_as_before() {
    let plain = format!(
        "{}  tools:\n    - {{ name: crm_lookup, description: d, builtin: {{ kind: currentTime }} }}\n    - {{ name: quote, description: d, builtin: {{ kind: currentTime }} }}\n",
        AGENT.split("  role:").next().expect("head").to_owned()
            + "  personaRef: { name: p }\n  workflowRef: { name: w }\n"
    );
    let json = resolved(&[PERSONA, WORKFLOW, &plain]).to_canonical_json();
    for key in ["profile", "skills", "knowledge", "toolPolicy"] {
        assert!(!json.contains(&format!("\"{key}\"")), "{key} in {json}");
    }
}

#[test]
fn a_missing_config_map_or_key_says_what_to_create() {
    let found = problems(&[PERSONA, WORKFLOW, AGENT]);
    assert!(found.iter().all(|p| p.reason == Reason::ConfigMapNotFound), "{found:?}");
    let fields: Vec<&str> = found.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.skills[0].dataContext.configMapRef",
            "spec.skills[1].dataContext.configMapRef",
            "spec.knowledge.files[0]"
        ]
    );
    assert!(found[0].message.contains("ConfigMap \"fees\" does not exist in namespace \"default\""), "{found:?}");
    assert!(found[0].message.contains("kubectl create configmap fees"), "{found:?}");

    let wrong_key = edit("key: fees.md", "key: fee.md");
    let found = problems(&[PERSONA, WORKFLOW, FEES, &wrong_key]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].field, "spec.skills[0].dataContext.configMapRef.key");
    assert!(found[0].message.contains("has no key \"fee.md\"") && found[0].message.contains("fees.md, limits.md"));
}

#[test]
fn knowledge_over_its_limit_is_refused_with_the_sizes() {
    let tight = edit("    files: [{ name: fees }]\n", "    files: [{ name: fees }]\n    maxBytes: 100\n");
    let found = problems(&[PERSONA, WORKFLOW, FEES, &tight]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].reason, found[0].field.as_str()), (Reason::KnowledgeTooLarge, "spec.knowledge.maxBytes"));
    assert!(
        found[0].message.contains("skill fees 30")
            && found[0].message.contains("more than spec.knowledge.maxBytes 100")
    );
}

#[test]
fn skill_rules() {
    let cases = [
        (edit("tools: [quote]", "tools: [quotes]"), Reason::UnknownTool, "spec.skills[0].tools[0]"),
        (edit("delegatesTo: [limits]", "delegatesTo: [limit]"), Reason::UnknownSkill, "spec.skills[0].delegatesTo[0]"),
        (edit("delegatesTo: [limits]", "delegatesTo: [fees]"), Reason::UnknownSkill, "spec.skills[0].delegatesTo[0]"),
        (edit("- name: limits", "- name: fees"), Reason::DuplicateName, "spec.skills"),
        (edit("- { name: quote,", "- { name: use_skill,"), Reason::InvalidField, "spec.tools[2].name"),
        (
            edit(
                "dataContext: { text: \"Branches open 9 to 5.\" }",
                "dataContext: { text: x, configMapRef: { name: fees } }",
            ),
            Reason::InvalidField,
            "spec.knowledge.dataContext",
        ),
    ];
    for (agent, reason, field) in cases {
        let found = problems(&[PERSONA, WORKFLOW, FEES, &agent]);
        assert!(found.iter().any(|p| p.reason == reason && p.field == field), "{field}: {found:?}");
    }
}

#[test]
fn tool_patterns_must_be_well_formed_and_match_a_tool() {
    let none = WORKFLOW.replace("\"crm_*\"", "\"billing_*\"");
    let found = problems(&[PERSONA, &none, FEES, AGENT]);
    assert!(found.iter().any(|p| p.reason == Reason::UnknownTool && p.message.contains("\"billing_*\"")), "{found:?}");
    // The schema refuses a malformed pattern on load; the pure validator (for servers that
    // drop such checks) refuses it too.
    let bad = edit("deny: [crm_export*]", "deny: [\"crm.*\"]");
    let e = Catalog::new().add_yaml(&bad, "a.yaml").expect_err("schema").to_string();
    assert!(e.contains("spec.toolPolicy.deny.0"), "{e}");
    let doc: serde_yaml::Value = serde_yaml::from_str(&bad).expect("yaml");
    let spec: switchboard_crds::AgentSpec = serde_yaml::from_value(doc["spec"].clone()).expect("spec");
    let persona = serde_yaml::from_str::<serde_yaml::Value>(PERSONA).expect("persona")["spec"].clone();
    let persona: switchboard_crds::PersonaSpec = serde_yaml::from_value(persona).expect("persona spec");
    let found = switchboard_crds::validate::validate_agent(
        "a",
        "default",
        &spec,
        switchboard_crds::validate::References::new(Some(&persona), None, &|_| true),
    );
    assert!(found.iter().any(|p| p.field == "spec.toolPolicy.deny[0]"), "{found:?}");
}

#[test]
fn the_new_placeholders_are_known_to_the_persona_check() {
    assert!(problems(&[PERSONA, WORKFLOW, FEES, AGENT]).is_empty());
    let typo = PERSONA.replace("{dataContext}", "{datacontext}");
    let found = problems(&[&typo, WORKFLOW, FEES, AGENT]);
    assert!(
        found.iter().any(|p| p.reason == Reason::PersonaInvalid && p.message.contains("{dataContext}")),
        "{found:?}"
    );
}
