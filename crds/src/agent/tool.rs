//! Tools an Agent's model may call: HTTP tool servers, MCP servers and built-ins.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::authority::MemoryPath;

/// A tool the model may call. Exactly one of `http`, `mcp`, `builtin` and `client` says how
/// it runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("[has(self.http), has(self.mcp), has(self.builtin), has(self.client)].filter(x, x).size() == 1").message("set exactly one of http, mcp, builtin and client"),
    validation = Rule::new("!has(self.client) || ((!has(self.cacheTtlSeconds) || self.cacheTtlSeconds == 0) && !has(self.remember) && (!has(self.identityProvider) || !self.identityProvider))").message("a client tool's answer comes from the user's app and is not trusted: it cannot be cached, remembered or be an identity provider"),
    validation = Rule::new("!self.name.startsWith('transfer_to_') && !self.name.startsWith('return_to_')").message("names starting with transfer_to_ or return_to_ are reserved for handoffs"),
    validation = Rule::new("!has(self.keypad) || has(self.http) || has(self.mcp)").message("keypad collects an input of an http or mcp tool: a builtin or client tool takes no keypad input"),
    validation = Rule::new("!has(self.keypad) || !has(self.cacheTtlSeconds) || self.cacheTtlSeconds == 0").message("a tool with a keypad input is not cached (the keys typed are the input): set cacheTtlSeconds to 0 or remove keypad"),
    validation = Rule::new("!has(self.keypad) || !has(self.bind) || !(self.keypad.input in self.bind)").message("keypad.input is also bound (bind): an input comes from memory or from the keypad, not both")
)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The name the model calls the tool by: letters, digits, `_` and `-`, at most 64.
    /// Names starting with `transfer_to_` or `return_to_` are reserved for handoffs.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_-]*$"))]
    pub name: String,

    /// What the tool does and when to use it; the model reads this.
    #[schemars(length(min = 1, max = 4096))]
    pub description: String,

    /// JSON Schema (draft 2020-12) of the tool's input; its top level must be an object
    /// schema. Inputs that do not match are refused before the tool runs.
    #[serde(default = "empty_object_schema")]
    #[schemars(schema_with = "any_json_object")]
    pub input_schema: serde_json::Value,

    /// Call an HTTP tool server: the input is POSTed as JSON, the JSON response is the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTool>,

    /// Call a tool on a Model Context Protocol server (streamable HTTP transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpTool>,

    /// Use a tool built into the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinTool>,

    /// Run the tool in the client (the app or page the user talks through): the call goes
    /// to the client as a `client_tool_call`, its `client_tool_result` is the result. The
    /// answer comes from outside the cluster and is not trusted: such a tool cannot be
    /// cached, `remember` nothing and be no identity provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientTool>,

    /// `required` makes the runtime ask the user (a `consent_request`) and run the tool only
    /// after approval, whatever the model says. Default `never`.
    #[serde(default)]
    pub consent: Consent,

    /// With `consent: required`: how long, in seconds, the request waits for the user's
    /// answer; unanswered, the tool does not run and the model is told so. Default 60.
    #[serde(default = "default_consent_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub consent_timeout_seconds: u32,

    /// Seconds a result is reused for the same input. 0 (the default) disables caching.
    #[serde(default)]
    #[schemars(range(max = 86400))]
    pub cache_ttl_seconds: u32,

    /// Longest result, in bytes, handed to the model; longer results are truncated.
    /// Default 16384.
    #[serde(default = "default_max_output")]
    #[schemars(range(min = 64, max = 1048576))]
    pub max_output_bytes: u32,

    /// Store part of a successful result in session memory, e.g. the verified user after
    /// an identity check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<ToolMemory>,

    /// Inputs filled from session memory, never by the model: input field -> memory key,
    /// optionally followed by a dotted path into its value, e.g.
    /// `{accountNumber: verifiedUser.accountNumber}`. Bound fields are left out of the
    /// schema the model sees; a call in which the model gives one anyway is refused, and so
    /// is a call while the memory value is missing. Each field must be a property of
    /// `inputSchema`, and its memory key is required as if listed under `requires`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "bindings_schema")]
    pub bind: BTreeMap<String, String>,

    /// Memory keys that must be set before the tool is offered to the model or run, e.g.
    /// `[verifiedUser]` for a tool that acts for the verified caller. A call while one is
    /// missing is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$")))]
    pub requires: Vec<String>,

    /// Marks the tool that establishes who the caller is (an identity check). Only an
    /// identity provider may `remember` into one of the Agent's `identityKeys`
    /// (`verifiedUser` unless the Agent lists others). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity_provider: bool,

    /// An input the caller types on the phone's keypad (an account number, a PIN), never
    /// spoken to or heard by the model: when the model calls the tool, the keys the caller
    /// presses go straight into this input and the tool runs; the model, the conversation,
    /// the record, traces and logs never hold them. The model asks ("type your PIN, then
    /// hash") and calls the tool without this input (it is left out of the schema it sees).
    /// Only for `http` and `mcp` tools, never cached, never also bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keypad: Option<KeypadInput>,
}

