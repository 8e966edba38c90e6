//! `speech:` steps rendered by Amazon Polly where the simulator's phrase tones cannot be
//! used: against real Nova Sonic (`switchboard test --bedrock`) and against a gateway. Each
//! distinct text of a folder's scenarios is rendered once, before they run, by
//! `SynthesizeSpeech` (`OutputFormat: pcm`, `SampleRate: 16000` — the session's input
//! format) in the voice and engine given (default [`DEFAULT_VOICE`], [`DEFAULT_ENGINE`]),
//! through the real `aws-sdk-polly` client: the region's public endpoint, or another one
//! (`--speech-endpoint-url`), such as the Bedrock simulator's, which renders a text as the
//! phrase tone its own Nova Sonic side then hears as that text (see
//! [`switchboard_sim::polly`]).
//!
//! What comes back is bounded: at most [`super::speech::MAX_WAV_SECONDS`] of audio per text,
//! whole 16-bit samples. A text Polly cannot render fails the step that speaks it, with
//! Polly's error, when the scenario reaches it (see [`super::run`]).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_polly::Client;
use aws_sdk_polly::config::retry::RetryConfig;
use aws_sdk_polly::config::timeout::TimeoutConfig;
use aws_sdk_polly::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_polly::types::{Engine, OutputFormat, TextType, VoiceId};
use futures_util::StreamExt;
use switchboard_models::bedrock::{self, BedrockConfig};

use super::speech::{INPUT_RATE, MAX_WAV_SECONDS, SpeechError, with_trailing_silence};

/// The voice when none is given: Joanna (US English), which has the standard and the
/// neural engine.
pub const DEFAULT_VOICE: &str = "Joanna";
/// The engine when none is given.
pub const DEFAULT_ENGINE: &str = "neural";
/// Texts rendered at once.
const CONCURRENCY: usize = 4;
/// The longest one rendering may take, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts per text (the SDK's standard retries: throttling, 5xx, connection errors).
const MAX_ATTEMPTS: u32 = 3;

/// How to reach Amazon Polly and which voice speaks.
#[derive(Clone, Debug)]
pub struct PollySettings {
    /// A Polly voice id, e.g. `Joanna`.
    pub voice: String,
    /// `standard`, `neural`, `long-form` or `generative` (the voice must have it).
    pub engine: String,
    /// Region, endpoint, trusted CA and credentials (the same settings as a Bedrock client's).
    pub aws: BedrockConfig,
}

impl Default for PollySettings {
    fn default() -> Self {
        Self { voice: DEFAULT_VOICE.into(), engine: DEFAULT_ENGINE.into(), aws: BedrockConfig::new("us-east-1") }
    }
}

/// What rendering gave each text: its audio (16 kHz PCM16, trailing silence included), or
/// why there is none.
pub type Rendered = BTreeMap<String, Result<Vec<u8>, String>>;

/// An Amazon Polly client with its voice.
#[derive(Clone, Debug)]
pub struct Polly {
    client: Client,
    voice: VoiceId,
    engine: Engine,
}

