//! The session protocol as a published JSON Schema (draft 2020-12): every message a client
//! may send ([`ClientMessage`], less the gateway's own `identity_assertion`) and every
//! message a server sends ([`ServerMessage`]), derived from the types, with their docs as
//! descriptions and [`PROTOCOL_VERSION`] in its `$id` and title. The `protocol-schema`
//! binary writes it to `schema/protocol.schema.json`, which the client libraries
//! (`clients/`) generate their types from, and the reference for people generated from it
//! to `schema/protocol.md` ([`reference()`]); a test fails when the files and the types differ.
//!
//! The schema describes what this version reads: fields a server may leave out are
//! optional, and a code a newer peer sends (`bidi_error.code`, `stop_reason`) is any string
//! besides the ones listed.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::{ClientMessage, PROTOCOL_VERSION, ServerMessage};

mod reference;
pub use reference::{REFERENCE_PATH, reference};

/// Where the schema is written, relative to the repository root.
pub const SCHEMA_PATH: &str = "schema/protocol.schema.json";

/// The command that writes [`SCHEMA_PATH`] (for messages that ask for it).
pub const REGENERATE: &str = "cargo run -p switchboard-protocol --bin protocol-schema";

/// The schema's `$id`: names the protocol version.
pub fn schema_id() -> String {
    format!("https://switchboard.dev/schema/protocol/{PROTOCOL_VERSION}/protocol.schema.json")
}

/// The protocol's JSON Schema: one of `#/$defs/ClientMessage` or `#/$defs/ServerMessage`.
pub fn schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let client = generator.subschema_for::<ClientMessage>();
    let server = generator.subschema_for::<ServerMessage>();
    let defs = generator.take_definitions(true);
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id(),
        "title": format!("Switchboard session protocol {PROTOCOL_VERSION}"),
        "description": "The messages of a Switchboard session (client <-> gateway <-> runtime): JSON objects, one \
            per WebSocket text frame, each named by its `type`. `ClientMessage` flows client -> server, \
            `ServerMessage` server -> client. Binary frames carry raw audio in the session's formats \
            (`session_start.audio`): the caller's audio from the client, and reply audio from the server \
            when `binary_output` is set. Generated from the Rust types of the switchboard-protocol crate (dataplane/protocol).",
        "x-protocol-version": PROTOCOL_VERSION,
        "oneOf": [client, server],
        "$defs": defs,
    });
    tidy(&mut schema);
    schema
}

/// The schema as written to [`SCHEMA_PATH`]: pretty JSON and a final newline.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_else(|e| unreachable!("JSON values write: {e}"));
    text.push('\n');
    text
}

/// Checks messages against a schema of the protocol (the published file, or [`schema`]):
/// what a test of a client or a server uses to prove the messages it saw are described.
#[derive(Debug)]
pub struct Checker {
    client: jsonschema::Validator,
    server: jsonschema::Validator,
}

impl Checker {
    /// Validators of the schema's `ClientMessage` and `ServerMessage`; an error says why the
    /// schema cannot be used.
    pub fn new(schema: &Value) -> Result<Self, String> {
        let of = |def: &str| {
            let mut root = schema.clone();
            if let Value::Object(map) = &mut root {
                map.remove("oneOf");
                map.insert("$ref".into(), json!(format!("#/$defs/{def}")));
            }
            jsonschema::validator_for(&root).map_err(|e| format!("the schema's {def} cannot be used: {e}"))
        };
        Ok(Self { client: of("ClientMessage")?, server: of("ServerMessage")? })
    }

    /// What is wrong with `message` as a client message (nothing: valid).
    pub fn client_errors(&self, message: &Value) -> Vec<String> {
        Self::errors(&self.client, message)
    }

    /// What is wrong with `message` as a server message (nothing: valid).
    pub fn server_errors(&self, message: &Value) -> Vec<String> {
        Self::errors(&self.server, message)
    }

    fn errors(validator: &jsonschema::Validator, message: &Value) -> Vec<String> {
        validator.iter_errors(message).map(|e| format!("{e} (at {})", e.instance_path())).collect()
    }
}

/// `bidi_audio_input`'s audio under either of its names (serde's `alias`, which the derive
/// does not see): `audio` or `data`, exactly one.
pub(super) fn audio_or_data(schema: &mut schemars::Schema) {
    let Some(object) = schema.as_object_mut() else { return };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        let data =
            json!({"description": "The same as `audio`, under its other name: send one of the two.", "type": "string"});
        properties.insert("data".into(), data);
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| name != "audio");
    }
    object.insert("oneOf".into(), json!([{"required": ["audio"]}, {"required": ["data"]}]));
}

/// Rustdoc to plain descriptions, everywhere in the schema: intra-doc links lose their
/// brackets (`` [`ErrorCode`] `` reads `` `ErrorCode` ``), and the lines of a paragraph are
/// joined (paragraphs and fenced examples keep their line breaks).
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => tidy_object(map),
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn tidy_object(map: &mut Map<String, Value>) {
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            ("description", Value::String(text)) => *text = plain(text),
            (_, value) => tidy(value),
        }
    }
}

fn plain(doc: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in doc.trim().lines() {
        let line = line.trim_end();
        if line.starts_with("```") {
            fenced = !fenced;
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(line);
            continue;
        }
        if fenced || line.is_empty() {
            out.push('\n');
            out.push_str(line);
            if line.is_empty() {
                out.push('\n');
            }
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    unlink(&out.replace("\n\n\n", "\n\n"))
}

/// `` [`x`] `` and `` [`x`](target) `` to `` `x` ``.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&after[..end + 1]);
        rest = &after[end + 2..];
        if rest.starts_with('(')
            && let Some(close) = rest.find(')')
        {
            rest = &rest[close + 1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
