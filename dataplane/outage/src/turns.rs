//! One session's turns as the breaker sees them, without I/O: the relay shows it the frames
//! it relays and it says, once per turn, how the turn went ([`Turn`]).
//!
//! A turn is owed a reply from the moment the caller's turn ended — the runtime's
//! `bidi_speech_stopped` (the voice model took the turn as ended), or the client's
//! `bidi_text_input` or `bidi_audio_input_end` — to the reply's first audio
//! (`bidi_audio_stream`, or a binary audio frame) or, typed, its first agent text
//! (`bidi_transcript_stream` of the assistant) once the runtime began the reply
//! (`bidi_response_start`): an agent line before that is not the reply (the Agent's greeting,
//! still on its way when the client typed, was once taken for it). Later than the Agent's
//! `firstAudioSeconds`, or still nothing by then, is [`Turn::Slow`]; a model error from the
//! runtime (`model_*` codes of an unavailable, throttled, slow or broken service) is
//! [`Turn::Error`] whether or not a reply was owed. Only an Agent with outage mode has a
//! clock: for the others every frame passes untouched.

use std::time::{Duration, Instant};

use switchboard_protocol::{ErrorCode, ServerKind, TranscriptRole};

pub use super::breaker::Turn;

/// The `bidi_error` codes that say the model service failed (not the caller, not the
/// Agent's settings).
pub const MODEL_FAILURES: &[ErrorCode] = &[
    ErrorCode::ModelError,
    ErrorCode::ModelThrottled,
    ErrorCode::ModelServiceUnavailable,
    ErrorCode::ModelStreamInterrupted,
    ErrorCode::ModelTimeout,
    ErrorCode::ModelConnection,
];

/// A session's clock.
#[derive(Debug, Default)]
pub struct Turns {
    /// The Agent's `firstAudioSeconds`; none: its Agent has no outage mode.
    limit: Option<Duration>,
    /// Since when a reply is owed.
    owed: Option<Instant>,
    /// The runtime began the owed turn's reply (`bidi_response_start`).
    answering: bool,
}

impl Turns {
    /// The session is now with an Agent whose first audio is due within `limit` (none: no
    /// outage mode). A reply owed by the previous Agent is forgotten.
    pub fn agent(&mut self, limit: Option<Duration>) {
        *self = Self { limit, owed: None, answering: false };
    }

    /// Whether it watches anything.
    pub fn watching(&self) -> bool {
        self.limit.is_some()
    }

    /// A client text frame.
    pub fn client_text(&mut self, text: &str, now: Instant) {
        if self.limit.is_none() || self.owed.is_some() {
            return;
        }
        // A typed input or the end of spoken input: small frames, told apart cheaply from
        // audio (which never names them).
        if text.contains("\"bidi_text_input\"") || text.contains("\"bidi_audio_input_end\"") {
            self.owed = Some(now);
        }
    }

    /// A runtime text frame: how the turn went, when this frame settles it.
    pub fn runtime_text(&mut self, text: &str, now: Instant) -> Option<Turn> {
        self.limit?;
        match ServerKind::peek(text) {
            Some(ServerKind::SpeechStopped) => {
                self.owed.get_or_insert(now);
                None
            }
            Some(ServerKind::AudioStream) => self.replied(now),
            Some(ServerKind::ResponseStart) => {
                self.answering = self.owed.is_some();
                None
            }
            Some(ServerKind::TranscriptStream) if self.owed.is_some() && self.answering && is_agent_line(text) => {
                self.replied(now)
            }
            Some(ServerKind::Error) if is_model_failure(text) => {
                (self.owed, self.answering) = (None, false);
                Some(Turn::Error)
            }
            _ => None,
        }
    }

    /// A runtime binary frame (reply audio).
    pub fn runtime_binary(&mut self, now: Instant) -> Option<Turn> {
        self.limit?;
        self.replied(now)
    }

