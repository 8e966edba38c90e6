//! MCP tools: calls a tool on a Model Context Protocol server over the Streamable HTTP
//! transport (protocol revisions 2025-03-26 to 2025-11-25).
//!
//! One MCP session per server URL is shared by every agent session of the process: the
//! first call sends `initialize` and `notifications/initialized`, keeps the
//! `Mcp-Session-Id` the server assigns and sends it (with `MCP-Protocol-Version`) on every
//! later request. A server that forgets the session (HTTP 404) gets a fresh `initialize`
//! and the call is sent once more. `tools/call` carries a progress token; the server's
//! `notifications/progress` on the response's event stream become `tool_progress` events.
//! The answer may be plain JSON or an event stream; server-to-client `ping` requests on
//! the stream are answered. Results: `structuredContent` when present, else the text
//! content (parsed as JSON when it is JSON); `isError` results and JSON-RPC errors become
//! classified [`ToolFailure`]s. On timeout the server is sent `notifications/cancelled`.
//! A call of a session with a verified caller carries the gateway's identity assertion as
//! header `X-Switchboard-Identity` on that call's requests (`tools/call`, its cancellation,
//! answers to pings on its stream), never on the shared session's `initialize`; a traced
//! call carries its span's `traceparent` on the same requests.

mod answer;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{Value, json};
use switchboard_crds::agent::McpTool;
use tokio::sync::Mutex;

use super::Progress;
use super::http::connection_failure;
use super::secrets::{Headers, SecretFiles};
use super::target::Aliases;
use switchboard_core::{FailureKind, ToolFailure};
use switchboard_models::net::{HttpClient, SseParser};

pub use answer::decode_tool_answer;
use answer::{StreamItem, progress_text, rpc_result, stream_item, tool_result};

/// The revision asked for in `initialize`.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Revisions this client speaks (the server picks one in its `initialize` answer).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Largest answer read from an MCP server (a JSON body or the whole event stream).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The agreed session with one server.
#[derive(Clone, Debug)]
struct McpSession {
    id: Option<String>,
    version: String,
}

/// The session with one server, once agreed; its lock serialises `initialize`.
type Slot = Arc<Mutex<Option<McpSession>>>;

/// A server as one call reaches it: its URL, the request headers of the tool, the
/// caller's identity assertion and the call's trace context.
#[derive(Clone, Debug)]
struct Server {
    url: String,
    headers: Arc<Headers>,
    identity: Option<String>,
    traceparent: Option<String>,
}

impl Server {
    /// The server as the shared session reaches it: without any caller's identity or call.
    fn shared(&self) -> Self {
        Self { identity: None, traceparent: None, ..self.clone() }
    }

    /// The session key: a session belongs to the URL and the credentials it was opened
    /// with (a digest of the headers, not the headers).
    fn key(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for (name, value) in self.headers.iter() {
            name.as_str().hash(&mut hasher);
            value.as_bytes().hash(&mut hasher);
        }
        format!("{}#{:016x}", self.url, hasher.finish())
    }
}

/// A client for MCP servers, shared by all sessions.
#[derive(Clone, Debug)]
pub struct McpClient {
    client: HttpClient,
    aliases: Aliases,
    secrets: SecretFiles,
    /// Sessions by server: its URL and the headers (credentials) they were opened with.
    sessions: Arc<Mutex<HashMap<String, Slot>>>,
    next_id: Arc<AtomicU64>,
}

/// Why a request did not produce an answer.
enum RpcError {
    /// The server no longer knows the session (HTTP 404 with a session id).
    SessionExpired,
    /// Anything else.
    Failed(ToolFailure),
}

impl From<ToolFailure> for RpcError {
    fn from(failure: ToolFailure) -> Self {
        Self::Failed(failure)
    }
}

/// The MCP server at `url` failed as `what` says: `url` only in the operator's detail.
fn bad(url: &str, what: impl std::fmt::Display) -> ToolFailure {
    ToolFailure::new(FailureKind::BadResponse, format!("the MCP server {what}"))
        .with_detail(format!("the MCP server at {url} {what}"))
}

