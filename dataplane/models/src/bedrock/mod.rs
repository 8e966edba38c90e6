//! The Amazon Bedrock text model: ConverseStream through the real `aws-sdk-bedrockruntime`
//! client. The client is built from a region, an optional endpoint URL (a private
//! endpoint, or the local simulator), an optional extra trusted CA certificate (the
//! simulator's self-signed one) and either the default AWS credential chain or static
//! credentials. Its User-Agent headers are made once per client (`user_agent.rs`).
//!
//! The SDK's own retries are off by default (`sdk_max_attempts = 1`): retries are made in
//! one place, [`crate::retrying`], which knows whether output was already streamed.

mod convert;
pub mod credential_files;
pub(crate) mod errors;
mod stream;
mod user_agent;

use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::SharedHttpClient;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::timeout::TimeoutConfig;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls;
use switchboard_crds::agent::ModelSettings;

pub use convert::{document_to_json, json_to_document};
/// The ConverseStream event decoder, public for the fuzz targets (`fuzz/`).
#[doc(hidden)]
pub use stream::StreamDecoder;

use super::{ModelError, ModelRequest, ModelStream, TextModel};

/// How to reach Bedrock.
#[derive(Clone, Debug)]
pub struct BedrockConfig {
    /// AWS region, e.g. `us-east-1`.
    pub region: String,
    /// Endpoint URL override (a private endpoint or the simulator); `None` uses the
    /// region's public endpoint.
    pub endpoint_url: Option<String>,
    /// A PEM file with a CA certificate to trust instead of the system's roots (for the
    /// simulator's self-signed certificate).
    pub ca_cert_file: Option<PathBuf>,
    /// Static credentials; `None` uses `credential_files` or else the default AWS
    /// credential chain (environment, profile, web identity / IRSA, container and
    /// instance metadata).
    pub credentials: Option<StaticCredentials>,
    /// Credentials read from a folder's files, read again as they age (a mounted Secret:
    /// see [`credential_files`]).
    pub credential_files: Option<credential_files::CredentialFiles>,
    /// Attempts the SDK itself makes per call (1: no SDK-level retries).
    pub sdk_max_attempts: u32,
    /// Longest wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
}

impl BedrockConfig {
    /// Settings for `region` with every other option at its default.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            endpoint_url: None,
            ca_cert_file: None,
            credentials: None,
            credential_files: None,
            sdk_max_attempts: 1,
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// Region and endpoint taken from an Agent's model settings.
    pub fn from_settings(settings: &ModelSettings) -> Self {
        let mut config = Self::new(settings.region.clone());
        config.endpoint_url = settings.endpoint.clone();
        config
    }

    /// Settings that point at a Bedrock simulator (`switchboard sim`): its endpoint, its
    /// certificate as the only trusted root (`None` over plain HTTP), and fake static
    /// credentials (the simulator ignores signatures).
    pub fn simulator(endpoint_url: &str, ca_cert_file: Option<&std::path::Path>) -> Self {
        let mut config = Self::new("us-east-1");
        config.endpoint_url = Some(endpoint_url.to_owned());
        config.ca_cert_file = ca_cert_file.map(std::path::Path::to_path_buf);
        config.credentials = Some(StaticCredentials {
            access_key_id: "AKIDSIMULATOR".into(),
            secret_access_key: "not-a-secret".into(),
            session_token: None,
        });
        config
    }
}

/// An access key pair (and optional session token).
#[derive(Clone)]
pub struct StaticCredentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"** redacted **")
            .field("session_token", &self.session_token.as_ref().map(|_| "** redacted **"))
            .finish()
    }
}

/// Builds a Bedrock Runtime client from `config`.
pub async fn build_client(config: &BedrockConfig) -> Result<Client, ModelError> {
    let shared = sdk_config(config).await;
    let mut builder = aws_sdk_bedrockruntime::config::Builder::from(&shared)
        .retry_config(RetryConfig::standard().with_max_attempts(config.sdk_max_attempts.max(1)))
        .timeout_config(TimeoutConfig::builder().connect_timeout(config.connect_timeout).build())
        .interceptor(user_agent::ReuseUserAgent::default());
    if let Some(url) = &config.endpoint_url {
        builder = builder.endpoint_url(url);
    }
    if let Some(http) = custom_http_client(config).await? {
        builder = builder.http_client(http);
    }
    Ok(Client::from_conf(builder.build()))
}

/// The AWS settings `config` gives any AWS client: its region, and its static credentials,
/// its credential files or else the default credential chain. (Another service's client,
/// such as `switchboard test`'s Amazon Polly, is built from these as the Bedrock client is.)
pub async fn sdk_config(config: &BedrockConfig) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(Region::new(config.region.clone()));
    if let Some(credentials) = &config.credentials {
        loader = loader.credentials_provider(Credentials::new(
            credentials.access_key_id.clone(),
            credentials.secret_access_key.clone(),
            credentials.session_token.clone(),
            None,
            "switchboard-static",
        ));
    } else if let Some(files) = &config.credential_files {
        loader = loader.credentials_provider(files.clone());
    }
    loader.load().await
}

