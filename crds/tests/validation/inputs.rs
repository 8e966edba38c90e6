//! What a tool's inputs may take from elsewhere, checked by the validator: bound inputs,
//! keypad-collected inputs, what tools remember into identity keys, and the app's context.

use switchboard_crds::Catalog;
use switchboard_crds::validate::{Problem, Reason};

use super::common::{catalog, problems};
use super::{AGENT, PERSONA, WORKFLOW, reasons};

/// AGENT with `extra` (indented lines) added to its tool `lookup`.
fn with_tool_fields(extra: &str) -> String {
    let http = r#"      http: { url: "http://tools:8080/lookup" }"#;
    AGENT.replace(http, &format!("{http}\n{extra}"))
}

/// The problems the pure validator finds in `agent`, read without the CRD schema (as a
/// RuntimeSpec or an object from a server that checked less would be).
fn unchecked_problems(agent: &str) -> Vec<Problem> {
    let agent: switchboard_crds::Agent = serde_yaml::from_str(agent).expect("an Agent");
    let c = catalog(&[PERSONA, WORKFLOW]);
    let persona = c.personas().next().map(|p| &p.spec);
    let workflow = c.workflows().next().map(|w| &w.spec);
    let refs = switchboard_crds::validate::References {
        persona,
        workflow,
        agent_exists: &|_| true,
        config_maps: &Default::default(),
    };
    switchboard_crds::validate::validate_agent("a", "default", &agent.spec, refs)
}

#[test]
fn a_bound_input_must_be_a_property_with_a_readable_memory_path() {
    let bound = with_tool_fields("      bind: { q: verifiedUser.accountNumber }\n      requires: [verifiedUser]");
    let c = catalog(&[PERSONA, WORKFLOW, &bound]);
    let spec = c.resolve_agent(c.agent("default", "a").expect("agent")).expect("valid");
    assert_eq!(spec.tools[0].bind["q"], "verifiedUser.accountNumber");
    assert_eq!(spec.tools[0].required_memory(), ["verifiedUser"]);
    assert_eq!(spec.identity_keys, ["verifiedUser"], "the default identity key reaches the RuntimeSpec");

    let unknown =
        problems(&[PERSONA, WORKFLOW, &with_tool_fields("      bind: { account: verifiedUser.accountNumber }")]);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!((unknown[0].reason, unknown[0].field.as_str()), (Reason::InvalidField, "spec.tools[0].bind.account"));
    assert!(unknown[0].message.contains("\"account\", which is not a property of its inputSchema"), "{unknown:?}");

    let malformed = with_tool_fields("      bind: { q: \"verifiedUser..accountNumber\" }");
    let e = Catalog::new().add_yaml(&malformed, "a.yaml").expect_err("the CRD schema refuses the path").to_string();
    assert!(e.contains("spec.tools.0.bind.q") && e.contains("does not match"), "{e}");
    let found = unchecked_problems(&malformed);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].field, "spec.tools[0].bind.q");
    assert!(found[0].message.contains("is not a path segment"), "{}", found[0].message);
    let found = unchecked_problems(&with_tool_fields("      bind: { q: \"1st.x\" }\n      requires: [\"no good\"]"));
    let fields: Vec<&str> = found.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["spec.tools[0].bind.q", "spec.tools[0].requires[0]"], "{found:?}");
    assert!(found[0].message.contains("\"1st\" is not a memory key"), "{}", found[0].message);
}

