//! What a voice session does with each Nova Sonic event: audio and SPECULATIVE text go
//! straight to the client (they never touch the core) — unless the user cancelled the
//! reply ([`Relay::set_muted`]); FINAL texts, tool calls, interruptions and the ends of
//! completions become core [`Input`]s, and so does what became audible: the start of the
//! caller's transcript (the model took their turn as ended) and the start and end of a
//! reply's audio; usage and stream restarts become metrics and protocol messages. Also
//! times the first reply audio after the user's last voiced input (time to first audio).
//! Reply audio leaves in the session's output format (`session_start.audio.output`):
//! Nova Sonic's 24 kHz PCM16 passes as it came, any other format is converted
//! ([`Encoder`]); each chunk says its format. A reply cut off by a barge-in is reported to
//! the core with its SPECULATIVE text, the audio sent of it and the voice's pace measured
//! on the session's whole replies ([`VoiceInput::ReplyCut`]), so the part heard is kept.
//! A reply cut because the model's stream was lost ([`SonicEvent::ReplyCut`]) is another
//! matter: the client is told to stop playing it (`bidi_interruption`, not a barge-in: no
//! speech started, none counted), nothing of it enters the conversation, and the turn goes
//! on to the reply the replacement stream is asked for — or, when the words are not asked
//! again, ends as interrupted.

use std::collections::HashMap;
use std::time::Instant;

use switchboard_core::audio::{Encoder, Format};
use switchboard_core::protocol::{
    AudioFormat, ErrorCode, ServerMessage, StopReason as Stop, TokensByModality, TranscriptRole,
};
use switchboard_core::{Activity, Input, VoiceInput};
use switchboard_models::ToolUse;
use switchboard_models::sonic::{ContentKind, GenerationStage, Role, SonicEvent, StopReason};

/// What one Sonic event asks of the adapter.
#[derive(Debug, Default)]
pub struct Relayed {
    /// Messages for the client, in order.
    pub send: Vec<ServerMessage>,
    /// Inputs for the core, in order.
    pub inputs: Vec<Input>,
    /// Time from the end of the user's input to this first reply audio, if it is that.
    pub first_audio_after: Option<std::time::Duration>,
    /// Tokens reported (delta), for the metrics.
    pub usage: Option<TokensByModality>,
    /// A restart of the model stream, with its reason label.
    pub restart: Option<&'static str>,
    /// A reply the lost stream owed: whether its words are asked again.
    pub reply_cut: Option<bool>,
    /// The session failed for good: `(bidi_error code, error type label, message)`.
    pub failed: Option<(ErrorCode, &'static str, String)>,
}

/// The text of one open content block.
#[derive(Debug)]
struct OpenText {
    user: bool,
    stage: Option<GenerationStage>,
    text: String,
}

/// Per-session relay state.
#[derive(Debug)]
pub struct Relay {
    /// Reply audio to the client's format.
    encoder: Encoder,
    /// That format, as each chunk says it.
    format: AudioFormat,
    texts: HashMap<String, OpenText>,
    /// When the user's input last ended (last voiced frame, or typed text), while no
    /// reply audio has come since.
    awaiting_audio: Option<Instant>,
    /// The reply audio content under way.
    audio: Option<String>,
    /// The user cancelled: the model's output is not passed on.
    muted: bool,
    /// The reply under way (no FINAL text yet): its SPECULATIVE text and audio samples sent.
    segment: (String, u64),
    /// Characters and audio samples of the session's whole replies: the voice's pace.
    pace: (u64, u64),
}

/// The pace assumed before a whole reply was measured: 70 ms a character (about 150
/// words a minute).
const DEFAULT_US_PER_CHAR: u64 = 70_000;

impl Default for Relay {
    fn default() -> Self {
        Self::new(Format::MODEL_OUTPUT)
    }
}

impl Relay {
    /// A relay whose reply audio leaves in `output`.
    pub fn new(output: Format) -> Self {
        Self {
            encoder: Encoder::new(output),
            format: output.to_wire(),
            texts: HashMap::new(),
            awaiting_audio: None,
            audio: None,
            muted: false,
            segment: (String::new(), 0),
            pace: (0, 0),
        }
    }

    /// The user's audio had a voiced frame, or they typed: the next reply audio counts
    /// towards time to first audio from now.
    pub fn user_input(&mut self, at: Instant) {
        self.awaiting_audio = Some(at);
    }

    /// Whether the model's output is held back (the core's word: a cancelled reply).
    pub fn set_muted(&mut self, muted: bool) {
        self.muted = muted;
    }

