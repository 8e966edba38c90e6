//! Speech steps: a caller's turn as audio instead of typed text.
//!
//! - `audio: caller.wav` — a WAV file (16 kHz, mono, 16-bit PCM; at most a minute), its path
//!   relative to the scenario file, sent as it is followed by 2.5 s of silence so the
//!   model hears the turn end.
//! - `speech: I'd like to check my balance` — text rendered to speech. Against local mode's
//!   simulator, each distinct text of a suite gets a phrase id, its audio is that phrase's
//!   tone (the simulator's convention, [`switchboard_sim::sonic::phrase_tone`]), and the
//!   simulator is started with a script whose `sonic.phrases` maps the id back to the text,
//!   so the model hears exactly the words written; a text the script already lists keeps
//!   its id. Against real Nova Sonic (`--bedrock`) and a gateway, whose simulator's script
//!   the runner cannot extend, Amazon Polly renders the text ([`super::polly`]: the voice,
//!   engine, region and endpoint are `switchboard test`'s `--speech-*` options); pointed at
//!   the Bedrock simulator behind a gateway, its Polly endpoint gives the text a phrase tone
//!   that simulator's Nova Sonic then hears as those words.
//!
//! A scenario with a speech step opens its session with `modalities: [audio, text]`, so a
//! voice or hybrid agent serves it over (simulated) Nova Sonic; typed steps in it are typed
//! text into the same session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Sample rate of the caller's audio (the session's default input format).
pub const INPUT_RATE: u32 = 16_000;
/// How long a rendered phrase lasts.
pub const PHRASE_MS: u64 = 1_200;
/// Silence after each spoken turn, so the end of the utterance is heard (Nova Sonic's
/// longest end-of-turn pause, `LOW` sensitivity, is 2 s).
pub const TRAILING_SILENCE_MS: u64 = 2_500;
/// Audio per WebSocket frame.
pub const CHUNK_MS: u64 = 100;
/// The longest WAV a step may send.
pub const MAX_WAV_SECONDS: u64 = 60;
/// Phrase ids the simulator knows (`0..=35`); the runner assigns 1 onwards.
pub const MAX_PHRASE_ID: u32 = 35;

/// A speech step cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// The WAV file cannot be read.
    #[error("{path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a WAV the session takes.
    #[error("{path}: {why}")]
    Wav {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to give instead.
        why: String,
    },
    /// More distinct `speech:` texts than the simulator has phrase tones.
    #[error("{0} distinct speech: texts; the simulator tells at most {MAX_PHRASE_ID} apart: split the suite")]
    TooManyPhrases(usize),
    /// The simulator's script is not YAML with a usable `sonic.phrases`.
    #[error("the simulator's script: {0}")]
    Script(String),
    /// The Amazon Polly client cannot be made (e.g. its CA file cannot be read).
    #[error("Amazon Polly, for the speech: steps: {0}")]
    Polly(String),
}

/// Reads a 16 kHz mono PCM16 WAV file: its samples, little-endian.
pub fn read_wav(path: &Path) -> Result<Vec<u8>, SpeechError> {
    let bytes = std::fs::read(path).map_err(|source| SpeechError::Read { path: path.to_owned(), source })?;
    parse_wav(&bytes).map_err(|why| SpeechError::Wav { path: path.to_owned(), why })
}

