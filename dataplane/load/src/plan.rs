//! What the callers say: the turns of scenario files (`switchboard test`'s, e.g.
//! `examples/banking/tests/*.yaml`), caller `i` playing file `i mod n`. A voice caller
//! speaks `speech:` steps (rendered by Amazon Polly — or by the Bedrock simulator's Polly
//! endpoint, whose Nova Sonic then hears the very words) and `audio:` WAV files, and types
//! `say:` steps into the same session; a text caller types `say:` and `speech:` texts. Only
//! the turns are used: the scenario's expectations are `switchboard test`'s business, except
//! its consent answers, which the caller gives as the scenario does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchboard_scenario::file::{ConsentAnswer, ScenarioFile};
use switchboard_scenario::polly::{Polly, PollySettings};
use switchboard_scenario::speech;

/// Whether callers speak or type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sessions with audio: 20 ms frames in real time, speech steps spoken.
    Voice,
    /// Text sessions: every step typed.
    Text,
}

impl Mode {
    /// `voice` or `text`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Voice => "voice",
            Self::Text => "text",
        }
    }
}

/// One turn of the caller.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Typed text.
    Text(String),
    /// Speech: 16 kHz PCM16 mono, the voiced part only (silence follows by itself).
    Speech(Arc<[u8]>),
}

/// A conversation callers play.
#[derive(Clone, Debug)]
pub struct Conversation {
    /// The scenario file.
    pub path: PathBuf,
    /// The agent to start with (`None`: the gateway's default).
    pub agent: Option<String>,
    /// The turns, each with the consent answers it gives, in order (tool, allow).
    pub turns: Vec<(Turn, Vec<(String, bool)>)>,
}

/// The conversations could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A scenario file is unusable.
    #[error(transparent)]
    File(#[from] switchboard_scenario::file::FileError),
    /// No scenario files were given.
    #[error("no scenario files: give one or more with --scenario (e.g. examples/banking/tests/balance.yaml)")]
    NoScenarios,
    /// A scenario has no steps.
    #[error("{0}: the scenario has no steps, so a caller would say nothing")]
    NoSteps(PathBuf),
    /// A text caller was given audio.
    #[error("{path}: step {step} is a WAV file (audio:), which a text caller cannot type; use --mode voice")]
    AudioInText {
        /// The file.
        path: PathBuf,
        /// The step, from 1.
        step: usize,
    },
    /// Speech could not be prepared.
    #[error(transparent)]
    Speech(#[from] speech::SpeechError),
    /// Polly could not render a text.
    #[error("{path}: speech: {text:?}: Amazon Polly could not render it: {why}")]
    Render {
        /// The file.
        path: PathBuf,
        /// The text.
        text: String,
        /// Why.
        why: String,
    },
    /// The audio is silent, so no turn would ever end.
    #[error("{path}: step {step}: the audio is silent")]
    Silent {
        /// The file.
        path: PathBuf,
        /// The step, from 1.
        step: usize,
    },
}

/// Reads `paths` and prepares their turns for `mode`: in voice mode, the `speech:` texts
/// are rendered by Polly as `polly` says (each distinct text once).
pub async fn prepare(paths: &[PathBuf], mode: Mode, polly: &PollySettings) -> Result<Vec<Conversation>, PlanError> {
    if paths.is_empty() {
        return Err(PlanError::NoScenarios);
    }
    let files = paths.iter().map(|p| ScenarioFile::read(p)).collect::<Result<Vec<_>, _>>()?;
    let texts: Vec<&str> =
        files.iter().flat_map(|f| f.scenario.steps.iter().filter_map(|s| s.speech.as_deref())).collect();
    let rendered = if mode == Mode::Voice && !texts.is_empty() {
        Polly::connect(polly).await?.render_all(texts).await
    } else {
        Default::default()
    };
    let mut conversations = Vec::new();
    for file in &files {
        if file.scenario.steps.is_empty() {
            return Err(PlanError::NoSteps(file.path.clone()));
        }
        let mut turns = Vec::new();
        for (i, step) in file.scenario.steps.iter().enumerate() {
            let turn = turn(file, i, mode, &rendered)?;
            let consent =
                step.expect.consent.iter().map(|c| (c.tool.clone(), c.answer == ConsentAnswer::Allow)).collect();
            turns.push((turn, consent));
        }
        conversations.push(Conversation { path: file.path.clone(), agent: file.scenario.agent.clone(), turns });
    }
    Ok(conversations)
}

fn turn(
    file: &ScenarioFile,
    i: usize,
    mode: Mode,
    rendered: &switchboard_scenario::polly::Rendered,
) -> Result<Turn, PlanError> {
    let step = &file.scenario.steps[i];
    let path = || file.path.clone();
    if let Some(wav) = &step.audio {
        if mode == Mode::Text {
            return Err(PlanError::AudioInText { path: path(), step: i + 1 });
        }
        let pcm = speech::read_wav(&file.path.parent().unwrap_or(Path::new(".")).join(wav))?;
        return voiced(pcm).ok_or(PlanError::Silent { path: path(), step: i + 1 });
    }
    match (&step.speech, mode) {
        (Some(text), Mode::Voice) => match rendered.get(text.as_str()) {
            Some(Ok(pcm)) => voiced(pcm.clone()).ok_or(PlanError::Silent { path: path(), step: i + 1 }),
            Some(Err(why)) => Err(PlanError::Render { path: path(), text: text.clone(), why: why.clone() }),
            None => Err(PlanError::Render { path: path(), text: text.clone(), why: "nothing rendered it".into() }),
        },
        (Some(text), Mode::Text) => Ok(Turn::Text(text.clone())),
        (None, _) => Ok(Turn::Text(step.say.clone().unwrap_or_default())),
    }
}

/// `pcm` without its trailing silence (the caller sends silence after it anyway), or
/// `None` when all of it is silent.
fn voiced(mut pcm: Vec<u8>) -> Option<Turn> {
    let end = pcm.chunks_exact(2).rposition(|s| s != [0, 0])?;
    pcm.truncate((end + 1) * 2);
    Some(Turn::Speech(pcm.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_loses_its_trailing_silence_and_silence_is_refused() {
        let Some(Turn::Speech(pcm)) = voiced(vec![0, 0, 1, 0, 0, 2, 0, 0, 0, 0]) else { panic!("speech") };
        assert_eq!(&pcm[..], &[0, 0, 1, 0, 0, 2]);
        assert!(voiced(vec![0; 64]).is_none());
    }
}