/// The HTTP client `config` needs instead of the SDK's default: one that trusts its CA
/// file, and connects to a loopback endpoint directly (no proxy); `None` when it needs neither.
pub async fn custom_http_client(config: &BedrockConfig) -> Result<Option<SharedHttpClient>, ModelError> {
    let loopback = config.endpoint_url.as_deref().is_some_and(is_loopback_url);
    if config.ca_cert_file.is_none() && !loopback {
        return Ok(None);
    }
    http_client(config.ca_cert_file.as_deref(), loopback).await.map(Some)
}

/// A Bedrock text model reached through ConverseStream.
#[derive(Clone, Debug)]
pub struct BedrockTextModel {
    client: Client,
}

impl BedrockTextModel {
    /// Builds the client from `config`.
    pub async fn connect(config: &BedrockConfig) -> Result<Self, ModelError> {
        Ok(Self { client: build_client(config).await? })
    }

    /// Wraps an existing client.
    pub fn from_client(client: Client) -> Self {
        Self { client }
    }

    /// The underlying SDK client.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

enum State {
    /// The request, already in the SDK's types (converted when the stream is made, so the
    /// stream holds no second copy of the conversation), or why it cannot be sent.
    Start {
        client: Client,
        model_id: String,
        parts: Result<convert::ConverseParts, ModelError>,
    },
    Streaming {
        receiver: Receiver,
        decoder: StreamDecoder,
    },
    Done,
}

type Receiver = aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver<
    aws_sdk_bedrockruntime::types::ConverseStreamOutput,
    aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError,
>;

impl TextModel for BedrockTextModel {
    fn stream(&self, request: &ModelRequest) -> ModelStream {
        let parts = convert::to_converse(request);
        let state = State::Start { client: self.client.clone(), model_id: request.model_id.clone(), parts };
        Box::pin(futures_util::stream::unfold(state, step))
    }

    fn provider(&self) -> &'static str {
        "bedrock"
    }
}

async fn step(mut state: State) -> Option<(Result<super::ModelEvent, ModelError>, State)> {
    loop {
        state = match state {
            State::Done => return None,
            State::Start { client, model_id, parts } => match start(&client, &model_id, parts).await {
                Ok(receiver) => State::Streaming { receiver, decoder: StreamDecoder::default() },
                Err(error) => return Some((Err(error), State::Done)),
            },
            State::Streaming { mut receiver, mut decoder } => match receiver.recv().await {
                Ok(Some(event)) => match decoder.on_event(event) {
                    Ok(Some(event)) => {
                        return Some((Ok(event), State::Streaming { receiver, decoder }));
                    }
                    Ok(None) => State::Streaming { receiver, decoder },
                    Err(error) => return Some((Err(error), State::Done)),
                },
                Ok(None) if decoder.stopped() => return None,
                Ok(None) => {
                    let message = "the stream ended before the reply was complete".to_owned();
                    return Some((Err(ModelError::StreamInterrupted { message }), State::Done));
                }
                Err(error) => return Some((Err(errors::from_stream_error(error)), State::Done)),
            },
        }
    }
}

async fn start(
    client: &Client,
    model_id: &str,
    parts: Result<convert::ConverseParts, ModelError>,
) -> Result<Receiver, ModelError> {
    let parts = parts?;
    let mut call = client
        .converse_stream()
        .model_id(model_id)
        .set_messages(Some(parts.messages))
        .inference_config(parts.inference);
    if !parts.system.is_empty() {
        call = call.set_system(Some(parts.system));
    }
    if let Some(tool_config) = parts.tool_config {
        call = call.tool_config(tool_config);
    }
    if let Some(fields) = parts.additional {
        call = call.additional_model_request_fields(fields);
    }
    let output = call.send().await.map_err(|e| errors::from_start_error(e, model_id))?;
    Ok(output.stream)
}

/// An HTTPS client trusting only `ca_cert_file` (when given; the system roots otherwise)
/// and, for a loopback endpoint, never going through a proxy: `HTTPS_PROXY` must not
/// capture traffic to a local simulator. Only the Bedrock client uses it; credential
/// providers keep the default client.
async fn http_client(ca_cert_file: Option<&Path>, direct: bool) -> Result<SharedHttpClient, ModelError> {
    let mut context = tls::TlsContext::builder();
    if let Some(path) = ca_cert_file {
        let pem = tokio::fs::read(path).await.map_err(|e| ModelError::Config {
            message: format!("cannot read the CA certificate file {}: {e}", path.display()),
        })?;
        context = context.with_trust_store(tls::TrustStore::empty().with_pem_certificate(pem));
    }
    let context = context.build().map_err(|e| ModelError::Config {
        message: format!("the TLS settings are not usable (CA file {ca_cert_file:?}): {e}"),
    })?;
    Ok(aws_smithy_http_client::Builder::new().build_with_connector_fn(move |settings, components| {
        let mut connector = aws_smithy_http_client::Connector::builder();
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        if direct {
            connector = connector.proxy_config(ProxyConfig::disabled());
        }
        connector
            .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::AwsLc))
            .tls_context(context.clone())
            .build()
    }))
}

/// Whether `url` points at this machine (127.0.0.0/8, ::1 or localhost).
fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    match uri.host() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback_url;

    #[test]
    fn loopback_urls_are_recognised() {
        for url in ["https://127.0.0.1:8443", "http://localhost", "https://[::1]:1"] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in ["https://bedrock-runtime.us-east-1.amazonaws.com", "not a url", "http://10.0.0.1"] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