fn parse_wav(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let u16_at = |b: &[u8], at: usize| b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]));
    let u32_at = |b: &[u8], at: usize| b.get(at..at + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    if bytes.get(0..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WAVE") {
        return Err("not a WAV file (no RIFF/WAVE header)".into());
    }
    let (mut at, mut format, mut data) = (12usize, None, None);
    while let (Some(id), Some(len)) = (bytes.get(at..at + 4), u32_at(bytes, at + 4)) {
        let body = at + 8;
        let end = body.saturating_add(len as usize).min(bytes.len());
        match id {
            b"fmt " => {
                format = Some((
                    u16_at(bytes, body),
                    u16_at(bytes, body + 2),
                    u32_at(bytes, body + 4),
                    u16_at(bytes, body + 14),
                ))
            }
            b"data" => data = Some(&bytes[body.min(end)..end]),
            _ => {}
        }
        at = end + (len as usize % 2);
    }
    match format {
        Some((Some(1), Some(1), Some(INPUT_RATE), Some(16))) => {}
        Some((codec, channels, rate, bits)) => {
            return Err(format!(
                "is {codec:?} codec, {channels:?} channel(s), {rate:?} Hz, {bits:?} bits; give 16-bit PCM (codec 1), \
                 mono, 16000 Hz (e.g. `sox in.wav -r 16000 -c 1 -b 16 out.wav`)"
            ));
        }
        None => return Err("has no fmt chunk".into()),
    }
    let data = data.ok_or("has no data chunk")?;
    if data.len() as u64 > MAX_WAV_SECONDS * u64::from(INPUT_RATE) * 2 {
        return Err(format!("is longer than {MAX_WAV_SECONDS} s"));
    }
    if data.is_empty() {
        return Err("holds no audio".into());
    }
    Ok(data.to_vec())
}

/// `pcm` followed by [`TRAILING_SILENCE_MS`] of silence.
pub fn with_trailing_silence(mut pcm: Vec<u8>) -> Vec<u8> {
    let samples = TRAILING_SILENCE_MS * u64::from(INPUT_RATE) / 1000;
    pcm.resize(pcm.len() + usize::try_from(samples * 2).unwrap_or(0), 0);
    pcm
}

/// The audio of a suite's `speech:` texts: their phrase ids, when local mode's simulator
/// hears them, or what Amazon Polly rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Phrases {
    ids: BTreeMap<String, u32>,
    rendered: BTreeMap<String, Result<Vec<u8>, String>>,
}

impl Phrases {
    /// Texts Amazon Polly rendered (see [`super::polly::Polly::render_all`]).
    pub fn rendered(rendered: BTreeMap<String, Result<Vec<u8>, String>>) -> Self {
        Self { ids: BTreeMap::new(), rendered }
    }

    /// The audio of `text` (trailing silence included), or why it has none; `None` when
    /// nothing here renders it.
    pub fn audio(&self, text: &str) -> Option<Result<Vec<u8>, String>> {
        match self.ids.get(text) {
            Some(id) => Some(Ok(phrase_audio(*id))),
            None => self.rendered.get(text).cloned(),
        }
    }

    /// Ids for `texts`: the id the script's `taken` phrases give a text already, else the
    /// lowest free id from 1.
    pub fn assign<'a>(
        texts: impl IntoIterator<Item = &'a str>,
        taken: &BTreeMap<u32, String>,
    ) -> Result<Self, SpeechError> {
        let mut ids = BTreeMap::new();
        let mut next = 1;
        for text in texts {
            if ids.contains_key(text) {
                continue;
            }
            let id = match taken.iter().find(|(_, t)| t.as_str() == text) {
                Some((id, _)) => *id,
                None => {
                    while taken.contains_key(&next) || ids.values().any(|v| *v == next) {
                        next += 1;
                    }
                    if next > MAX_PHRASE_ID {
                        return Err(SpeechError::TooManyPhrases(ids.len() + 1));
                    }
                    next
                }
            };
            ids.insert(text.to_owned(), id);
        }
        Ok(Self { ids, rendered: BTreeMap::new() })
    }

    /// The phrase id of `text`.
    pub fn get(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.rendered.is_empty()
    }

    /// The phrases a simulator script (YAML) already has.
    pub fn taken(script: &str) -> Result<BTreeMap<u32, String>, SpeechError> {
        let value: serde_yaml::Value = serde_yaml::from_str(script).map_err(|e| SpeechError::Script(e.to_string()))?;
        match value.get("sonic").and_then(|s| s.get("phrases")) {
            None => Ok(BTreeMap::new()),
            Some(p) => {
                serde_yaml::from_value(p.clone()).map_err(|e| SpeechError::Script(format!("sonic.phrases: {e}")))
            }
        }
    }

    /// `script` (a simulator script, YAML) with these phrases in its `sonic.phrases`.
    pub fn add_to_script(&self, script: &str) -> Result<String, SpeechError> {
        let bad = |e: &dyn std::fmt::Display| SpeechError::Script(e.to_string());
        let mut value: serde_yaml::Value = serde_yaml::from_str(script).map_err(|e| bad(&e))?;
        let root = value.as_mapping_mut().ok_or_else(|| bad(&"not a mapping"))?;
        let sonic = root
            .entry("sonic".into())
            .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()))
            .as_mapping_mut()
            .ok_or_else(|| bad(&"sonic is not a mapping"))?;
        let phrases = sonic
            .entry("phrases".into())
            .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()))
            .as_mapping_mut()
            .ok_or_else(|| bad(&"sonic.phrases is not a mapping"))?;
        for (text, id) in &self.ids {
            phrases.insert((*id).into(), text.as_str().into());
        }
        serde_yaml::to_string(&value).map_err(|e| bad(&e))
    }
}

