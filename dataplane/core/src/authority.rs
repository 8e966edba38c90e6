//! Authority at the tool: what a tool acts on is decided from session memory, never by the
//! model. A tool is offered and run only while the memory keys it requires (its `requires`
//! and the keys its `bind` reads) are set; its bound inputs are left out of the schema the
//! model sees and filled from memory, and a call in which the model supplies one is
//! refused; and only the Agent's identity providers may write its identity keys. Pure.

use switchboard_crds::agent::{BuiltinKind, GATEWAY_KEYS, MemoryPath, ToolSpec};

use crate::memory::Memory;
use crate::tools::{FailureKind, ToolFailure};

/// The input schema the model sees for `tool`: its own, without the bound fields and the
/// keypad input (removed from `properties` and `required`; see [`without`]).
pub fn model_schema(tool: &ToolSpec) -> serde_json::Value {
    if tool.builtin.as_ref().is_some_and(|b| b.kind == BuiltinKind::ShowCard) {
        return crate::protocol::card_schema();
    }
    let schema = without(tool.input_schema.clone(), |name| tool.bind.contains_key(name));
    without_keypad(tool, schema)
}

/// `schema` without `tool`'s keypad input (the caller types it: the model never gives it).
pub fn without_keypad(tool: &ToolSpec, schema: serde_json::Value) -> serde_json::Value {
    match &tool.keypad {
        Some(keypad) => without(schema, |name| name == keypad.input),
        None => schema,
    }
}

/// `schema` without the properties `gone` names (removed from `properties` and
/// `required`; a `required` left empty is dropped, as older JSON Schema drafts want it
/// non-empty).
fn without(mut schema: serde_json::Value, gone: impl Fn(&str) -> bool) -> serde_json::Value {
    let Some(top) = schema.as_object_mut() else { return schema };
    if let Some(properties) = top.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        properties.retain(|name, _| !gone(name));
    }
    if let Some(required) = top.get_mut("required").and_then(serde_json::Value::as_array_mut) {
        required.retain(|name| name.as_str().is_none_or(|n| !gone(n)));
        if required.is_empty() {
            top.remove("required");
        }
    }
    schema
}

/// The first memory key `tool` requires that `memory` does not hold.
pub fn missing_requirement<'t>(tool: &'t ToolSpec, memory: &Memory) -> Option<&'t str> {
    tool.required_memory().into_iter().find(|key| memory.get(key).is_none_or(serde_json::Value::is_null))
}

/// The input `tool` runs with for the model's `input`: refused while a requirement is
/// unmet or when the model gave a bound field, else `input` with the bound fields filled
/// from `memory`. An input that is not an object is returned as it is, for the schema
/// check to refuse.
pub fn authorize(
    tool: &ToolSpec,
    input: &serde_json::Value,
    memory: &Memory,
) -> Result<serde_json::Value, ToolFailure> {
    let name = &tool.name;
    if let Some(key) = missing_requirement(tool, memory) {
        return Err(ToolFailure::new(
            FailureKind::RequirementUnmet,
            format!(
                "{name} runs only once this session knows {key} (for example, once the caller's identity is verified), and it does not yet; do not call {name} now"
            ),
        ));
    }
    if let Some(keypad) = &tool.keypad
        && input.get(&keypad.input).is_some()
    {
        return Err(ToolFailure::new(
            FailureKind::BoundInput,
            format!(
                "{} must not be given: the caller types it on the phone's keypad after you call {name}; ask them to type it, then call {name} again without it",
                keypad.input
            ),
        ));
    }
    if tool.bind.is_empty() {
        return Ok(input.clone());
    }
    let mut fields = match input {
        serde_json::Value::Object(fields) => fields.clone(),
        serde_json::Value::Null => serde_json::Map::new(),
        _ => return Ok(input.clone()),
    };
    let given: Vec<&str> = tool.bind.keys().map(String::as_str).filter(|f| fields.contains_key(*f)).collect();
    if !given.is_empty() {
        let sources: Vec<String> = given.iter().map(|f| format!("{f} from {}", tool.bind[*f])).collect();
        return Err(ToolFailure::new(
            FailureKind::BoundInput,
            format!(
                "{} must not be given: the session fills it in ({}); call {name} again without it",
                given.join(" and "),
                sources.join(", ")
            ),
        ));
    }
    for (field, source) in &tool.bind {
        let path = MemoryPath::parse(source).map_err(|e| {
            ToolFailure::new(FailureKind::Unsupported, format!("{name}'s binding of {field} cannot be used: {e}"))
        })?;
        let value = memory.get(path.key).and_then(|v| path.lookup(v)).ok_or_else(|| {
            ToolFailure::new(
                FailureKind::RequirementUnmet,
                format!("{name} needs {path}, which this session does not hold; do not call {name} now"),
            )
        })?;
        fields.insert(field.clone(), value.clone());
    }
    Ok(serde_json::Value::Object(fields))
}