/// How a tool input is collected from the keypad: the keys `0`-`9` pressed after the model
/// called the tool, until `#`, `maxDigits` keys, or a pause of `interDigitTimeoutSeconds`.
/// `*` starts the entry again. Fewer than `minDigits` keys, or none within
/// `timeoutSeconds`, end the call with an error the model can explain (`keypad_too_short`,
/// `keypad_timeout`), and no key reaches it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("self.minDigits <= self.maxDigits").message("keypad.minDigits is more than keypad.maxDigits: no entry could be taken"))]
#[serde(rename_all = "camelCase")]
pub struct KeypadInput {
    /// The input field collected: a property of `inputSchema` of type string (digits are
    /// text: a leading zero counts).
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$"))]
    pub input: String,
    /// Fewest keys taken. Default 1.
    #[serde(default = "default_min_digits")]
    #[schemars(range(min = 1, max = 32))]
    pub min_digits: u32,
    /// Most keys: the entry ends at this many without `#`. Default 32.
    #[serde(default = "default_max_digits")]
    #[schemars(range(min = 1, max = 32))]
    pub max_digits: u32,
    /// Seconds the caller has for the whole entry, from the tool call. Default 30.
    #[serde(default = "default_keypad_timeout")]
    #[schemars(range(min = 3, max = 300))]
    pub timeout_seconds: u32,
    /// Seconds of pause after a key that end the entry. Default 5.
    #[serde(default = "default_inter_digit")]
    #[schemars(range(min = 1, max = 60))]
    pub inter_digit_timeout_seconds: u32,
}

fn default_min_digits() -> u32 {
    1
}

fn default_max_digits() -> u32 {
    32
}

fn default_keypad_timeout() -> u32 {
    30
}

fn default_inter_digit() -> u32 {
    5
}

/// Which of the three ways a tool runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ToolTarget<'a> {
    /// An HTTP tool server.
    Http(&'a HttpTool),
    /// An MCP server.
    Mcp(&'a McpTool),
    /// A built-in tool.
    Builtin(&'a BuiltinTool),
    /// A tool the client runs.
    Client(&'a ClientTool),
}

impl ToolSpec {
    /// The memory keys that must be set for the tool to be offered and run: `requires`,
    /// then the keys its `bind` reads (bindings whose source does not parse are left out;
    /// validation reports them).
    pub fn required_memory(&self) -> Vec<&str> {
        let bound = self.bind.values().filter_map(|source| MemoryPath::parse(source).ok()).map(|p| p.key);
        let mut keys: Vec<&str> = self.requires.iter().map(String::as_str).collect();
        for key in bound {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// How the tool runs, when exactly one of `http`, `mcp`, `builtin`, `client` is set.
    pub fn target(&self) -> Option<ToolTarget<'_>> {
        match (&self.http, &self.mcp, &self.builtin, &self.client) {
            (Some(h), None, None, None) => Some(ToolTarget::Http(h)),
            (None, Some(m), None, None) => Some(ToolTarget::Mcp(m)),
            (None, None, Some(b), None) => Some(ToolTarget::Builtin(b)),
            (None, None, None, Some(c)) => Some(ToolTarget::Client(c)),
            _ => None,
        }
    }
}

/// An HTTP tool server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpTool {
    /// The URL the input is POSTed to.
    #[schemars(regex(pattern = r"^https?://"))]
    pub url: String,
    /// Milliseconds to wait for the response before the call fails. Default 5000.
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1, max = 300000))]
    pub timeout_ms: u32,
    /// Extra request headers, as plain text in the Agent: nothing secret (credential
    /// headers such as `Authorization` are refused here; use `secretHeaders`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Request headers whose values come from Secrets in the Agent's namespace, e.g. a
    /// bearer token. The runtime pods mount the Secrets read-only; the values never appear
    /// in the Agent, the runtime's ConfigMap or logs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub secret_headers: Vec<SecretHeader>,
}

/// A request header whose value is read from a Secret key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretHeader {
    /// The header's name, e.g. `Authorization` or `X-Api-Key`.
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"))]
    pub name: String,
    /// The Secret (in the Agent's namespace) and key holding the value.
    pub secret_key_ref: SecretKeyRef,
    /// Text sent before the secret value, e.g. `Bearer ` for a token.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64))]
    pub prefix: String,
}

/// A key of a Secret in the Agent's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"))]
    pub name: String,
    /// The key in its data.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// Header names that carry credentials: never accepted as plain `headers`.
pub const CREDENTIAL_HEADERS: [&str; 8] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-access-token",
    "private-token",
];