/// The audio of phrase `id` for the simulator, with the trailing silence.
#[cfg(feature = "local")]
pub fn phrase_audio(id: u32) -> Vec<u8> {
    with_trailing_silence(switchboard_sim::sonic::phrase_tone(id, PHRASE_MS, 8_000))
}

/// Without the simulator in the build there is no phrase tone to render.
#[cfg(not(feature = "local"))]
pub fn phrase_audio(_id: u32) -> Vec<u8> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(channels: u16, rate: u32, samples: &[i16]) -> Vec<u8> {
        let data: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut out = b"RIFF".to_vec();
        out.extend(&(36 + data.len() as u32).to_le_bytes());
        out.extend(b"WAVEfmt ");
        out.extend(&16u32.to_le_bytes());
        out.extend(&1u16.to_le_bytes());
        out.extend(&channels.to_le_bytes());
        out.extend(&rate.to_le_bytes());
        out.extend(&(rate * 2 * u32::from(channels)).to_le_bytes());
        out.extend(&(2 * channels).to_le_bytes());
        out.extend(&16u16.to_le_bytes());
        out.extend(b"data");
        out.extend(&(data.len() as u32).to_le_bytes());
        out.extend(data);
        out
    }

    #[test]
    fn a_16_khz_mono_wav_is_read_and_others_are_refused_saying_what_to_give() {
        assert_eq!(parse_wav(&wav(1, 16_000, &[1, -2, 3])), Ok(vec![1, 0, 254, 255, 3, 0]));
        let stereo = parse_wav(&wav(2, 16_000, &[1, 2])).expect_err("stereo");
        assert!(stereo.contains("Some(2) channel(s)") && stereo.contains("mono, 16000 Hz"), "{stereo}");
        assert!(parse_wav(&wav(1, 44_100, &[1])).expect_err("44.1 kHz").contains("Some(44100) Hz"));
        assert!(parse_wav(b"OggS....").expect_err("ogg").contains("not a WAV"));
        assert!(parse_wav(&wav(1, 16_000, &[])).expect_err("empty").contains("no audio"));
    }

    #[test]
    fn phrases_reuse_the_scripts_ids_and_fill_the_free_ones() {
        let taken: BTreeMap<u32, String> = [(1, "Stop".to_owned()), (2, "Hello".to_owned())].into();
        let p = Phrases::assign(["Hello", "My balance please", "Hello", "Bye"], &taken).expect("assigned");
        assert_eq!((p.get("Hello"), p.get("My balance please"), p.get("Bye")), (Some(2), Some(3), Some(4)));
        let script = p.add_to_script("timing: {}\nsonic:\n  phrases: {1: Stop, 2: Hello}\n").expect("script");
        let back = Phrases::taken(&script).expect("phrases");
        assert_eq!(back.get(&3).map(String::as_str), Some("My balance please"));
        assert_eq!(back.get(&1).map(String::as_str), Some("Stop"));
        let texts: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        assert!(Phrases::assign(texts.iter().map(String::as_str), &BTreeMap::new()).is_err());
    }
}
