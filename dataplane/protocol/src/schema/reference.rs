//! The protocol reference for people, as Markdown (headings from level 3, to sit under a
//! page's section), generated from the published schema: each
//! client and server message with its description and a table of its fields (type, whether
//! it is always there, description), then the types they use and the values of each
//! enumeration and code catalogue. The `protocol-schema` binary writes it beside the schema
//! ([`REFERENCE_PATH`]) for the documentation book to include.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::REGENERATE;

/// Where the reference is written, relative to the repository root.
pub const REFERENCE_PATH: &str = "schema/protocol.md";

/// The reference of `schema` (the protocol's, [`super::schema`]).
pub fn reference(schema: &Value) -> String {
    let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "<!-- Generated from schema/protocol.schema.json by `{REGENERATE}`. Do not edit. -->\n");
    let _ = writeln!(
        out,
        "Protocol version **{}** (`{}`).\n",
        schema["x-protocol-version"].as_str().unwrap_or_default(),
        schema["$id"].as_str().unwrap_or_default()
    );
    for (title, def) in [("Client messages", "ClientMessage"), ("Server messages", "ServerMessage")] {
        let _ = writeln!(out, "### {title}\n\n{}\n", text(&defs[def]["description"]));
        for variant in defs[def]["oneOf"].as_array().into_iter().flatten() {
            message(&mut out, variant, &defs);
        }
    }
    let _ = writeln!(out, "### Types\n");
    for (name, def) in defs.iter().filter(|(name, _)| !name.ends_with("Message")) {
        let _ = writeln!(out, "#### {name}\n\n{}\n", text(&def["description"]));
        if let Some(values) = def["oneOf"].as_array().or(def["anyOf"].as_array()) {
            values_table(&mut out, values);
        } else {
            fields_table(&mut out, def);
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn message(out: &mut String, variant: &Value, defs: &Map<String, Value>) {
    let name = variant["properties"]["type"]["const"].as_str().unwrap_or_default();
    let _ = writeln!(out, "#### `{name}`\n\n{}\n", text(&variant["description"]));
    // A message that carries a type's fields (`session_start`, `session_update`) lists them.
    let included = variant["$ref"].as_str().and_then(|r| defs.get(ref_name(r)));
    let mut fields = variant.clone();
    if let (Some(included), Some(own)) = (included, fields.as_object_mut()) {
        let mut properties = included["properties"].as_object().cloned().unwrap_or_default();
        properties.extend(variant["properties"].as_object().cloned().unwrap_or_default());
        own.insert("properties".into(), Value::Object(properties));
        own.insert("additionalProperties".into(), included["additionalProperties"].clone());
    }
    fields_table(out, &fields);
}

fn fields_table(out: &mut String, def: &Value) {
    let Some(properties) = def["properties"].as_object() else { return };
    if properties.keys().all(|field| field == "type") {
        let _ = writeln!(out, "No fields besides `type`.\n");
        return;
    }
    let required: Vec<&str> = def["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let one_of: Vec<&str> = def["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|alternative| alternative["required"][0].as_str())
        .collect();
    let _ = writeln!(out, "| Field | Type | Always there | Description |\n|---|---|---|---|");
    for (field, property) in properties.iter().filter(|(field, _)| *field != "type") {
        let always = if required.contains(&field.as_str()) {
            "yes"
        } else if one_of.contains(&field.as_str()) {
            "one of these"
        } else {
            "no"
        };
        let _ = writeln!(out, "| `{field}` | {} | {always} | {} |", kind(property), cell(&property["description"]));
    }
    if def["additionalProperties"] == Value::Bool(true) {
        let _ = writeln!(out, "\nOther fields are allowed by the schema; a server refuses the ones it does not know.");
    }
    out.push('\n');
}

fn values_table(out: &mut String, values: &[Value]) {
    let _ = writeln!(out, "| Value | Meaning |\n|---|---|");
    for value in values {
        match value.get("const") {
            Some(name) => {
                let _ = writeln!(out, "| `{}` | {} |", name.as_str().unwrap_or_default(), cell(&value["description"]));
            }
            None => {
                let _ = writeln!(out, "| any other string | {} |", cell(&value["description"]));
            }
        }
    }
    out.push('\n');
}

/// The type of a field, in words, with links to the types section.
fn kind(node: &Value) -> String {
    if let Some(reference) = node["$ref"].as_str() {
        let name = ref_name(reference);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(alternatives) = node["anyOf"].as_array() {
        return alternatives.iter().map(kind).collect::<Vec<_>>().join(" or ");
    }
    match &node["type"] {
        Value::Array(types) => types
            .iter()
            .map(|t| kind(&serde_json::json!({"type": t, "items": node["items"]})))
            .collect::<Vec<_>>()
            .join(" or "),
        Value::String(t) if t == "array" => format!("array of {}", kind(&node["items"])),
        Value::String(t) if t == "object" => "object".into(),
        Value::String(t) => t.clone(),
        _ => "any JSON".into(),
    }
}

fn ref_name(reference: &str) -> &str {
    reference.trim_start_matches("#/$defs/")
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// A description inside a table cell: one line, pipes escaped.
fn cell(value: &Value) -> String {
    text(value).replace('|', "\\|").replace("\n\n", "<br><br>").replace('\n', " ")
}