/// A tool on a Model Context Protocol server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    /// The MCP server's streamable-HTTP endpoint.
    #[schemars(regex(pattern = r"^https?://"))]
    pub url: String,
    /// The tool's name on the server, when it differs from `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Milliseconds to wait for the result before the call fails. Default 5000.
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1, max = 300000))]
    pub timeout_ms: u32,
    /// Extra request headers, as for HTTP tools: nothing secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Request headers from Secrets, as for HTTP tools (e.g. the server's bearer token).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub secret_headers: Vec<SecretHeader>,
}

impl ToolSpec {
    /// Where the tool runs, as listings name it: `http`, `mcp`, `client` or `builtin`.
    pub fn runs(&self) -> &'static str {
        if self.http.is_some() {
            "http"
        } else if self.mcp.is_some() {
            "mcp"
        } else if self.client.is_some() {
            "client"
        } else {
            "builtin"
        }
    }

    /// The plain and secret headers of an HTTP or MCP tool.
    pub fn headers(&self) -> Option<(&BTreeMap<String, String>, &[SecretHeader])> {
        match self.target()? {
            ToolTarget::Http(h) => Some((&h.headers, &h.secret_headers)),
            ToolTarget::Mcp(m) => Some((&m.headers, &m.secret_headers)),
            ToolTarget::Builtin(_) | ToolTarget::Client(_) => None,
        }
    }
}

/// A tool built into the runtime.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuiltinTool {
    /// Which built-in: `currentTime` (the date and time now), `endSession` (finish the
    /// conversation politely) or `showCard` (show the client a card the model composes: a
    /// title, text, fields and a link; its input schema is the card's, set by the runtime).
    pub kind: BuiltinKind,
}

/// A tool the client runs: the model's call goes to the client, and the client's answer
/// (checked against `outputSchema` when given) goes back to the model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientTool {
    /// Seconds to wait for the client's answer; unanswered (a client with no handler for
    /// the tool), the call ends with a `client_timeout` error the model can explain.
    /// Default 15.
    #[serde(default = "default_client_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
    /// JSON Schema (draft 2020-12) the client's result must match; a result that does not
    /// is refused (`client_bad_result`) and the model told so. Absent: any JSON result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_output_schema")]
    pub output_schema: Option<serde_json::Value>,
}

/// The default of [`ClientTool::timeout_seconds`].
pub const DEFAULT_CLIENT_TIMEOUT_SECONDS: u32 = 15;

fn default_client_timeout() -> u32 {
    DEFAULT_CLIENT_TIMEOUT_SECONDS
}

fn any_output_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "description": "JSON Schema (draft 2020-12) the client's result must match; a result that does not is refused (`client_bad_result`) and the model told so. Absent: any JSON result."
    })
}

/// The built-in tools.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuiltinKind {
    /// Returns the current date and time.
    CurrentTime,
    /// Ends the session after the current reply.
    EndSession,
    /// Shows the client a card (`display_card`) the model composes; the tool's input is
    /// the card, checked against a fixed schema with bounded sizes.
    ShowCard,
}

/// Whether a tool needs the user's approval before it runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Consent {
    /// Runs without asking.
    #[default]
    Never,
    /// Runs only after the user approves each call.
    Required,
}

/// Stores part of a tool's successful result in session memory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolMemory {
    /// The memory key, e.g. `verifiedUser`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$"))]
    pub key: String,
    /// JSON Pointer (RFC 6901) to the part of the result to store; empty stores all of it.
    // Empty defaults are left out of the schema: Kubernetes 1.20 rejects `default: ''`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// JSON Pointer to a boolean in the result that must be `true` for the value to be
    /// stored, e.g. `/verified`. When empty, every successful result is stored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when: String,
}

fn default_timeout_ms() -> u32 {
    5000
}

fn default_max_output() -> u32 {
    16384
}

fn default_consent_timeout() -> u32 {
    60
}

fn empty_object_schema() -> serde_json::Value {
    serde_json::json!({ "type": "object", "properties": {} })
}

fn bindings_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 16,
        "additionalProperties": {
            "type": "string",
            "maxLength": 253,
            "pattern": r"^[a-zA-Z][a-zA-Z0-9_]*(\.[a-zA-Z0-9_-]+)*$"
        },
        "description": "Inputs filled from session memory, never by the model: input field -> memory key, optionally followed by a dotted path into its value, e.g. `{accountNumber: verifiedUser.accountNumber}`. Bound fields are left out of the schema the model sees; a call in which the model gives one anyway is refused, and so is a call while the memory value is missing. Each field must be a property of `inputSchema`, and its memory key is required as if listed under `requires`."
    })
}

fn any_json_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "description": "JSON Schema (draft 2020-12) of the tool's input; its top level must be an object schema."
    })
}
