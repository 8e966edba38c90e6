//! Amazon Polly's `SynthesizeSpeech` — `POST /v1/speech`, a JSON body, the audio as the
//! response body — so that `switchboard test` can render its `speech:` steps through the
//! real `aws-sdk-polly` client against the simulator, as it does against Amazon Polly when
//! the model is real Nova Sonic.
//!
//! The simulator "speaks" a text as a phrase tone ([`crate::sonic::phrase_tone`]) and gives
//! its own Nova Sonic side the text as that phrase, so a session that sends the audio to
//! the simulated Nova Sonic (through a gateway and a runtime, say) is heard saying exactly
//! those words — the convention of the script's `sonic.phrases`. A text the script already
//! lists keeps the script's id; a new text gets the lowest id that neither the script nor an
//! earlier text has, and keeps it for the simulator's lifetime. There are
//! [`MAX_PHRASE_ID`] ids: past that, a `ServiceQuotaExceededException` says so.
//!
//! The request is checked as Polly checks it: a missing text or voice, a voice, engine,
//! output format or text type outside the service's enumerations (`ValidationException`),
//! a sample rate PCM does not have (`InvalidSampleRateException`), a text over 3,000
//! characters (`TextLengthExceededException`), speech marks with audio
//! (`MarksNotSupportedForFormatException`) and lexicons, of which the simulator has none
//! (`LexiconNotFoundException`). What the simulator cannot make says so as a
//! `ValidationException`: it renders plain text (`TextType: text`) as `pcm` only. Which
//! engines a voice supports is not checked; `LanguageCode` is not used.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use serde::Deserialize;

use super::http::{Body, full_body};
use super::script::sonic::MAX_PHRASE_ID;
use super::sonic::audio::phrase_tone;

/// The operation's path.
pub const PATH: &str = "/v1/speech";
/// The longest text Polly renders in one request, in characters.
pub const MAX_TEXT_CHARS: usize = 3_000;
/// How long a rendered text lasts.
pub const PHRASE_MS: u64 = 1_200;
/// The rendered tone's amplitude (PCM16 units): well above the turn detector's threshold.
const AMPLITUDE: i16 = 8_000;

/// Polly's voices (the `VoiceId` enumeration of its API), separated by spaces.
pub const VOICES: &str = "Aditi Adriano Ambre Amy Andres Aria Arjun Arlet Arthur Astrid Ayanda Beatrice Bianca Brian Burcu \
     Camila Carla Carlos Carmen Carolina Celine Chantal Conchita Cristiano Curtis Daniel Danielle Dora \
     Elin Emma Enrique Ewa Filiz Florian Gabrielle Geraint Giorgio Gregory Gwyneth Hala Hannah Hans \
     Hiujin Hyunduk Ida Ines Isabelle Ivy Jacek Jan Jasmine Jihye Jitka Joanna Joey Justin Kajal Karl \
     Kazuha Kendra Kenneth Kevin Kiara Kimberly Laura Lea Lennart Leo Liam Lisa Liv Lorenzo Lotte Lucia \
     Lupe Mads Maja Marlene Mathieu Matthew Maxim Mia Miguel Mizuki Naja Nate Niamh Nicole Ola Olivia \
     Pedro Penelope Raveena Remi Ricardo Ruben Russell Ruth Sabrina Salli Seoyeon Sergio Sofie Stephen \
     Suvi Takumi Tatyana Thiago Tiffany Tina Tomoko Vicki Vitoria Zayd Zeina Zhiyu";
/// Polly's engines.
pub const ENGINES: &[&str] = &["standard", "neural", "long-form", "generative"];
/// Polly's output formats.
pub const OUTPUT_FORMATS: &[&str] = &["json", "mp3", "ogg_vorbis", "ogg_opus", "pcm", "mulaw", "alaw"];
/// Polly's text types.
pub const TEXT_TYPES: &[&str] = &["ssml", "text"];
/// The sample rates Polly gives PCM in.
pub const PCM_RATES: &[&str] = &["8000", "16000"];