impl Polly {
    /// The client for `settings` (no request is made).
    pub async fn connect(settings: &PollySettings) -> Result<Self, SpeechError> {
        let aws = &settings.aws;
        let shared = bedrock::sdk_config(aws).await;
        let mut builder = aws_sdk_polly::config::Builder::from(&shared)
            .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(aws.connect_timeout)
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            );
        if let Some(url) = &aws.endpoint_url {
            builder = builder.endpoint_url(url);
        }
        if let Some(http) = bedrock::custom_http_client(aws).await.map_err(|e| SpeechError::Polly(e.to_string()))? {
            builder = builder.http_client(http);
        }
        Ok(Self {
            client: Client::from_conf(builder.build()),
            voice: VoiceId::from(settings.voice.as_str()),
            engine: Engine::from(settings.engine.as_str()),
        })
    }

    /// Renders each distinct text of `texts`, four at a time.
    pub async fn render_all<'a>(&self, texts: impl IntoIterator<Item = &'a str>) -> Rendered {
        let mut distinct: Vec<&str> = texts.into_iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        futures_util::stream::iter(distinct)
            .map(|text| async move { (text.to_owned(), self.render(text).await) })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }

    /// The audio of `text`, with the trailing silence, or why there is none.
    pub async fn render(&self, text: &str) -> Result<Vec<u8>, String> {
        let request = self
            .client
            .synthesize_speech()
            .text(text)
            .text_type(TextType::Text)
            .voice_id(self.voice.clone())
            .engine(self.engine.clone())
            .output_format(OutputFormat::Pcm)
            .sample_rate(INPUT_RATE.to_string());
        let output = request.send().await.map_err(|e| format!("Amazon Polly could not render it: {}", describe(&e)))?;
        if let Some(kind) = output.content_type().filter(|t| !t.starts_with("audio/pcm")) {
            return Err(format!("Amazon Polly answered {kind}, not audio/pcm"));
        }
        let mut stream = output.audio_stream;
        let limit = usize::try_from(MAX_WAV_SECONDS * u64::from(INPUT_RATE) * 2).unwrap_or(usize::MAX);
        let mut pcm = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("Amazon Polly's audio broke off: {}", DisplayErrorContext(&e)))?;
            if pcm.len() + chunk.len() > limit {
                return Err(format!(
                    "Amazon Polly's audio for it is longer than {MAX_WAV_SECONDS} s: shorten the text"
                ));
            }
            pcm.extend_from_slice(&chunk);
        }
        if pcm.is_empty() || pcm.len() % 2 != 0 {
            return Err(format!("Amazon Polly's audio is not 16-bit PCM ({} bytes)", pcm.len()));
        }
        Ok(with_trailing_silence(pcm))
    }
}

/// A Polly error as the report shows it: the service's code and message, or what failed
/// on the way (connection, timeout) with its causes.
fn describe<E, R>(error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error {
        SdkError::ServiceError(service) => {
            let e = service.err();
            format!("{}: {}", e.code().unwrap_or("an unnamed error"), e.message().unwrap_or("(no message)"))
        }
        other => DisplayErrorContext(other).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server answering every request with `content_type` and `body`, as Polly's endpoint would.
    async fn endpoint(content_type: &'static str, body: Vec<u8>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The request's headers, then its JSON body (Content-Length bytes).
                while let Ok(n @ 1..) = socket.read(&mut buf).await {
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            }
        });
        url
    }

    async fn render(content_type: &'static str, body: Vec<u8>) -> Result<Vec<u8>, String> {
        let aws = BedrockConfig::simulator(&endpoint(content_type, body).await, None);
        let polly = Polly::connect(&PollySettings { aws, ..PollySettings::default() }).await.expect("a client");
        polly.render("My balance please").await
    }

    #[tokio::test]
    async fn what_polly_sends_back_is_bounded_and_must_be_pcm() {
        let ok = render("audio/pcm", vec![1; 3_200]).await.expect("rendered");
        let silence = usize::try_from(super::super::speech::TRAILING_SILENCE_MS * 32).expect("fits");
        assert_eq!(ok.len(), 3_200 + silence, "the audio, then the trailing silence");
        assert!(ok[..3_200].iter().all(|b| *b == 1) && ok[3_200..].iter().all(|b| *b == 0));
        let long = vec![0; usize::try_from(MAX_WAV_SECONDS * 32_000).expect("fits") + 2];
        let error = render("audio/pcm", long).await.expect_err("too long");
        assert!(error.contains("longer than 60 s"), "{error}");
        let error = render("audio/mpeg", vec![0; 100]).await.expect_err("not PCM");
        assert!(error.contains("answered audio/mpeg, not audio/pcm"), "{error}");
        let error = render("audio/pcm", vec![0; 3]).await.expect_err("half a sample");
        assert!(error.contains("not 16-bit PCM (3 bytes)"), "{error}");
        let error = render("audio/pcm", Vec::new()).await.expect_err("nothing");
        assert!(error.contains("(0 bytes)"), "{error}");
    }
}
