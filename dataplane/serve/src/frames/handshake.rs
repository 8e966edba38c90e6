//! The opening handshakes (RFC 6455, 4): a server's, as an axum extractor that answers
//! `101 Switching Protocols` and hands over the upgraded socket; a client's, over a TCP
//! stream, checking the server's answer. No subprotocol and no extension is offered or
//! agreed.

use std::future::Future;

use axum::extract::FromRequestParts;
use axum::http::header::{CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, UPGRADE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::{Conn, Limits, READ_CHUNK, Role};

/// The longest response head a client reads.
const MAX_HEAD: usize = 16 * 1024;

/// The server's side of the socket a client upgraded.
pub type Upgraded = TokioIo<hyper::upgrade::Upgraded>;

/// A WebSocket upgrade request, checked: answer it with [`Upgrade::on_upgrade`].
#[derive(Debug)]
pub struct Upgrade {
    accept: HeaderValue,
    on_upgrade: hyper::upgrade::OnUpgrade,
}

/// A request that is not a WebSocket upgrade, with the status and reason it is refused with.
#[derive(Debug)]
pub struct NotUpgrade(StatusCode, &'static str);

impl IntoResponse for NotUpgrade {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = NotUpgrade;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        if parts.method != Method::GET {
            return Err(NotUpgrade(StatusCode::METHOD_NOT_ALLOWED, "a WebSocket upgrade is a GET request"));
        }
        let headers = &parts.headers;
        if !has_token(headers, CONNECTION, "upgrade") {
            return Err(NotUpgrade(StatusCode::BAD_REQUEST, "the Connection header does not include 'upgrade'"));
        }
        if !has_token(headers, UPGRADE, "websocket") {
            return Err(NotUpgrade(StatusCode::BAD_REQUEST, "the Upgrade header is not 'websocket'"));
        }
        if headers.get(SEC_WEBSOCKET_VERSION).map(HeaderValue::as_bytes) != Some(b"13") {
            return Err(NotUpgrade(StatusCode::BAD_REQUEST, "Sec-WebSocket-Version is not 13"));
        }
        let Some(key) = headers.get(SEC_WEBSOCKET_KEY) else {
            return Err(NotUpgrade(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is missing"));
        };
        let accept = HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
            .map_err(|_| NotUpgrade(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is not a header value"))?;
        let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
            return Err(NotUpgrade(StatusCode::UPGRADE_REQUIRED, "this connection cannot be upgraded"));
        };
        Ok(Self { accept, on_upgrade })
    }
}

impl Upgrade {
    /// Answers `101 Switching Protocols` and runs `session` with the connection once the
    /// client has it (a failed upgrade is logged, and `session` does not run).
    pub fn on_upgrade<F, Fut>(self, limits: Limits, session: F) -> Response
    where
        F: FnOnce(Conn<Upgraded>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Self { accept, on_upgrade } = self;
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => session(Conn::new(TokioIo::new(upgraded), Role::Server, limits, BytesMut::new())).await,
                Err(error) => tracing::debug!("a WebSocket upgrade failed: {error}"),
            }
        });
        let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
        let headers = response.headers_mut();
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
        response
    }
}

/// Whether `name`'s comma-separated values include `token` (ASCII case-insensitive).
fn has_token(headers: &HeaderMap, name: axum::http::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|value| value.trim().eq_ignore_ascii_case(token))
}

/// A client's handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server's answer is not an acceptance.
    #[error("the server refused the WebSocket handshake: {0}")]
    Refused(String),
}

/// Opens a WebSocket on `path` over `stream` (`host`: the Host header), as a client.
pub async fn connect(
    mut stream: TcpStream,
    host: &str,
    path: &str,
    limits: Limits,
) -> Result<Conn<TcpStream>, HandshakeError> {
    let key = generate_key();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut read = BytesMut::with_capacity(READ_CHUNK);
    let head = loop {
        if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            break read.split_to(at + 4);
        }
        if read.len() > MAX_HEAD {
            return Err(HandshakeError::Refused(format!("its answer's head is over {MAX_HEAD} bytes")));
        }
        read.reserve(READ_CHUNK);
        if stream.read_buf(&mut read).await? == 0 {
            return Err(HandshakeError::Refused("it closed the connection before answering".into()));
        }
    };
    accepted(&head, &key)?;
    Ok(Conn::new(stream, Role::Client, limits, read))
}

/// Checks a server's answer to the request with `key`: `101`, the upgrade, the accept key.
fn accepted(head: &[u8], key: &str) -> Result<(), HandshakeError> {
    let refused = |why: String| Err(HandshakeError::Refused(why));
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return refused("its answer's head is incomplete".into()),
        Err(error) => return refused(format!("its answer is not HTTP: {error}")),
    }
    if response.code != Some(101) {
        return refused(format!("it answered HTTP {}", response.code.unwrap_or_default()));
    }
    let headers = response.headers;
    let values = |name: &'static str| {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .filter_map(|h| std::str::from_utf8(h.value).ok())
    };
    let token = |name: &'static str, token: &str| {
        values(name).flat_map(|v| v.split(',')).any(|v| v.trim().eq_ignore_ascii_case(token))
    };
    if !token("upgrade", "websocket") || !token("connection", "upgrade") {
        return refused("its answer does not upgrade to a WebSocket".into());
    }
    if values("sec-websocket-accept").next() != Some(derive_accept_key(key.as_bytes()).as_str()) {
        return refused("its Sec-WebSocket-Accept does not match the key sent".into());
    }
    if values("sec-websocket-extensions").next().is_some() || values("sec-websocket-protocol").next().is_some() {
        return refused("it agreed to an extension or subprotocol that was not offered".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_accepted_only_with_101_the_upgrade_and_the_keys_accept_value() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                    Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        assert!(accepted(good.as_bytes(), key).is_ok());
        for (bad, why) in [
            (good.replace("101 Switching Protocols", "200 OK"), "HTTP 200"),
            (good.replace("Upgrade: websocket\r\n", ""), "does not upgrade"),
            (good.replace("s3pP", "xxxx"), "does not match"),
            (good.replace("\r\n\r\n", "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"), "not offered"),
            ("garbage\r\n\r\n".to_owned(), "not HTTP"),
        ] {
            let error = accepted(bad.as_bytes(), key).expect_err(why).to_string();
            assert!(error.contains(why), "{error}");
        }
    }
}
