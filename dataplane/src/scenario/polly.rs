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