impl McpClient {
    /// A client sending requests through `client`, with host `aliases`.
    pub fn new(client: HttpClient, aliases: Aliases) -> Self {
        Self {
            client,
            aliases,
            secrets: SecretFiles::default(),
            sessions: Arc::default(),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Reads `secretHeaders` values from `secrets`.
    pub fn with_secrets(mut self, secrets: SecretFiles) -> Self {
        self.secrets = secrets;
        self
    }

    /// Calls the tool `name` (or `tool.tool_name`) with `input`; progress goes to `progress`;
    /// the `identity` assertion and the `traceparent`, if any, go with the call's requests.
    pub async fn call(
        &self,
        tool: &McpTool,
        name: &str,
        input: Value,
        progress: Option<Progress>,
        identity: Option<String>,
        traceparent: Option<String>,
    ) -> Result<Value, ToolFailure> {
        let timeout = Duration::from_millis(u64::from(tool.timeout_ms));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let remote = tool.tool_name.as_deref().unwrap_or(name);
        let to = Server {
            url: tool.url.clone(),
            headers: Arc::new(self.secrets.headers(&tool.headers, &tool.secret_headers)?),
            identity,
            traceparent,
        };
        match tokio::time::timeout(timeout, self.call_tool(&to, remote, input, id, progress)).await {
            Ok(result) => result,
            Err(_) => {
                self.cancel(&to, id).await;
                Err(ToolFailure::new(
                    FailureKind::Timeout,
                    format!("the MCP server did not answer within {} ms", tool.timeout_ms),
                )
                .with_detail(format!("the MCP server at {} did not answer within {} ms", tool.url, tool.timeout_ms)))
            }
        }
    }

    async fn call_tool(
        &self,
        to: &Server,
        name: &str,
        input: Value,
        id: u64,
        progress: Option<Progress>,
    ) -> Result<Value, ToolFailure> {
        let token = format!("switchboard-{id}");
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": { "name": name, "arguments": input, "_meta": { "progressToken": token } },
        });
        for attempt in 0..2 {
            let slot = self.slot(to).await;
            let session = self.session(&to.shared(), &slot).await?;
            match self.post(to, Some(&session), &body, id, Some((&token, progress.as_ref()))).await {
                Ok((answer, _)) => return tool_result(&to.url, name, answer),
                Err(RpcError::SessionExpired) if attempt == 0 => {
                    tracing::info!(url = %to.url, "the MCP server forgot our session; initializing again");
                    let mut guard = slot.lock().await;
                    if guard.as_ref().map(|s| &s.id) == Some(&session.id) {
                        *guard = None;
                    }
                }
                Err(RpcError::SessionExpired) => {
                    return Err(bad(&to.url, "refused a session it had just created (HTTP 404)"));
                }
                Err(RpcError::Failed(failure)) => return Err(failure),
            }
        }
        Err(bad(&to.url, "could not keep a session"))
    }

    async fn slot(&self, to: &Server) -> Slot {
        self.sessions.lock().await.entry(to.key()).or_default().clone()
    }