/// Whether `tool` may store its result under memory `key`: any tool may, but an identity
/// key (one of `identity_keys`) only from an identity provider.
pub fn may_remember(tool: &ToolSpec, key: &str, identity_keys: &[String]) -> bool {
    if GATEWAY_KEYS.contains(&key) {
        return false;
    }
    tool.identity_provider || !identity_keys.iter().any(|k| k == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn balance_tool() -> ToolSpec {
        serde_json::from_value(json!({
            "name": "check_balance", "description": "d", "http": { "url": "http://tools/balance" },
            "inputSchema": {
                "type": "object",
                "properties": { "accountNumber": { "type": "string" }, "currency": { "type": "string" } },
                "required": ["accountNumber", "currency"],
                "additionalProperties": false
            },
            "bind": { "accountNumber": "verifiedUser.accountNumber" }
        }))
        .expect("a tool")
    }

    fn verified(account: &str) -> Memory {
        Memory::from_map(BTreeMap::from([("verifiedUser".to_owned(), json!({ "accountNumber": account }))]))
    }

    #[test]
    fn bound_fields_are_left_out_of_the_schema_the_model_sees() {
        let tool = balance_tool();
        let schema = model_schema(&tool);
        assert_eq!(schema["properties"], json!({ "currency": { "type": "string" } }));
        assert_eq!(schema["required"], json!(["currency"]));
        assert_eq!(schema["additionalProperties"], json!(false), "the rest of the schema is kept");
        let unbound = ToolSpec { bind: BTreeMap::new(), ..tool.clone() };
        assert_eq!(model_schema(&unbound), tool.input_schema);
        let mut only_bound = tool.clone();
        only_bound.input_schema["required"] = json!(["accountNumber"]);
        assert!(model_schema(&only_bound).get("required").is_none(), "an empty required is dropped");
    }

    #[test]
    fn bound_fields_are_filled_from_memory() {
        let filled = authorize(&balance_tool(), &json!({ "currency": "GBP" }), &verified("12345678"));
        assert_eq!(filled, Ok(json!({ "accountNumber": "12345678", "currency": "GBP" })));
        let from_null = authorize(&balance_tool(), &serde_json::Value::Null, &verified("12345678"));
        assert_eq!(from_null, Ok(json!({ "accountNumber": "12345678" })));
        let not_an_object = authorize(&balance_tool(), &json!("12345678"), &verified("1"));
        assert_eq!(not_an_object, Ok(json!("12345678")), "left for the schema check to refuse");
    }

    #[test]
    fn a_bound_field_the_model_gives_is_refused_even_when_it_matches() {
        for account in ["87654321", "12345678"] {
            let input = json!({ "accountNumber": account, "currency": "GBP" });
            let failure = authorize(&balance_tool(), &input, &verified("12345678")).expect_err("refused");
            assert_eq!(failure.kind, FailureKind::BoundInput);
            assert!(failure.message.contains("accountNumber must not be given"), "{}", failure.message);
            assert!(failure.message.contains("verifiedUser.accountNumber"), "{}", failure.message);
        }
    }

    #[test]
    fn a_missing_requirement_or_memory_value_is_refused() {
        let unverified = authorize(&balance_tool(), &json!({}), &Memory::default()).expect_err("refused");
        assert_eq!(unverified.kind, FailureKind::RequirementUnmet);
        assert!(unverified.message.contains("knows verifiedUser"), "{}", unverified.message);
        let no_account = Memory::from_map(BTreeMap::from([("verifiedUser".to_owned(), json!({ "name": "Ada" }))]));
        let failure = authorize(&balance_tool(), &json!({}), &no_account).expect_err("refused");
        assert_eq!(failure.kind, FailureKind::RequirementUnmet);
        assert!(failure.message.contains("needs verifiedUser.accountNumber"), "{}", failure.message);

        let mut tool = balance_tool();
        tool.requires = vec!["consented".to_owned()];
        assert_eq!(missing_requirement(&tool, &verified("1")), Some("consented"));
        let null = Memory::from_map(BTreeMap::from([("consented".to_owned(), serde_json::Value::Null)]));
        assert_eq!(missing_requirement(&tool, &null), Some("consented"), "null is not set");
    }

    #[test]
    fn identity_keys_are_written_only_by_identity_providers() {
        let keys = vec!["verifiedUser".to_owned()];
        let mut tool = balance_tool();
        assert!(!may_remember(&tool, "verifiedUser", &keys));
        for key in [crate::phone::MEMORY_KEY, crate::outbound::MEMORY_KEY] {
            assert!(GATEWAY_KEYS.contains(&key), "{key} is one of the gateway's keys");
            assert!(!may_remember(&ToolSpec { identity_provider: true, ..tool.clone() }, key, &keys), "{key}");
        }
        assert!(may_remember(&tool, "intent", &keys));
        tool.identity_provider = true;
        assert!(may_remember(&tool, "verifiedUser", &keys));
    }
}