#[test]
fn a_keypad_input_is_a_string_property_of_an_uncached_unbound_tool_with_bounds_it_can_meet() {
    let keyed = with_tool_fields("      keypad: { input: q, minDigits: 4, maxDigits: 8 }");
    let c = catalog(&[PERSONA, WORKFLOW, &keyed]);
    let spec = c.resolve_agent(c.agent("default", "a").expect("agent")).expect("valid");
    let keypad = spec.tools[0].keypad.as_ref().expect("the keypad reaches the RuntimeSpec");
    assert_eq!(
        (keypad.min_digits, keypad.max_digits, keypad.timeout_seconds, keypad.inter_digit_timeout_seconds),
        (4, 8, 30, 5)
    );

    let fields = |found: Vec<Problem>| found.into_iter().map(|p| (p.field, p.message)).collect::<Vec<_>>();
    let unknown = fields(unchecked_problems(&with_tool_fields("      keypad: { input: pin }")));
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!(unknown[0].0, "spec.tools[0].keypad.input");
    assert!(
        unknown[0].1.contains("not a property of its inputSchema") && unknown[0].1.contains("type: string"),
        "{unknown:?}"
    );
    let number = with_tool_fields("      keypad: { input: q }").replace("q: { type: string }", "q: { type: integer }");
    let found = fields(unchecked_problems(&number));
    assert!(found[0].1.contains("a leading zero counts"), "{found:?}");
    let all_wrong = with_tool_fields(
        "      keypad: { input: q, minDigits: 9, maxDigits: 4 }
      cacheTtlSeconds: 60
      bind: { q: verifiedUser.q }",
    );
    let found: Vec<String> = fields(unchecked_problems(&all_wrong)).into_iter().map(|(f, _)| f).collect();
    for field in ["spec.tools[0].keypad.input", "spec.tools[0].cacheTtlSeconds", "spec.tools[0].keypad.minDigits"] {
        assert!(found.iter().any(|f| f == field), "{field}: {found:?}");
    }
}

#[test]
fn only_identity_providers_remember_into_identity_keys() {
    let remember = "      remember: { key: verifiedUser, value: /user, when: /verified }";
    let found = problems(&[PERSONA, WORKFLOW, &with_tool_fields(remember)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].reason, found[0].field.as_str()), (Reason::InvalidField, "spec.tools[0].remember.key"));
    assert!(found[0].message.contains("identityProvider: true"), "{}", found[0].message);
    let provider = with_tool_fields(&format!("{remember}\n      identityProvider: true"));
    assert!(problems(&[PERSONA, WORKFLOW, &provider]).is_empty());

    // The Agent names its own identity keys: then those are guarded, and verifiedUser is not.
    let own = |agent: &str| agent.replace("  mode: text", "  mode: text\n  identityKeys: [caller]");
    assert!(problems(&[PERSONA, WORKFLOW, &own(&with_tool_fields(remember))]).is_empty());
    let caller = with_tool_fields("      remember: { key: caller }");
    assert_eq!(problems(&[PERSONA, WORKFLOW, &own(&caller)])[0].field, "spec.tools[0].remember.key");
    let twice = AGENT.replace("  mode: text", "  mode: text\n  identityKeys: [caller, caller]");
    assert_eq!(reasons(&[PERSONA, WORKFLOW, &twice]), [Reason::DuplicateName]);
}

#[test]
fn an_agent_takes_from_the_app_only_keys_that_are_not_identity_keys_and_says_how_to_take_the_caller() {
    let with = |app: &str| AGENT.replace("  mode: text", &format!("  mode: text\n  appContext: {app}"));
    assert!(problems(&[PERSONA, WORKFLOW, &with("{ identity: true, memory: [page, orderId] }")]).is_empty());
    // The CRD schema refuses an identity key under memory (CEL); the operator's check says
    // the same with what to do, for specs that bypass the schema.
    let identity = with("{ memory: [page, verifiedUser] }");
    let found = unchecked_problems(&identity);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].reason, found[0].field.as_str()), (Reason::InvalidField, "spec.appContext.memory[1]"));
    assert!(found[0].message.contains("spec.appContext.identity: true"), "{}", found[0].message);
    let found = unchecked_problems(&with("{ memory: [page, page, \"no good\"] }"));
    let fields: Vec<&str> = found.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["spec.appContext.memory[2]", "spec.appContext.memory"], "{found:?}");
    let e = Catalog::new().add_yaml(&with("{ memory: [\"no good\"] }"), "a.yaml").expect_err("schema").to_string();
    assert!(e.contains("spec.appContext.memory") && e.contains("does not match"), "{e}");
}