    /// Microseconds the voice takes per character, from the session's whole replies.
    fn us_per_char(&self) -> u64 {
        let (chars, samples) = self.pace;
        if chars == 0 {
            return DEFAULT_US_PER_CHAR;
        }
        samples * 1_000_000 / u64::from(Format::MODEL_OUTPUT.rate) / chars
    }

    /// Maps one event.
    pub fn event(&mut self, event: SonicEvent) -> Relayed {
        let mut out = Relayed::default();
        match event {
            SonicEvent::ContentStart { content_id, kind: ContentKind::Text, role, stage } => {
                if role == Role::User {
                    // The model took the caller's turn as ended: their transcript follows.
                    out.inputs.push(Input::Voice(VoiceInput::Activity(Activity::SpeechStopped)));
                }
                if matches!(role, Role::User | Role::Assistant) {
                    self.texts.insert(content_id, OpenText { user: role == Role::User, stage, text: String::new() });
                }
            }
            SonicEvent::ContentStart { content_id, kind: ContentKind::Audio, role: Role::Assistant, .. } => {
                self.audio = Some(content_id);
                if !self.muted {
                    out.inputs.push(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)));
                }
            }
            SonicEvent::ContentEnd { content_id, kind: ContentKind::Audio, .. } => {
                if self.audio.as_ref() == Some(&content_id) {
                    self.audio = None;
                    out.inputs.push(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded)));
                }
            }
            SonicEvent::Text { content_id, text, .. } => {
                if let Some(open) = self.texts.get_mut(&content_id) {
                    if !open.user && open.stage == Some(GenerationStage::Speculative) && !self.muted {
                        self.segment.0.push_str(&text);
                        out.send.push(ServerMessage::BidiTranscriptStream {
                            role: TranscriptRole::Assistant,
                            text: text.clone(),
                            delta: true,
                            is_final: false,
                            input_id: None,
                        });
                    }
                    open.text.push_str(&text);
                }
            }
            SonicEvent::ContentEnd { content_id, stop_reason, .. } => {
                if let Some(open) = self.texts.remove(&content_id) {
                    if open.user {
                        out.inputs.push(Input::Voice(VoiceInput::UserFinal(open.text)));
                    } else if open.stage == Some(GenerationStage::Final) && stop_reason != StopReason::Interrupted {
                        // A whole reply: its pace, and nothing of it is cut any more.
                        let (_, samples) = std::mem::take(&mut self.segment);
                        if samples > 0 {
                            self.pace.0 += open.text.trim().chars().count() as u64;
                            self.pace.1 += samples;
                        }
                        out.inputs.push(Input::Voice(VoiceInput::AssistantFinal(open.text)));
                    }
                }
            }
            SonicEvent::Audio { .. } if self.muted => {}
            SonicEvent::Audio { pcm, .. } => {
                self.segment.1 += pcm.len() as u64 / 2;
                if let Some(since) = self.awaiting_audio.take() {
                    out.first_audio_after = Some(since.elapsed());
                }
                // The service's base64, passed on as it came (checked by the parser), or
                // converted to the client's format.
                let audio = if self.encoder.is_passthrough() {
                    pcm.into_base64()
                } else {
                    aws_smithy_types::base64::encode(self.encoder.encode(&pcm.decode()))
                };
                out.send.push(ServerMessage::BidiAudioStream { audio, format: Some(self.format.clone()) });
            }
            SonicEvent::ToolUse { tool_use_id, name, input } => {
                out.inputs.push(Input::Voice(VoiceInput::ToolUse(ToolUse { id: tool_use_id, name, input })));
            }
            SonicEvent::Interrupted => {
                // The interrupted reply's texts will never be FINAL.
                self.texts.retain(|_, open| open.user);
                self.audio = None;
                let (text, samples) = std::mem::take(&mut self.segment);
                if !text.trim().is_empty() {
                    let sent_ms = samples * 1000 / u64::from(Format::MODEL_OUTPUT.rate);
                    out.inputs.push(Input::Voice(VoiceInput::ReplyCut {
                        text,
                        sent_ms,
                        us_per_char: self.us_per_char(),
                    }));
                }
                out.inputs.push(Input::Voice(VoiceInput::Interrupted));
            }
            SonicEvent::Usage(report) => {
                let d = report.delta;
                let tokens = TokensByModality {
                    input_speech: d.input_speech,
                    input_text: d.input_text,
                    output_speech: d.output_speech,
                    output_text: d.output_text,
                };
                let (input, output) = (d.input_speech + d.input_text, d.output_speech + d.output_text);
                out.send.push(ServerMessage::BidiUsage {
                    input_tokens: input,
                    output_tokens: output,
                    total_tokens: input + output,
                    modality: Some(tokens),
                    model: None,
                });
                out.usage = Some(tokens);
            }
            SonicEvent::CompletionEnd { stop_reason, .. } => {
                out.inputs.push(Input::Voice(VoiceInput::CompletionEnd { stop_reason: stop_label(&stop_reason) }));
            }
            SonicEvent::ReplyCut { reasked } => {
                // The stream is gone: what was open on it will not be completed, and what
                // the client holds of the reply's audio is to be dropped.
                let under_way = self.audio.is_some() || !self.segment.0.is_empty() || self.segment.1 > 0;
                self.texts.clear();
                self.segment = (String::new(), 0);
                if self.audio.take().is_some() {
                    out.inputs.push(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded)));
                }
                if under_way && !self.muted {
                    out.send.push(ServerMessage::BidiInterruption {});
                }
                if !reasked {
                    out.inputs.push(Input::Voice(VoiceInput::CompletionEnd { stop_reason: Stop::Interrupted }));
                }
                out.reply_cut = Some(reasked);
            }
            SonicEvent::Restarted { reason, generation } => {
                // Whatever was open on the old stream will not be completed.
                self.texts.clear();
                self.segment = (String::new(), 0);
                if self.audio.take().is_some() {
                    out.inputs.push(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded)));
                }
                let label = reason.label();
                out.send.push(ServerMessage::BidiConnectionRestart { reason: label.to_owned(), generation });
                out.restart = Some(label);
            }
            SonicEvent::Failed(error) => out.failed = Some((error.code(), error.metric_label(), error.to_string())),
            SonicEvent::CompletionStart { .. } | SonicEvent::ContentStart { .. } => {}
        }
        out
    }
}

