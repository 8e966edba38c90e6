//! HTTP tool servers: the input is POSTed as JSON (over `http://` or `https://`) with the
//! tool's timeout and headers; a 2xx JSON response is the result. Non-2xx statuses,
//! timeouts, unreachable servers and bodies that are not JSON become classified
//! [`ToolFailure`]s. A call of a session with a verified caller carries the gateway's
//! identity assertion as header `X-Switchboard-Identity`, and a traced call its span's
//! `traceparent`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use switchboard_crds::agent::HttpTool;

use super::ToolFuture;
use super::secrets::SecretFiles;
use super::target::Aliases;
use switchboard_core::{FailureKind, ToolFailure};
use switchboard_models::net::HttpClient;
use switchboard_telemetry::context::TRACEPARENT;

/// Largest response body read from a tool server.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// A pooled HTTP client for tool servers.
#[derive(Clone, Debug)]
pub struct HttpToolClient {
    client: HttpClient,
    aliases: Aliases,
    secrets: SecretFiles,
}

impl HttpToolClient {
    /// A client sending requests through `client`, with host `aliases`.
    pub fn new(client: HttpClient, aliases: Aliases) -> Self {
        Self { client, aliases, secrets: SecretFiles::default() }
    }

    /// Reads `secretHeaders` values from `secrets`.
    pub fn with_secrets(mut self, secrets: SecretFiles) -> Self {
        self.secrets = secrets;
        self
    }

    /// POSTs `input` to `tool.url`, with the `identity` assertion and the `traceparent`
    /// when there are.
    pub fn call(
        &self,
        tool: &HttpTool,
        input: serde_json::Value,
        identity: Option<String>,
        traceparent: Option<String>,
    ) -> ToolFuture {
        let this = self.clone();
        let tool = tool.clone();
        Box::pin(async move {
            let timeout = Duration::from_millis(u64::from(tool.timeout_ms));
            let headers = [(switchboard_core::assertion::HEADER, identity), (TRACEPARENT, traceparent)];
            match tokio::time::timeout(timeout, this.post(&tool, &input, headers)).await {
                Ok(result) => result,
                Err(_) => Err(ToolFailure::new(
                    FailureKind::Timeout,
                    format!("the tool server did not answer within {} ms", tool.timeout_ms),
                )
                .with_detail(format!("the tool server at {} did not answer within {} ms", tool.url, tool.timeout_ms))),
            }
        })
    }

    async fn post(
        &self,
        tool: &HttpTool,
        input: &serde_json::Value,
        session_headers: [(&str, Option<String>); 2],
    ) -> Result<serde_json::Value, ToolFailure> {
        let (target, authority) = self.aliases.resolve(&tool.url)?;
        let mut request = http::Request::post(target)
            .header(http::header::HOST, authority)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        for (name, value) in self.secrets.headers(&tool.headers, &tool.secret_headers)? {
            request = request.header(name, value);
        }
        for (name, value) in session_headers {
            if let Some(value) = value {
                request = request.header(name, value);
            }
        }
        let request = request
            .body(Full::new(Bytes::from(input.to_string())))
            .map_err(|e| ToolFailure::new(FailureKind::Unsupported, format!("cannot build the request: {e}")))?;
        let response = self.client.request(request).await.map_err(|e| connection_failure(&tool.url, &e))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                ToolFailure::new(FailureKind::BadResponse, format!("reading the tool server's answer failed: {e}"))
            })?
            .to_bytes();
        if !status.is_success() {
            let excerpt: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(ToolFailure::new(FailureKind::HttpStatus, format!("the tool server answered HTTP {status}"))
                .with_detail(format!("the tool server at {} answered HTTP {status}: {excerpt}", tool.url)));
        }
        serde_json::from_slice(&body).map_err(|e| {
            ToolFailure::new(FailureKind::BadResponse, "the tool server answered with something other than JSON")
                .with_detail(format!("the tool server at {} answered with invalid JSON: {e}", tool.url))
        })
    }
}

/// A failed request to `url`: the whole cause chain (TLS errors hide in the sources) for
/// the operator's logs; for the model and the client, only that the server was not reached
/// or broke off.
pub(crate) fn connection_failure(url: &str, error: &hyper_util::client::legacy::Error) -> ToolFailure {
    let mut detail = format!("calling {url} failed: {error}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    let (kind, message) = if error.is_connect() {
        (FailureKind::Connection, "the tool server could not be reached")
    } else {
        (FailureKind::BadResponse, "the tool server broke off the call")
    };
    ToolFailure::new(kind, message).with_detail(detail)
}