/// A `SynthesizeSpeech` request body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Request {
    engine: Option<String>,
    lexicon_names: Option<Vec<String>>,
    output_format: Option<String>,
    sample_rate: Option<String>,
    speech_mark_types: Option<Vec<String>>,
    text: Option<String>,
    text_type: Option<String>,
    voice_id: Option<String>,
}

/// An error as Polly sends it: a status, `x-amzn-errortype` and `{"message": ...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollyError {
    /// The HTTP status.
    pub status: u16,
    /// The error code, e.g. `ValidationException`.
    pub code: &'static str,
    /// Its message.
    pub message: String,
}

impl PollyError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }

    /// A `ValidationException` (400).
    fn validation(message: impl Into<String>) -> Self {
        Self::new(400, "ValidationException", message)
    }

    /// The validation error for `value` of `field` outside `allowed`, worded as the service's.
    fn not_in(field: &str, value: &str, allowed: &[&str]) -> Self {
        Self::validation(format!(
            "1 validation error detected: Value '{value}' at '{field}' failed to satisfy constraint: \
             Member must satisfy enum value set: [{}]",
            allowed.join(", ")
        ))
    }

    /// The validation error for a missing `field`.
    fn missing(field: &str) -> Self {
        Self::validation(format!(
            "1 validation error detected: Value null at '{field}' failed to satisfy constraint: Member must not be null"
        ))
    }

    /// The HTTP response.
    pub fn into_response(self, request_id: &str) -> http::Response<Body> {
        let body = serde_json::json!({ "message": self.message }).to_string();
        http::Response::builder()
            .status(self.status)
            .header("content-type", "application/json")
            .header("x-amzn-errortype", self.code)
            .header("x-amzn-requestid", request_id)
            .body(full_body(Bytes::from(body)))
            .unwrap_or_else(|_| http::Response::new(full_body(Bytes::from_static(b"{}"))))
    }
}

/// The texts rendered so far and the phrase ids they were given.
#[derive(Debug, Default)]
pub struct Spoken {
    ids: Mutex<BTreeMap<u32, String>>,
}

impl Spoken {
    /// The phrase id of `text`: the script's (`phrases`), an earlier request's, or the
    /// lowest id free in both, now `text`'s.
    pub fn phrase_of(&self, text: &str, phrases: &BTreeMap<u32, String>) -> Result<u32, PollyError> {
        if let Some((id, _)) = phrases.iter().find(|(_, t)| t.as_str() == text) {
            return Ok(*id);
        }
        let mut ids = self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((id, _)) = ids.iter().find(|(_, t)| t.as_str() == text) {
            return Ok(*id);
        }
        let free = (1..=MAX_PHRASE_ID).find(|id| !phrases.contains_key(id) && !ids.contains_key(id));
        let Some(id) = free else {
            return Err(PollyError::new(
                402,
                "ServiceQuotaExceededException",
                format!(
                    "The simulator tells {MAX_PHRASE_ID} phrases apart and every one is taken (by its script's \
                     sonic.phrases and earlier texts); it cannot render another distinct text. Speak fewer \
                     distinct texts, or restart the simulator."
                ),
            ));
        };
        ids.insert(id, text.to_owned());
        Ok(id)
    }

