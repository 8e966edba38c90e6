//! Checks of authority at the tool: a tool's `bind` names properties of its input schema
//! and readable memory paths, its `requires` names memory keys, and only identity providers
//! `remember` into the Agent's `identityKeys`.

use super::{Problem, Reason, duplicates};
use crate::agent::{AgentSpec, GATEWAY_KEYS, KeypadInput, MAX_KEY_LEN, MemoryPath, ToolSpec, is_memory_key};

/// Every problem with the identity keys and the tools' `bind`, `requires` and `remember`.
pub(super) fn check_authority(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    for (j, key) in spec.identity_keys.iter().enumerate() {
        if !is_memory_key(key) {
            problems.push(not_a_key(format!("spec.identityKeys[{j}]"), key));
        }
    }
    for dup in duplicates(spec.identity_keys.iter().map(String::as_str)) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.identityKeys",
            format!("identity key {dup:?} is listed more than once"),
        ));
    }
    check_app_context(spec, problems);
    for (i, tool) in spec.tools.iter().enumerate() {
        let field = format!("spec.tools[{i}]");
        check_bindings(tool, &field, problems);
        if let Some(keypad) = &tool.keypad {
            check_keypad(tool, keypad, &field, problems);
        }
        for (j, key) in tool.requires.iter().enumerate() {
            if !is_memory_key(key) {
                problems.push(not_a_key(format!("{field}.requires[{j}]"), key));
            }
        }
        if let Some(memory) = &tool.remember
            && GATEWAY_KEYS.contains(&memory.key.as_str())
        {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.remember.key"),
                format!(
                    "tool {:?} remembers {:?}, which only the gateway sets (the phone call a SIP edge vouches for); remember this result under another key",
                    tool.name, memory.key
                ),
            ));
        }
        if let Some(memory) = &tool.remember
            && !tool.identity_provider
            && spec.identity_keys.contains(&memory.key)
        {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.remember.key"),
                format!(
                    "tool {:?} remembers {:?}, an identity key (spec.identityKeys), but is not an identity provider: only a tool with identityProvider: true may set who the caller is; mark the identity-checking tool identityProvider: true, or remember this result under another key",
                    tool.name, memory.key
                ),
            ));
        }
    }
}

/// A keypad input: a string property of the tool's input schema, of an HTTP or MCP tool
/// that is not cached, not bound, with bounds that can be met.
fn check_keypad(tool: &ToolSpec, keypad: &KeypadInput, field: &str, problems: &mut Vec<Problem>) {
    let (name, input) = (&tool.name, &keypad.input);
    let mut problem = |at: &str, message: String| {
        problems.push(Problem::new(Reason::InvalidField, format!("{field}.{at}"), message));
    };
    let property = tool.input_schema.get("properties").and_then(|p| p.get(input));
    match property.map(|p| p.get("type")) {
        None => problem(
            "keypad.input",
            format!(
                "tool {name:?} collects {input:?} by keypad, which is not a property of its inputSchema; add {input:?} under inputSchema.properties with type: string"
            ),
        ),
        Some(Some(kind)) if kind != "string" => problem(
            "keypad.input",
            format!(
                "tool {name:?} collects {input:?} by keypad, but its inputSchema gives it type {kind}; keys are text (a leading zero counts): make it type: string"
            ),
        ),
        Some(_) => {}
    }
    if tool.bind.contains_key(input) {
        problem(
            "keypad.input",
            format!("tool {name:?} both binds {input:?} and collects it by keypad; remove one of the two"),
        );
    }
    if tool.http.is_none() && tool.mcp.is_none() {
        problem("keypad", format!("tool {name:?} is not an http or mcp tool: only those take keypad inputs"));
    }
    if tool.cache_ttl_seconds > 0 {
        problem(
            "cacheTtlSeconds",
            format!("tool {name:?} collects {input:?} by keypad and cannot be cached: set cacheTtlSeconds to 0"),
        );
    }
    let bounds = [
        ("keypad.minDigits", keypad.min_digits, 1, 32),
        ("keypad.maxDigits", keypad.max_digits, 1, 32),
        ("keypad.timeoutSeconds", keypad.timeout_seconds, 3, 300),
        ("keypad.interDigitTimeoutSeconds", keypad.inter_digit_timeout_seconds, 1, 60),
    ];
    for (at, value, min, max) in bounds {
        if !(min..=max).contains(&value) {
            problem(at, format!("tool {name:?}: {at} is {value}; it must be between {min} and {max}"));
        }
    }
    if keypad.min_digits > keypad.max_digits {
        problem(
            "keypad.minDigits",
            format!(
                "tool {name:?}: keypad.minDigits ({}) is more than keypad.maxDigits ({}), so no entry could be taken; lower minDigits or raise maxDigits",
                keypad.min_digits, keypad.max_digits
            ),
        );
    }
}

/// `spec.appContext.memory`: memory keys, each once, none an identity key (the caller from
/// the app is taken with `spec.appContext.identity`).
fn check_app_context(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let keys = &spec.app_context.memory;
    if keys.len() > crate::agent::MAX_APP_MEMORY_KEYS {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.appContext.memory",
            format!(
                "{} keys, more than {}: take fewer keys from the app's backend (put related values under one key)",
                keys.len(),
                crate::agent::MAX_APP_MEMORY_KEYS
            ),
        ));
    }
    for (j, key) in keys.iter().enumerate() {
        if !is_memory_key(key) {
            problems.push(not_a_key(format!("spec.appContext.memory[{j}]"), key));
        } else if spec.identity_keys.contains(key) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.appContext.memory[{j}]"),
                format!(
                    "{key:?} is an identity key (spec.identityKeys): the logged-in customer from the app is taken with spec.appContext.identity: true, not listed under memory; remove it here, and set identity: true if this Agent trusts the app's sign-in"
                ),
            ));
        }
    }
    for dup in duplicates(keys.iter().map(String::as_str)) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.appContext.memory",
            format!("memory key {dup:?} is listed more than once"),
        ));
    }
}

fn check_bindings(tool: &ToolSpec, field: &str, problems: &mut Vec<Problem>) {
    let properties = tool.input_schema.get("properties").and_then(serde_json::Value::as_object);
    for (input, source) in &tool.bind {
        let at = format!("{field}.bind.{input}");
        if !properties.is_some_and(|p| p.contains_key(input)) {
            problems.push(Problem::new(
                Reason::InvalidField,
                at.clone(),
                format!(
                    "tool {:?} binds {input:?}, which is not a property of its inputSchema; add {input:?} under inputSchema.properties (with the type the tool expects) or remove the binding",
                    tool.name
                ),
            ));
        }
        if let Err(e) = MemoryPath::parse(source) {
            problems.push(Problem::new(
                Reason::InvalidField,
                at,
                format!("tool {:?} binds {input:?} to {source:?}: {e}", tool.name),
            ));
        }
    }
}

fn not_a_key(field: String, key: &str) -> Problem {
    Problem::new(
        Reason::InvalidField,
        field,
        format!("{key:?} is not a memory key (a letter, then letters, digits or '_', at most {MAX_KEY_LEN})"),
    )
}