/// Nova Sonic's stop reason as the protocol's (`END_TURN` is `end_turn`, ...; none is
/// `end_turn`, another lower-cased).
pub fn stop_label(stop: &StopReason) -> Stop {
    match stop {
        StopReason::EndTurn => Stop::EndTurn,
        StopReason::PartialTurn => Stop::PartialTurn,
        StopReason::ToolUse => Stop::ToolUse,
        StopReason::Interrupted => Stop::Interrupted,
        StopReason::Other(other) if other.is_empty() => Stop::EndTurn,
        StopReason::Other(other) => Stop::from(other.to_lowercase().as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: &str, role: Role, stage: Option<GenerationStage>) -> SonicEvent {
        SonicEvent::ContentStart { content_id: id.into(), kind: ContentKind::Text, role, stage }
    }

    fn text(id: &str, text: &str) -> SonicEvent {
        SonicEvent::Text { content_id: id.into(), role: Role::Assistant, stage: None, text: text.into() }
    }

    fn end(id: &str, stop_reason: StopReason) -> SonicEvent {
        SonicEvent::ContentEnd { content_id: id.into(), kind: ContentKind::Text, stop_reason }
    }

    #[test]
    fn speculative_text_is_a_delta_and_only_uninterrupted_final_text_reaches_the_core() {
        let mut relay = Relay::default();
        relay.event(start("s", Role::Assistant, Some(GenerationStage::Speculative)));
        let delta = relay.event(text("s", "Hello"));
        assert!(matches!(&delta.send[..], [ServerMessage::BidiTranscriptStream { delta: true, is_final: false, .. }]));
        assert!(relay.event(end("s", StopReason::PartialTurn)).inputs.is_empty());
        relay.event(start("f", Role::Assistant, Some(GenerationStage::Final)));
        assert!(relay.event(text("f", "Hello")).send.is_empty());
        assert_eq!(
            relay.event(end("f", StopReason::EndTurn)).inputs,
            vec![Input::Voice(VoiceInput::AssistantFinal("Hello".into()))]
        );
        relay.event(start("g", Role::Assistant, Some(GenerationStage::Final)));
        relay.event(text("g", "cut"));
        assert!(relay.event(end("g", StopReason::Interrupted)).inputs.is_empty());
        let heard = relay.event(start("u", Role::User, None));
        assert_eq!(
            heard.inputs,
            vec![Input::Voice(VoiceInput::Activity(Activity::SpeechStopped))],
            "the model took the turn as ended"
        );
        relay.event(text("u", "hi"));
        assert_eq!(
            relay.event(end("u", StopReason::EndTurn)).inputs,
            vec![Input::Voice(VoiceInput::UserFinal("hi".into()))]
        );
    }

    #[test]
    fn reply_audio_is_reported_and_a_muted_reply_is_held_back() {
        let mut relay = Relay::default();
        let audio_start = || SonicEvent::ContentStart {
            content_id: "a".into(),
            kind: ContentKind::Audio,
            role: Role::Assistant,
            stage: None,
        };
        let audio = || SonicEvent::Audio {
            content_id: "a".into(),
            pcm: switchboard_models::sonic::EncodedAudio::from_pcm(&[0; 4]),
        };
        let audio_end = || SonicEvent::ContentEnd {
            content_id: "a".into(),
            kind: ContentKind::Audio,
            stop_reason: StopReason::EndTurn,
        };
        assert_eq!(
            relay.event(audio_start()).inputs,
            vec![Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted))]
        );
        assert_eq!(relay.event(audio()).send.len(), 1);
        assert_eq!(
            relay.event(audio_end()).inputs,
            vec![Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded))]
        );
        relay.set_muted(true);
        assert!(relay.event(audio_start()).inputs.is_empty(), "a muted reply is not audible");
        assert!(relay.event(audio()).send.is_empty());
        relay.event(start("s", Role::Assistant, Some(GenerationStage::Speculative)));
        assert!(relay.event(text("s", "more")).send.is_empty());
        relay.set_muted(false);
        assert_eq!(relay.event(audio()).send.len(), 1);
    }

    #[test]
    fn a_cut_reply_is_reported_with_its_audio_sent_and_the_pace_of_whole_replies() {
        let mut relay = Relay::default();
        let audio = |ms: usize| SonicEvent::Audio {
            content_id: "a".into(),
            pcm: switchboard_models::sonic::EncodedAudio::from_pcm(&vec![0; ms * 48]),
        };
        // A whole reply of 10 characters in 500 ms: 50 ms a character.
        relay.event(start("s1", Role::Assistant, Some(GenerationStage::Speculative)));
        relay.event(text("s1", "Hello Ada."));
        relay.event(audio(500));
        relay.event(start("f1", Role::Assistant, Some(GenerationStage::Final)));
        relay.event(text("f1", "Hello Ada."));
        relay.event(end("f1", StopReason::EndTurn));
        // The next is cut after 300 ms of audio.
        relay.event(start("s2", Role::Assistant, Some(GenerationStage::Speculative)));
        relay.event(text("s2", "Once upon a time"));
        relay.event(audio(200));
        relay.event(audio(100));
        let cut = relay.event(SonicEvent::Interrupted).inputs;
        let expected =
            Input::Voice(VoiceInput::ReplyCut { text: "Once upon a time".into(), sent_ms: 300, us_per_char: 50_000 });
        assert_eq!(cut, vec![expected, Input::Voice(VoiceInput::Interrupted)]);
        assert_eq!(
            relay.event(SonicEvent::Interrupted).inputs,
            vec![Input::Voice(VoiceInput::Interrupted)],
            "reported once"
        );
    }

    #[test]
    fn a_reply_cut_by_a_lost_stream_is_stopped_at_the_client_and_ends_the_turn_unless_asked_again() {
        let audio_start = SonicEvent::ContentStart {
            content_id: "a".into(),
            kind: ContentKind::Audio,
            role: Role::Assistant,
            stage: None,
        };
        let mut relay = Relay::default();
        relay.event(start("s", Role::Assistant, Some(GenerationStage::Speculative)));
        relay.event(text("s", "We are open"));
        relay.event(audio_start);
        let cut = relay.event(SonicEvent::ReplyCut { reasked: true });
        assert_eq!(cut.send, vec![ServerMessage::BidiInterruption {}], "stop playing it");
        assert_eq!(
            cut.inputs,
            vec![Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded))],
            "no barge-in, no cut kept"
        );
        assert_eq!(cut.reply_cut, Some(true));
        // Nothing of the reply under way any more: a second cut has nothing to stop.
        let again = relay.event(SonicEvent::ReplyCut { reasked: false });
        assert!(again.send.is_empty(), "{:?}", again.send);
        assert_eq!(
            again.inputs,
            vec![Input::Voice(VoiceInput::CompletionEnd { stop_reason: Stop::Interrupted })],
            "the turn ends"
        );
        relay.event(start("f", Role::Assistant, Some(GenerationStage::Final)));
        relay.event(text("f", "We are open from nine to five."));
        let done = relay.event(end("f", StopReason::EndTurn));
        assert_eq!(
            done.inputs,
            vec![Input::Voice(VoiceInput::AssistantFinal("We are open from nine to five.".into()))]
        );
    }

    #[test]
    fn the_first_audio_after_user_input_is_timed_once() {
        let mut relay = Relay::default();
        let audio = || SonicEvent::Audio {
            content_id: "a".into(),
            pcm: switchboard_models::sonic::EncodedAudio::from_pcm(&[0; 4]),
        };
        assert!(relay.event(audio()).first_audio_after.is_none());
        relay.user_input(Instant::now());
        assert!(relay.event(audio()).first_audio_after.is_some());
        assert!(relay.event(audio()).first_audio_after.is_none());
    }
}