    /// The text rendered as phrase `id`, if any.
    pub fn text_of(&self, id: u32) -> Option<String> {
        self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id).cloned()
    }

    /// Every text rendered, by phrase id.
    pub fn snapshot(&self) -> BTreeMap<u32, String> {
        self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Answers one `SynthesizeSpeech` request whose body is `body`.
pub fn handle(body: &[u8], spoken: &Spoken, phrases: &BTreeMap<u32, String>, request_id: &str) -> http::Response<Body> {
    match render(body, spoken, phrases) {
        Ok((audio, characters)) => {
            tracing::debug!(characters, bytes = audio.len(), "SynthesizeSpeech rendered a phrase tone");
            http::Response::builder()
                .status(200)
                .header("content-type", "audio/pcm")
                .header("x-amzn-RequestCharacters", characters)
                .header("x-amzn-requestid", request_id)
                .body(full_body(Bytes::from(audio)))
                .unwrap_or_else(|_| http::Response::new(full_body(Bytes::new())))
        }
        Err(error) => {
            tracing::info!(code = error.code, message = %error.message, "SynthesizeSpeech refused");
            error.into_response(request_id)
        }
    }
}

/// The audio for the request in `body` and the characters it counts.
fn render(body: &[u8], spoken: &Spoken, phrases: &BTreeMap<u32, String>) -> Result<(Vec<u8>, usize), PollyError> {
    let request: Request = serde_json::from_slice(body)
        .map_err(|e| PollyError::new(400, "SerializationException", format!("The request body is not valid: {e}")))?;
    let text = request.text.ok_or_else(|| PollyError::missing("text"))?;
    let voice = request.voice_id.ok_or_else(|| PollyError::missing("voiceId"))?;
    let format = request.output_format.ok_or_else(|| PollyError::missing("outputFormat"))?;
    let voices: Vec<&str> = VOICES.split_whitespace().collect();
    if !voices.contains(&voice.as_str()) {
        return Err(PollyError::not_in("voiceId", &voice, &voices));
    }
    if !OUTPUT_FORMATS.contains(&format.as_str()) {
        return Err(PollyError::not_in("outputFormat", &format, OUTPUT_FORMATS));
    }
    if let Some(engine) = request.engine.as_deref().filter(|e| !ENGINES.contains(e)) {
        return Err(PollyError::not_in("engine", engine, ENGINES));
    }
    let text_type = request.text_type.as_deref().unwrap_or("text");
    if !TEXT_TYPES.contains(&text_type) {
        return Err(PollyError::not_in("textType", text_type, TEXT_TYPES));
    }
    if request.speech_mark_types.as_ref().is_some_and(|m| !m.is_empty()) && format != "json" {
        return Err(PollyError::new(
            400,
            "MarksNotSupportedForFormatException",
            format!("Speech marks are not supported for OutputFormat {format}; they are only available in json."),
        ));
    }
    if let Some(name) = request.lexicon_names.as_ref().and_then(|names| names.first()) {
        return Err(PollyError::new(404, "LexiconNotFoundException", format!("Lexicon not found: {name}")));
    }
    if format != "pcm" {
        return Err(PollyError::validation(format!(
            "The simulator renders OutputFormat pcm only, not {format}: ask for pcm."
        )));
    }
    let rate = request.sample_rate.unwrap_or_else(|| "16000".into());
    if !PCM_RATES.contains(&rate.as_str()) {
        return Err(PollyError::new(
            400,
            "InvalidSampleRateException",
            format!("The sample rate {rate} is not valid for pcm: give one of {}.", PCM_RATES.join(", ")),
        ));
    }
    if text_type != "text" {
        return Err(PollyError::validation("The simulator renders TextType text only, not SSML."));
    }
    let characters = text.chars().count();
    if characters > MAX_TEXT_CHARS {
        return Err(PollyError::new(
            400,
            "TextLengthExceededException",
            format!("The text has {characters} characters; the limit is {MAX_TEXT_CHARS}."),
        ));
    }
    let words = text.trim();
    if words.is_empty() {
        return Err(PollyError::validation("The text holds no words to speak."));
    }
    let id = spoken.phrase_of(words, phrases)?;
    let tone = phrase_tone(id, PHRASE_MS, AMPLITUDE);
    // 8 kHz: every other sample of the 16 kHz tone (the highest tone, 3,900 Hz, stays
    // below 4 kHz).
    let audio = if rate == "8000" { tone.chunks_exact(4).flat_map(|s| [s[0], s[1]]).collect() } else { tone };
    Ok((audio, characters))
}

#[cfg(test)]
#[path = "polly_tests.rs"]
mod tests;
