//! The simulator's network side: the accept loop (TLS or plain), one task per connection
//! serving HTTP/1.1 and HTTP/2 (hyper-util's auto builder), a cap on connections,
//! graceful shutdown that waits for every connection, and routing of requests to the
//! operations, `GET /ping` and `GET /stats` ([`STATS_PATH`]).
//!
//! Each connection has a "kill" token: a scripted connection drop cancels it, and the
//! connection task then drops the connection, which closes the socket abruptly.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::STATS_PATH;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::converse;
use super::http::{Body, full_body};
use super::polly;
use super::service_error::{ErrorKind, ServiceError};
use super::sonic;
use super::state::{Operation, SimState};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections may finish their work after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything the accept loop needs.
pub struct Server {
    pub listener: TcpListener,
    pub tls: Option<TlsAcceptor>,
    pub state: Arc<SimState>,
    pub shutdown: CancellationToken,
    pub tracker: TaskTracker,
    pub max_connections: usize,
}

impl Server {
    /// Accepts connections until `shutdown` is cancelled.
    pub async fn run(self) {
        let limit = Arc::new(Semaphore::new(self.max_connections));
        loop {
            let accepted = tokio::select! {
                () = self.shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = limit.clone().try_acquire_owned() else {
                        tracing::warn!(%peer, max = self.max_connections, "connection limit reached; refusing connection");
                        continue;
                    };
                    let connection = Connection {
                        tls: self.tls.clone(),
                        state: self.state.clone(),
                        shutdown: self.shutdown.clone(),
                        _permit: permit,
                    };
                    self.tracker.spawn(connection.run(stream, peer));
                }
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        self.tracker.close();
    }
}

struct Connection {
    tls: Option<TlsAcceptor>,
    state: Arc<SimState>,
    shutdown: CancellationToken,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn run(self, stream: TcpStream, peer: SocketAddr) {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        match self.tls.clone() {
            Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => self.serve(TokioIo::new(tls), peer).await,
                Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            },
            None => self.serve(TokioIo::new(stream), peer).await,
        }
    }

    async fn serve<I>(self, io: I, peer: SocketAddr)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let kill = CancellationToken::new();
        let state = self.state.clone();
        let conn_kill = kill.clone();
        let service = service_fn(move |request| {
            let state = state.clone();
            let kill = conn_kill.clone();
            async move { Ok::<_, Infallible>(route(request, &state, &kill).await) }
        });
        let builder = auto::Builder::new(TokioExecutor::new());
        let connection = builder.serve_connection(io, service);
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => log_end(peer, result),
            () = kill.cancelled() => tracing::debug!(%peer, "dropping the connection as scripted"),
            () = self.shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    result = connection.as_mut() => log_end(peer, result),
                    () = kill.cancelled() => {}
                    () = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::debug!(%peer, "connection did not drain in time; closing it"),
                }
            }
        }
    }
}

fn log_end(peer: SocketAddr, result: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Routes one request.
async fn route(
    request: http::Request<Incoming>,
    state: &Arc<SimState>,
    kill: &CancellationToken,
) -> http::Response<Body> {
    let request_id = state.next_request_id();
    let path = request.uri().path().to_owned();
    if request.method() == http::Method::GET && path == "/ping" {
        return http::Response::new(full_body(Bytes::from_static(b"ok")));
    }
    if request.method() == http::Method::GET && path == STATS_PATH {
        // What this simulator saw, for a load test to compare its report with.
        let stats = serde_json::json!({ "operations": state.stats(), "sonic": state.sonic.counters() });
        let mut response = http::Response::new(full_body(Bytes::from(stats.to_string())));
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        return response;
    }
    if request.method() == http::Method::POST && path == polly::PATH {
        // Amazon Polly's SynthesizeSpeech, for `switchboard test`'s `speech:` steps.
        return match read_body(request.into_body(), state.max_request_bytes).await {
            Ok(body) => polly::handle(&body, &state.spoken, &state.script.sonic.phrases, &request_id),
            Err(error) => error.into_response(&request_id),
        };
    }
    let Some((model_id, operation)) = operation_of(request.method(), &path) else {
        let message = format!("{} {path} is not an operation of this endpoint", request.method());
        return ServiceError::new(ErrorKind::UnknownOperation, message).into_response(&request_id);
    };
    let authorization = request.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    state.count_request(operation, request.version(), authorization);
    let region = authorization.and_then(super::state::credential_region);
    if let Some(error) = state.model_fault(&model_id, region) {
        tracing::info!(
            ?operation,
            model_id,
            region,
            error = error.kind.type_name(),
            "model refused as scripted (modelFaults)"
        );
        return error.into_response(&request_id);
    }
    if operation == Operation::InvokeModelWithBidirectionalStream {
        // Full duplex: the body is read by the stream's task while the reply streams.
        return sonic::handle(request, &model_id, state, &request_id);
    }
    let body = match read_body(request.into_body(), state.max_request_bytes).await {
        Ok(body) => body,
        Err(error) => return error.into_response(&request_id),
    };
    // The scripted timing counts from here, as a real service's time to first token counts
    // from the request's arrival: the simulator's own parsing and rule matching are not
    // added on top of it.
    let received = tokio::time::Instant::now();
    converse::handle(operation, &model_id, &body, state, kill, &request_id, received).await
}

/// The model id and operation of `POST /model/{modelId}/{operation}`.
fn operation_of(method: &http::Method, path: &str) -> Option<(String, Operation)> {
    if method != http::Method::POST {
        return None;
    }
    let (encoded_model, name) = path.strip_prefix("/model/")?.rsplit_once('/')?;
    let operation = match name {
        "converse-stream" => Operation::ConverseStream,
        "converse" => Operation::Converse,
        "invoke-with-bidirectional-stream" => Operation::InvokeModelWithBidirectionalStream,
        _ => return None,
    };
    let model_id = percent_encoding::percent_decode_str(encoded_model).decode_utf8().ok()?;
    (!model_id.is_empty()).then(|| (model_id.into_owned(), operation))
}

async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, ServiceError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(ServiceError::validation(format!(
            "The request body is larger than {limit} bytes. Shorten the conversation and try again."
        ))),
        Err(error) => Err(ServiceError::validation(format!("The request body could not be read: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_operations_with_decoded_model_ids() {
        let post = http::Method::POST;
        assert_eq!(
            operation_of(&post, "/model/amazon.nova-lite-v1%3A0/converse-stream"),
            Some(("amazon.nova-lite-v1:0".to_owned(), Operation::ConverseStream))
        );
        assert_eq!(
            operation_of(&post, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.nova/converse"),
            Some(("arn:aws:bedrock:us-east-1:1:inference-profile/us.nova".to_owned(), Operation::Converse))
        );
        assert_eq!(operation_of(&post, "/model//converse"), None);
        assert_eq!(operation_of(&post, "/model/m/invoke"), None);
        assert_eq!(operation_of(&http::Method::GET, "/model/m/converse"), None);
    }
}