    /// Time passed: a reply owed for longer than the limit is slow (once).
    pub fn tick(&mut self, now: Instant) -> Option<Turn> {
        let (limit, owed) = (self.limit?, self.owed?);
        if now.saturating_duration_since(owed) <= limit {
            return None;
        }
        self.owed = None;
        Some(Turn::Slow)
    }

    fn replied(&mut self, now: Instant) -> Option<Turn> {
        let (limit, owed) = (self.limit?, self.owed.take()?);
        self.answering = false;
        Some(if now.saturating_duration_since(owed) <= limit { Turn::Good } else { Turn::Slow })
    }
}

fn is_agent_line(text: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Line {
        role: TranscriptRole,
    }
    serde_json::from_str::<Line>(text).is_ok_and(|line| line.role == TranscriptRole::Assistant)
}

fn is_model_failure(text: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Error {
        code: ErrorCode,
    }
    serde_json::from_str::<Error>(text).is_ok_and(|error| MODEL_FAILURES.contains(&error.code))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STOPPED: &str = r#"{"type":"bidi_speech_stopped"}"#;
    const AUDIO: &str = r#"{"type":"bidi_audio_stream","audio":"AAAA"}"#;

    fn watching() -> Turns {
        let mut turns = Turns::default();
        turns.agent(Some(Duration::from_secs(2)));
        turns
    }

    #[test]
    fn a_spoken_turn_is_good_or_slow_by_its_first_audio() {
        let (mut turns, t0) = (watching(), Instant::now());
        assert_eq!(turns.runtime_text(AUDIO, t0), None, "a greeting owes nothing");
        assert_eq!(turns.runtime_text(STOPPED, t0), None);
        assert_eq!(turns.runtime_text(AUDIO, t0 + Duration::from_millis(500)), Some(Turn::Good));
        assert_eq!(turns.runtime_text(AUDIO, t0 + Duration::from_millis(520)), None, "once per turn");
        turns.runtime_text(STOPPED, t0 + Duration::from_secs(1));
        assert_eq!(turns.runtime_binary(t0 + Duration::from_secs(4)), Some(Turn::Slow));
    }

    #[test]
    fn a_typed_turn_counts_the_agents_first_text_and_a_silent_one_is_slow_at_the_tick() {
        let (mut turns, t0) = (watching(), Instant::now());
        turns.client_text(r#"{"type":"bidi_text_input","text":"hi"}"#, t0);
        let user = r#"{"type":"bidi_transcript_stream","role":"user","text":"hi","delta":false,"is_final":true}"#;
        let agent =
            r#"{"type":"bidi_transcript_stream","role":"assistant","text":"Hello","delta":true,"is_final":false}"#;
        // The Agent's greeting, still on its way when the client typed: not the reply.
        assert_eq!(turns.runtime_text(agent, t0), None, "a greeting before the reply began");
        assert_eq!(turns.runtime_text(user, t0), None, "the caller's own line is no reply");
        assert_eq!(turns.runtime_text(r#"{"type":"bidi_response_start","turn":1}"#, t0), None);
        assert_eq!(turns.runtime_text(agent, t0 + Duration::from_secs(1)), Some(Turn::Good));
        turns.client_text(r#"{"type":"bidi_audio_input_end"}"#, t0);
        assert_eq!(turns.tick(t0 + Duration::from_secs(1)), None);
        assert_eq!(turns.tick(t0 + Duration::from_secs(3)), Some(Turn::Slow));
        assert_eq!(turns.tick(t0 + Duration::from_secs(9)), None, "once");
    }

    #[test]
    fn model_failures_count_and_other_errors_do_not() {
        let mut turns = watching();
        let now = Instant::now();
        let failure = r#"{"type":"bidi_error","message":"m","code":"model_service_unavailable","recoverable":false}"#;
        assert_eq!(turns.runtime_text(failure, now), Some(Turn::Error));
        let caller = r#"{"type":"bidi_error","message":"m","code":"invalid_json","recoverable":true}"#;
        assert_eq!(turns.runtime_text(caller, now), None);
        let mut off = Turns::default();
        assert_eq!(off.runtime_text(failure, now), None, "no outage mode, no clock");
        assert!(!off.watching());
    }
}
