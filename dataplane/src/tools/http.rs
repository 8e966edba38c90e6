//! HTTP tool servers: the input is POSTed as JSON with the tool's timeout and headers; a
//! 2xx JSON response is the result. Non-2xx statuses, timeouts, unreachable servers and
//! bodies that are not JSON become classified [`ToolFailure`]s. Plain `http://` only;
//! `https://` tool URLs fail with an `unsupported` error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use switchboard_crds::agent::HttpTool;

use super::ToolFuture;
use crate::core::{FailureKind, ToolFailure};

/// Largest response body read from a tool server.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// A pooled HTTP client for tool servers.
#[derive(Clone, Debug)]
pub struct HttpToolClient {
    client: Client<HttpConnector, Full<Bytes>>,
    aliases: Arc<BTreeMap<String, String>>,
}

impl Default for HttpToolClient {
    fn default() -> Self {
        Self::with_aliases(BTreeMap::new())
    }
}

impl HttpToolClient {
    /// A client that sends requests for host `name` (a key of `aliases`) to the
    /// `host:port` it maps to, keeping the original `Host` header.
    pub fn with_aliases(aliases: BTreeMap<String, String>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Self { client, aliases: Arc::new(aliases) }
    }

    /// POSTs `input` to `tool.url`.
    pub fn call(&self, tool: &HttpTool, input: serde_json::Value) -> ToolFuture {
        let this = self.clone();
        let tool = tool.clone();
        Box::pin(async move {
            let timeout = Duration::from_millis(u64::from(tool.timeout_ms));
            match tokio::time::timeout(timeout, this.post(&tool, &input)).await {
                Ok(result) => result,
                Err(_) => Err(ToolFailure::new(
                    FailureKind::Timeout,
                    format!("the tool server at {} did not answer within {} ms", tool.url, tool.timeout_ms),
                )),
            }
        })
    }

    async fn post(&self, tool: &HttpTool, input: &serde_json::Value) -> Result<serde_json::Value, ToolFailure> {
        let uri: http::Uri = tool.url.parse().map_err(|e| {
            ToolFailure::new(FailureKind::Unsupported, format!("tool URL {:?} is not valid: {e}", tool.url))
        })?;
        if uri.scheme_str() != Some("http") {
            return Err(ToolFailure::new(
                FailureKind::Unsupported,
                format!("tool URL {} uses a scheme this runtime cannot call; use http://", tool.url),
            ));
        }
        let host = uri.host().unwrap_or_default().to_owned();
        let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        let target = match self.aliases.get(&host) {
            Some(alias) => {
                let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                format!("http://{alias}{path}").parse::<http::Uri>().map_err(|e| {
                    ToolFailure::new(
                        FailureKind::Unsupported,
                        format!("host alias {alias:?} for {host} is not usable: {e}"),
                    )
                })?
            }
            None => uri,
        };
        let mut request = http::Request::post(target)
            .header(http::header::HOST, authority)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        for (name, value) in &tool.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(Full::new(Bytes::from(input.to_string())))
            .map_err(|e| ToolFailure::new(FailureKind::Unsupported, format!("cannot build the request: {e}")))?;
        let response = self.client.request(request).await.map_err(|e| {
            let kind = if e.is_connect() { FailureKind::Connection } else { FailureKind::BadResponse };
            ToolFailure::new(kind, format!("calling the tool server at {} failed: {e}", tool.url))
        })?;
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
            return Err(ToolFailure::new(
                FailureKind::HttpStatus,
                format!("the tool server at {} answered HTTP {status}: {excerpt}", tool.url),
            ));
        }
        serde_json::from_slice(&body).map_err(|e| {
            ToolFailure::new(
                FailureKind::BadResponse,
                format!("the tool server at {} answered with invalid JSON: {e}", tool.url),
            )
        })
    }
}
