//! A JSON Web Key Set from an identity provider's URL (`switchboard gateway --jwks-url`):
//! fetched at start, then again every refresh interval, so keys the provider rotates in
//! are accepted and keys it drops stop being accepted. A fetch that fails or brings an
//! unusable set keeps the keys in use, and says so.
//!
//! The URL must be `https://` (the keys decide who may talk to the agents), except on
//! loopback, where a local provider or a test may serve plain HTTP. Answers are bounded:
//! [`FETCH_TIMEOUT`] for the whole request and [`MAX_JWKS_BYTES`] of body.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use switchboard_gateway::auth::Jwt;
use switchboard_models::net::HttpClient;

/// The longest a fetch may take, from connecting to the end of the body.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest JWKS accepted.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Why a JWKS could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum JwksFetchError {
    /// The URL is not one keys may come from.
    #[error("the JWKS URL {url:?} is not usable: {why}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The request failed or took too long.
    #[error("cannot fetch the JWKS from {url}: {why}")]
    Request {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The provider answered with an error status.
    #[error("the JWKS URL {url} answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: http::StatusCode,
    },
}

/// A checked JWKS URL.
#[derive(Clone, Debug)]
pub struct JwksUrl(http::Uri);

impl JwksUrl {
    /// Checks `url`: `https://`, or `http://` to a loopback host.
    pub fn parse(url: &str) -> Result<Self, JwksFetchError> {
        let error = |why: &str| JwksFetchError::Url { url: url.to_owned(), why: why.to_owned() };
        let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| error(&e.to_string()))?;
        let host = uri.host().ok_or_else(|| error("it has no host"))?;
        match uri.scheme_str() {
            Some("https") => Ok(Self(uri)),
            Some("http") if is_loopback(host) => Ok(Self(uri)),
            Some("http") => Err(error("keys must come over https:// (plain http:// only on loopback)")),
            _ => Err(error("it must be an https:// URL")),
        }
    }
}

impl std::fmt::Display for JwksUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Fetches the JWKS text at `url`.
pub async fn fetch(client: &HttpClient, url: &JwksUrl) -> Result<String, JwksFetchError> {
    let failed = |why: String| JwksFetchError::Request { url: url.to_string(), why };
    let request = http::Request::get(url.0.clone())
        .header(http::header::ACCEPT, "application/jwk-set+json, application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|e| failed(e.to_string()))?;
    let work = async {
        let response = client.request(request).await.map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(JwksFetchError::Status { url: url.to_string(), status });
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| failed(format!("the body is unreadable or larger than {MAX_JWKS_BYTES} bytes ({e})")))?;
        String::from_utf8(body.to_bytes().to_vec()).map_err(|_| failed("the body is not UTF-8 text".into()))
    };
    tokio::time::timeout(FETCH_TIMEOUT, work)
        .await
        .map_err(|_| failed(format!("no complete answer within {} s", FETCH_TIMEOUT.as_secs())))?
}

/// Fetches the JWKS at `url` once and builds the checker for `issuer` and `audience`.
pub async fn load(client: &HttpClient, url: &JwksUrl, issuer: String, audience: String) -> Result<Jwt, anyhow::Error> {
    let text = fetch(client, url).await?;
    Jwt::new(&text, issuer, audience).map_err(|e| anyhow::anyhow!("the JWKS at {url}: {e}"))
}

/// Fetches the JWKS at `url` again every `every` and gives `jwt` its keys, until the
/// returned task is aborted.
pub fn keep_fresh(client: HttpClient, url: JwksUrl, jwt: Arc<Jwt>, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match fetch(&client, &url).await {
                Ok(text) => match jwt.set_keys(&text) {
                    Ok(keys) => tracing::debug!(keys, %url, "JWKS refreshed"),
                    Err(error) => tracing::warn!(%url, "the JWKS is not usable; the previous keys stay: {error}"),
                },
                Err(error) => tracing::warn!("{error}; the previous keys stay"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::routing::get;

    use super::*;

    /// A JWKS with one Ed25519 key named `kid`.
    fn jwks(kid: &str, x: &str) -> String {
        serde_json::json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}]})
            .to_string()
    }

    /// An (unsigned) token naming `kid`: `verify` looks the key up before anything else.
    fn naming(kid: &str) -> &'static str {
        match kid {
            "k1" => "eyJhbGciOiJFZERTQSIsImtpZCI6ImsxIn0.e30.AAAA",
            _ => "eyJhbGciOiJFZERTQSIsImtpZCI6ImsyIn0.e30.AAAA",
        }
    }

    fn knows(jwt: &Jwt, kid: &str) -> bool {
        !jwt.verify(naming(kid)).expect_err("unsigned").contains("no key")
    }

    #[tokio::test]
    async fn keys_are_fetched_refreshed_and_kept_when_the_provider_fails() {
        const K1: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE";
        const K2: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI";
        let served = Arc::new(Mutex::new(jwks("k1", K1)));
        let app = axum::Router::new()
            .route(
                "/jwks",
                get({
                    let served = served.clone();
                    move || {
                        let body = served.lock().expect("lock").clone();
                        async move { body }
                    }
                }),
            )
            .route("/broken", get(|| async { (http::StatusCode::INTERNAL_SERVER_ERROR, "down") }))
            .route("/huge", get(|| async { "x".repeat(MAX_JWKS_BYTES + 1) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = switchboard_models::net::Trust::system().client().expect("client");
        let url = |path: &str| JwksUrl::parse(&format!("http://{addr}{path}")).expect("loopback URL");

        let jwt = Arc::new(
            load(&client, &url("/jwks"), "https://idp.example".into(), "switchboard".into()).await.expect("loads"),
        );
        assert!(knows(&jwt, "k1") && !knows(&jwt, "k2"));

        // The provider rotates: the refresh brings the new key and drops the old one.
        *served.lock().expect("lock") = jwks("k2", K2);
        let refresh = keep_fresh(client.clone(), url("/jwks"), jwt.clone(), Duration::from_millis(100));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !knows(&jwt, "k2") || knows(&jwt, "k1") {
            assert!(tokio::time::Instant::now() < deadline, "the rotated JWKS was not picked up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A broken answer keeps the keys in use.
        *served.lock().expect("lock") = "{\"keys\": []}".into();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(knows(&jwt, "k2"), "an unusable JWKS does not replace the keys");
        refresh.abort();

        let status = fetch(&client, &url("/broken")).await.expect_err("500");
        assert!(status.to_string().contains("answered 500"), "{status}");
        let huge = fetch(&client, &url("/huge")).await.expect_err("too big");
        assert!(huge.to_string().contains("larger than"), "{huge}");
        server.abort();
        let gone = fetch(&client, &url("/jwks")).await.expect_err("no server");
        assert!(gone.to_string().contains("cannot fetch the JWKS"), "{gone}");
    }

    #[test]
    fn keys_come_over_https_or_from_loopback() {
        assert!(JwksUrl::parse("https://idp.example/.well-known/jwks.json").is_ok());
        assert!(JwksUrl::parse("http://127.0.0.1:8080/jwks").is_ok());
        assert!(JwksUrl::parse("http://[::1]:8080/jwks").is_ok());
        assert!(JwksUrl::parse("http://localhost/jwks").is_ok());
        let plain = JwksUrl::parse("http://idp.example/jwks").expect_err("plain http elsewhere");
        assert!(plain.to_string().contains("https://"), "{plain}");
        assert!(JwksUrl::parse("ftp://idp.example/jwks").is_err());
        assert!(JwksUrl::parse("/jwks").is_err());
    }
}
