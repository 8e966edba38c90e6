//! A teller Agent in local mode whose tools reach a recording HTTP server: `lookup_branch`
//! (needs no caller), `verify_caller` (the identity provider: remembers `verifiedUser`) and
//! `account_summary` (bound to the verified caller's account). The simulated model calls
//! `account_summary` in the same turn as the identity check succeeds, as fast as it can: the
//! call must still carry the assertion the gateway sends for the newly verified caller.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use serde_json::{Value, json};
use switchboard_core::assertion::HEADER;
use switchboard_core::grant::GatewaySigner;
use switchboard_local::{self as local, LocalOptions};

/// One request the tool server received.
#[derive(Clone, Debug)]
pub struct Received {
    /// `/lookup`, `/idv` or `/summary`.
    pub path: String,
    /// Its `X-Switchboard-Identity`, if any.
    pub identity: Option<String>,
    /// Its JSON body.
    pub body: Value,
}

type Log = Arc<Mutex<Vec<Received>>>;

async fn record(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: String) -> Json<Value> {
    let identity = headers.get(HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let path = uri.path().to_owned();
    log.lock().expect("log").push(Received { path: path.clone(), identity, body });
    Json(match path.as_str() {
        "/idv" => json!({"verified": true, "user": ada()}),
        "/lookup" => json!({"branch": "London Bridge"}),
        _ => json!({"ok": true}),
    })
}

/// The caller the identity check verifies.
pub fn ada() -> Value {
    json!({"name": "Ada Lovelace", "accountNumber": "12345678"})
}

fn agents(tools: SocketAddr) -> String {
    format!(
        r#"apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: {{ name: teller }}
spec:
  displayName: Tess
  voice: tiffany
  language: en-US
  responseStyle: conversational
  systemPrompt: "You are {{name}}, a bank teller. What we know: {{memory}}"
---
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: {{ name: teller }}
spec:
  entry: serve
  nodes:
    - id: serve
      kind: message
      tools: [lookup_branch, verify_caller, account_summary]
      instruction: Help the caller.
---
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: {{ name: teller }}
spec:
  mode: text
  personaRef: {{ name: teller }}
  workflowRef: {{ name: teller }}
  gateway: {{ default: true }}
  tools:
    - name: lookup_branch
      description: The nearest branch.
      inputSchema: {{ type: object, properties: {{ city: {{ type: string }} }} }}
      http: {{ url: "http://{tools}/lookup" }}
    - name: verify_caller
      description: Verifies the caller.
      inputSchema:
        type: object
        properties: {{ name: {{ type: string }}, accountNumber: {{ type: string }} }}
        required: [name, accountNumber]
      http: {{ url: "http://{tools}/idv" }}
      remember: {{ key: verifiedUser, value: /user, when: /verified }}
      identityProvider: true
    - name: account_summary
      description: A summary of the verified caller's account.
      inputSchema:
        type: object
        properties: {{ accountNumber: {{ type: string }} }}
        required: [accountNumber]
      bind: {{ accountNumber: verifiedUser.accountNumber }}
      requires: [verifiedUser]
      http: {{ url: "http://{tools}/summary" }}
"#
    )
}

const SCRIPT: &str = r#"
timing: { timeToFirstTokenMs: 1, tokensPerSecond: 10000 }
rules:
  - name: branch
    when: { userText: "(?i)branch" }
    reply: { toolUse: { name: lookup_branch, input: { city: London } } }
  - name: verify
    when: { userText: "(?i)verify me" }
    reply: { toolUse: { name: verify_caller, input: { name: Ada Lovelace, accountNumber: "12345678" } } }
  - name: verified-then-summary
    when: { toolResult: { name: verify_caller, status: success } }
    reply: { toolUse: { name: account_summary, input: {} } }
  - name: summary
    when: { userText: "(?i)summary", tools: [account_summary] }
    reply: { toolUse: { name: account_summary, input: {} } }
  - name: failed
    when: { toolResult: { status: error } }
    reply: { text: "That failed: {result}" }
defaultToolResult: { text: "Done." }
default: { text: "You said: {text}" }
"#;

/// Local mode serving the teller, and its tool server's log.
pub struct Teller {
    /// The gateway's session URL.
    pub url: String,
    /// The runtime's session URL (what a client that bypasses the gateway reaches).
    pub runtime_url: String,
    /// The key local mode's gateway signs with.
    pub key: GatewaySigner,
    log: Log,
    _keep: Vec<Box<dyn std::any::Any + Send>>,
}

impl Teller {
    pub async fn start() -> Self {
        let log = Log::default();
        let app = Router::new().fallback(record).with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let tools = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
        let dir = std::env::temp_dir().join(format!("switchboard-teller-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("teller.yaml"), agents(tools)).expect("agents");
        let script = dir.join("script.yaml.txt");
        std::fs::write(&script, SCRIPT).expect("script");
        let key = GatewaySigner::from_seed(&[23; 32]);
        let options =
            LocalOptions { sim_script: Some(script), gateway_key: Some(key.clone()), ..LocalOptions::default() };
        let local = local::start(&dir, options).await.expect("local mode starts");
        let url = format!("ws://{}/v1/session", local.server.local_addr().expect("addr"));
        let runtime_url = format!("ws://{}/v1/session", local.server.runtime_addr().expect("addr"));
        let server = local.server;
        tokio::spawn(async move { server.run(std::future::pending()).await });
        let _ = std::fs::remove_dir_all(&dir);
        Self { url, runtime_url, key, log, _keep: vec![Box::new(local.sim)] }
    }

    /// Every request the tool server received, oldest first; forgets them.
    pub fn received(&self) -> Vec<Received> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }
}
