//! Helpers: start a simulator, build clients pointed at it, build requests.

use std::sync::Arc;

use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_models::{Message, ModelRequest, TextModel, ToolDefinition};
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator};

pub const MODEL: &str = "amazon.nova-lite-v1:0";

/// Starts a TLS simulator running `script`.
pub async fn start(script: Script) -> SimHandle {
    Simulator::start(SimConfig::new(script)).await.expect("simulator starts")
}

/// Parses a YAML script.
pub fn script(yaml: &str) -> Script {
    Script::parse(yaml).expect("test script parses")
}

/// Bedrock settings pointing at `sim` with fake static credentials.
pub fn config(sim: &SimHandle) -> BedrockConfig {
    BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path())
}

/// The Bedrock `TextModel` pointed at `sim`.
pub async fn model(sim: &SimHandle) -> Arc<dyn TextModel> {
    Arc::new(BedrockTextModel::connect(&config(sim)).await.expect("client builds"))
}

/// A request with one user message and the given tools.
pub fn request(text: &str, tools: &[&str]) -> ModelRequest {
    let mut request = ModelRequest::new(MODEL, vec![Message::user_text(text)]);
    request.tools = tools.iter().map(|name| tool(name)).collect();
    request
}

/// A tool definition with an open object schema.
pub fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        input_schema: serde_json::json!({ "type": "object", "properties": {} }),
    }
}