    /// The session with `url`, initializing it when there is none (one caller at a time).
    async fn session(&self, to: &Server, slot: &Mutex<Option<McpSession>>) -> Result<McpSession, ToolFailure> {
        let mut guard = slot.lock().await;
        if let Some(session) = guard.as_ref() {
            return Ok(session.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": { "name": "switchboard", "version": env!("CARGO_PKG_VERSION") },
            },
        });
        let (answer, session_id) = match self.post(to, None, &body, id, None).await {
            Ok(answer) => answer,
            Err(RpcError::SessionExpired) => return Err(bad(&to.url, "answered initialize with HTTP 404")),
            Err(RpcError::Failed(failure)) => return Err(failure),
        };
        let result = rpc_result(&to.url, answer)?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
            let speaks =
                format!("speaks protocol revision {version:?}; this runtime speaks {}", SUPPORTED_VERSIONS.join(", "));
            return Err(ToolFailure::new(FailureKind::Unsupported, format!("the MCP server {speaks}"))
                .with_detail(format!("the MCP server at {} {speaks}", to.url)));
        }
        let session = McpSession { id: session_id, version };
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        self.notify(to, &session, &initialized).await?;
        *guard = Some(session.clone());
        Ok(session)
    }

    fn request(
        &self,
        to: &Server,
        session: Option<&McpSession>,
        body: &Value,
    ) -> Result<http::Request<Full<Bytes>>, ToolFailure> {
        let (target, authority) = self.aliases.resolve(&to.url)?;
        let mut request = http::Request::post(target)
            .header(http::header::HOST, authority)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        for (name, value) in to.headers.iter() {
            request = request.header(name, value);
        }
        if let Some(identity) = &to.identity {
            request = request.header(switchboard_core::assertion::HEADER, identity.as_str());
        }
        if let Some(traceparent) = &to.traceparent {
            request = request.header(switchboard_telemetry::context::TRACEPARENT, traceparent.as_str());
        }
        if let Some(session) = session {
            request = request.header("mcp-protocol-version", session.version.as_str());
            if let Some(id) = &session.id {
                request = request.header("mcp-session-id", id.as_str());
            }
        }
        request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| ToolFailure::new(FailureKind::Unsupported, format!("cannot build the MCP request: {e}")))
    }

    /// POSTs `body`; returns the response with id `id` and the session id header.
    async fn post(
        &self,
        to: &Server,
        session: Option<&McpSession>,
        body: &Value,
        id: u64,
        progress: Option<(&str, Option<&Progress>)>,
    ) -> Result<(Value, Option<String>), RpcError> {
        let request = self.request(to, session, body)?;
        let response = self.client.request(request).await.map_err(|e| connection_failure(&to.url, &e))?;
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND && session.is_some_and(|s| s.id.is_some()) {
            return Err(RpcError::SessionExpired);
        }
        let session_id = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let is_stream = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() {
            let body = Limited::new(response.into_body(), 64 * 1024).collect().await.map(|b| b.to_bytes());
            let excerpt: String = String::from_utf8_lossy(&body.unwrap_or_default()).chars().take(300).collect();
            return Err(RpcError::Failed(
                ToolFailure::new(FailureKind::HttpStatus, format!("the MCP server answered HTTP {status}"))
                    .with_detail(format!("the MCP server at {} answered HTTP {status}: {excerpt}", to.url)),
            ));
        }
        let answer = if is_stream {
            self.read_stream(to, session, response.into_body(), id, progress).await?
        } else {
            let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| bad(&to.url, format_args!("sent an unreadable answer: {e}")))?
                .to_bytes();
            serde_json::from_slice(&bytes).map_err(|e| bad(&to.url, format_args!("answered with invalid JSON: {e}")))?
        };
        Ok((answer, session_id))
    }

    /// Reads an event stream until the response with id `id`, reporting progress and
    /// answering pings on the way.
    async fn read_stream(
        &self,
        to: &Server,
        session: Option<&McpSession>,
        mut body: hyper::body::Incoming,
        id: u64,
        progress: Option<(&str, Option<&Progress>)>,
    ) -> Result<Value, ToolFailure> {
        let mut parser = SseParser::new(MAX_ANSWER_BYTES);
        let mut read = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| bad(&to.url, format_args!("broke off its event stream: {e}")))?;
            let Some(data) = frame.data_ref() else { continue };
            read += data.len();
            if read > MAX_ANSWER_BYTES {
                return Err(bad(&to.url, format_args!("sent more than {MAX_ANSWER_BYTES} bytes")));
            }
            for event in parser.feed(data).map_err(|e| bad(&to.url, e))? {
                match stream_item(&to.url, &event.data, id)? {
                    StreamItem::Empty => {}
                    StreamItem::Answer(message) => return Ok(message),
                    StreamItem::Other(message) => self.on_message(to, session, &message, progress).await,
                }
            }
        }
        Err(bad(&to.url, "closed its event stream before answering"))
    }

    /// A notification or request that arrived on a response stream.
    async fn on_message(
        &self,
        to: &Server,
        session: Option<&McpSession>,
        message: &Value,
        progress: Option<(&str, Option<&Progress>)>,
    ) {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, message.get("id")) {
            ("notifications/progress", None) => {
                let Some((token, Some(sink))) = progress else { return };
                if params.get("progressToken").and_then(Value::as_str) == Some(token) {
                    sink.report(progress_text(&params));
                }
            }
            ("ping", Some(request_id)) => {
                if let Some(session) = session {
                    let pong = json!({ "jsonrpc": "2.0", "id": request_id, "result": {} });
                    if let Err(failure) = self.notify(to, session, &pong).await {
                        tracing::debug!(url = %to.url, %failure.message, "could not answer the MCP server's ping");
                    }
                }
            }
            (method, _) => {
                tracing::debug!(url = %to.url, method, "ignoring an MCP message this client does not handle")
            }
        }
    }

    /// Sends a notification or a response (the server answers 202 Accepted).
    async fn notify(&self, to: &Server, session: &McpSession, body: &Value) -> Result<(), ToolFailure> {
        let request = self.request(to, Some(session), body)?;
        let response = self.client.request(request).await.map_err(|e| connection_failure(&to.url, &e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolFailure::new(
                FailureKind::HttpStatus,
                format!("the MCP server answered a notification with HTTP {status}"),
            )
            .with_detail(format!("the MCP server at {} answered a notification with HTTP {status}", to.url)));
        }
        Ok(())
    }

    /// Tells the server request `id` is abandoned (best effort, in the background).
    async fn cancel(&self, to: &Server, id: u64) {
        let Some(session) = self.slot(to).await.lock().await.clone() else { return };
        let this = self.clone();
        let to = to.clone();
        tokio::spawn(async move {
            let body = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": id, "reason": "timed out" },
            });
            let _ = tokio::time::timeout(Duration::from_secs(5), this.notify(&to, &session, &body)).await;
        });
    }
}
