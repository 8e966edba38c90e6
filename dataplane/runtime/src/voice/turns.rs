//! Turn-taking on a call (the Persona's `turnTaking`), the adapter's side of
//! [`switchboard_core::turn_taking`]: the caller's audio is cleaned of noise when the
//! Persona asks for it ([`switchboard_core::audio::noise`]), then passes the barge-in gate on its way
//! to the model (a backchannel over the agent's reply is replaced by silence; speech long
//! enough goes through whole and interrupts as before), lines to be played whole shut the
//! caller's audio out while they are spoken — the model hears silence in its place, and
//! the caller's speech over the line ([`Withheld`], at most [`MAX_WITHHELD_MS`]) once the
//! line is over, so what they said is answered after it —, and the call clock's re-prompts, time warning
//! and goodbyes are said by the model in the agent's own voice — each asked for as a line
//! to say now (see [`super::filler`]: its echo is not the caller's) — before the agent ends
//! the call with its reason in the record.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use switchboard_core::audio::noise::NoiseSuppressor;
use switchboard_core::protocol::{ServerMessage, SessionState};
use switchboard_core::turn_taking::{Agent, BargeIn, CallClock, ClockSettings, Due, Gated, Speaker};
use switchboard_core::{Activity, Input, Session, VoiceInput};
use switchboard_crds::persona::turn_taking::NoiseSuppression;

use super::super::agent::Exit;
use super::{Voice, audio, filler};

/// The most caller speech over a line played whole kept for the model to hear after it:
/// a minute of audio (the longest Workflow line is about half a minute); past it the
/// rest is dropped, counted (`switchboard_voice_withheld_speech_total{outcome="truncated"}`)
/// and logged.
pub const MAX_WITHHELD_MS: u64 = 60_000;

/// How long the caller's audio may stop coming before the caller counts as away (the call
/// clock's quiet does not count while they are): a microphone sends a frame every 20 ms
/// whether or not anyone speaks (a WebRTC caller's DTX pauses come filled, at least every
/// 400 ms), so a second without one is a connection gone quiet — a client whose network
/// dropped, before the gateway notices and parks the session — not a quiet caller.
pub const AUDIO_STALL: Duration = Duration::from_secs(1);

/// The caller's speech over a line played whole, in order, until the line is over.
#[derive(Debug, Default)]
pub struct Withheld {
    frames: VecDeque<Bytes>,
    ms: u64,
    /// Milliseconds of speech that did not fit.
    dropped_ms: u64,
}

impl Withheld {
    /// Keeps `frames` (`ms` long) while they fit under [`MAX_WITHHELD_MS`]; what does not
    /// fit is counted as dropped.
    pub fn keep(&mut self, frames: Vec<Bytes>, ms: u64) {
        if self.ms.saturating_add(ms) > MAX_WITHHELD_MS {
            self.dropped_ms = self.dropped_ms.saturating_add(ms);
            return;
        }
        self.ms += ms;
        self.frames.extend(frames);
    }

    /// Everything kept, in order, and the milliseconds dropped; empty afterwards.
    pub fn take(&mut self) -> (Vec<Bytes>, u64) {
        self.ms = 0;
        (self.frames.drain(..).collect(), std::mem::take(&mut self.dropped_ms))
    }

    /// Whether nothing is kept (nor was dropped).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.dropped_ms == 0
    }
}

/// The call's turn-taking state.
#[derive(Debug)]
pub struct Turns {
    gate: BargeIn<Bytes>,
    speaker: Speaker,
    clock: CallClock,
    /// The caller's audio is cleaned of noise first (`turnTaking.noiseSuppression`).
    noise: Option<NoiseSuppressor>,
    /// The caller's speech over the line played whole now.
    withheld: Withheld,
    /// When the caller's last audio frame came, while their microphone streams (`None`
    /// before the first frame and after `bidi_audio_input_end`: a caller who released
    /// push-to-talk, or never sent audio, is as silent as they are).
    heard: Option<Instant>,
    /// The caller's audio stopped coming for [`AUDIO_STALL`].
    away: bool,
}

impl Turns {
    /// For a call with `settings` (the Persona's `turnTaking`) whose session here starts at
    /// `now`, the call having started at `call_started_at_ms` (ms since the Unix epoch, as
    /// the gateway carried it across handoffs and resumes; `None`: now) — the clock says
    /// `now_ms` now.
    pub fn new(
        settings: &switchboard_crds::persona::TurnTaking,
        now: Instant,
        call_started_at_ms: Option<u64>,
        now_ms: u64,
    ) -> Self {
        let before = Duration::from_millis(call_started_at_ms.map_or(0, |started| now_ms.saturating_sub(started)));
        Self {
            gate: BargeIn::new(u64::from(settings.min_interruption_ms)),
            speaker: Speaker::default(),
            clock: CallClock::going_on(ClockSettings::from(settings), now, before),
            noise: match settings.noise_suppression {
                NoiseSuppression::Off => None,
                NoiseSuppression::Rnnoise => Some(NoiseSuppressor::new()),
            },
            withheld: Withheld::default(),
            heard: None,
            away: false,
        }
    }

    /// A frame of the caller's audio came: a caller who was away is back, and the quiet
    /// counts afresh.
    pub fn caller_audio(&mut self, now: Instant) {
        self.heard = Some(now);
        self.back(now);
    }

    /// The caller's microphone stopped (`bidi_audio_input_end`): no audio is expected.
    pub fn audio_ended(&mut self, now: Instant) {
        self.heard = None;
        self.back(now);
    }

    fn back(&mut self, now: Instant) {
        if self.away {
            self.away = false;
            self.clock.caller_away(false, now);
        }
    }

    /// When the caller counts as away if no audio comes by then.
    fn stall_at(&self) -> Option<Instant> {
        self.heard.filter(|_| !self.away).map(|heard| heard + AUDIO_STALL)
    }

    /// The caller's audio stopped coming for [`AUDIO_STALL`] by `now`: they are away (true
    /// when they just became so).
    pub fn check_stall(&mut self, now: Instant) -> bool {
        if self.stall_at().is_none_or(|at| now < at) {
            return false;
        }
        self.away = true;
        self.clock.caller_away(true, now);
        true
    }

    /// A checked frame of the caller's audio, cleaned of noise when the Persona asks for it
    /// (in place: the frame the reader made is this call's alone, so nothing is copied).
    pub fn clean(&mut self, pcm: Bytes) -> Bytes {
        let Some(noise) = &mut self.noise else {
            return pcm;
        };
        let mut frame = BytesMut::from(pcm);
        noise.process(&mut frame);
        frame.freeze()
    }

    /// The next line the agent says is played whole (the greeting, when asked).
    pub fn protect(&mut self, now: Instant) {
        self.speaker.protect(now);
    }

    /// The line played whole was abandoned: the caller may speak over the agent again.
    pub fn unprotect(&mut self) {
        self.speaker.unprotect();
    }

    /// When the call clock has something due, or the caller's audio is overdue.
    pub fn deadline(&self) -> Option<Instant> {
        [self.clock.deadline(), self.stall_at()].into_iter().flatten().min()
    }

    /// What a model input says about who speaks.
    pub fn observe(&mut self, input: &Input, now: Instant) {
        match input {
            Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)) => {
                self.speaker.reply_started();
                self.clock.reply_started();
            }
            Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded)) => self.speaker.reply_ended(),
            // A goodbye is over once its completion ends: its FINAL text came too.
            Input::Voice(VoiceInput::CompletionEnd { .. }) => self.clock.reply_ended(now),
            Input::Voice(VoiceInput::UserFinal(text)) if !filler::is_instruction(text) => self.clock.caller_spoke(),
            _ => {}
        }
    }

    /// What the client is told of the session's state: the line is quiet while it is
    /// `ready` (and the client listens to audio).
    pub fn state(&mut self, message: &ServerMessage, audio_on: bool, now: Instant) {
        if let ServerMessage::BidiSessionState { state } = message {
            self.clock.idle(audio_on && *state == SessionState::Ready, now);
        }
    }
}

/// The instruction to say `line` now, in the agent's voice, and nothing else.
pub fn say_prompt(why: &str, line: &str) -> String {
    format!("{why} Do not answer anything else. {} \"{}\"", filler::SAY_NOW, line.trim())
}

impl Voice<'_> {
    /// A checked frame of the caller's audio through the barge-in gate to the model; true
    /// when speech held back was dropped (an interruption ignored).
    pub(super) async fn gated_audio(&mut self, pcm: Bytes, voiced: bool) -> Result<bool, Exit> {
        let ms = (pcm.len() / 32) as u64;
        let agent = self.turns.speaker.agent(Instant::now());
        if agent != Agent::Uninterruptible {
            self.send_withheld().await?;
        }
        let mut ignored = false;
        match self.turns.gate.push(pcm, ms, voiced, agent) {
            Gated::Pass(frame) => self.send_to_model(frame).await?,
            Gated::Forward(frames) => {
                for frame in frames {
                    self.send_to_model(frame).await?;
                }
            }
            Gated::Held => {}
            Gated::Dropped { ms, speech } => {
                if speech {
                    self.count_interruption("ignored");
                }
                ignored = speech;
                for frame in audio::silence_frames_ms(ms) {
                    self.send_to_model(frame).await?;
                }
            }
            Gated::Withheld { ms, frames } => {
                self.count_interruption("ignored");
                ignored = true;
                self.turns.withheld.keep(frames, ms);
                for frame in audio::silence_frames_ms(ms) {
                    self.send_to_model(frame).await?;
                }
            }
        }
        Ok(ignored)
    }

    /// The caller's speech over the line played whole, now that it is over: to the model,
    /// in order (before anything the caller says next), so that it hears and answers it.
    async fn send_withheld(&mut self) -> Result<(), Exit> {
        if self.turns.withheld.is_empty() {
            return Ok(());
        }
        let (frames, dropped_ms) = self.turns.withheld.take();
        let outcome = if dropped_ms > 0 { "truncated" } else { "heard" };
        self.shared.metrics.withheld_speech.with_label_values(&[self.agent.core.name(), outcome]).inc();
        if dropped_ms > 0 {
            tracing::warn!(
                agent = self.agent.core.name(),
                session_id = self.trace.session_id(),
                dropped_ms,
                "the caller spoke over a line played whole for longer than is kept; the rest was dropped"
            );
        }
        for frame in frames {
            self.send_to_model(frame).await?;
        }
        Ok(())
    }

    /// Sends the caller's speech withheld over a line played whole once no line is.
    pub(super) async fn release_withheld(&mut self) -> Option<Exit> {
        if self.turns.withheld.is_empty() || self.turns.speaker.agent(Instant::now()) == Agent::Uninterruptible {
            return None;
        }
        self.send_withheld().await.err()
    }

    /// One frame of the caller's audio to the model.
    async fn send_to_model(&mut self, frame: Bytes) -> Result<(), Exit> {
        self.stream.send_audio(frame).await.map_err(|_| Exit::model_gone())
    }

    /// Counts the caller speaking over the agent.
    pub(super) fn count_interruption(&self, outcome: &str) {
        let agent = self.agent.core.name();
        self.shared.metrics.caller_interruptions.with_label_values(&[agent, outcome]).inc();
    }

    /// The call clock's deadline passed: a re-prompt, a warning, a goodbye or the end — or
    /// the caller's audio stopped coming (they are away: no re-prompt is said to nobody).
    pub(super) async fn clock_due(&mut self, session: &mut Session) -> Option<Exit> {
        let now = Instant::now();
        if self.turns.check_stall(now) {
            tracing::debug!(
                agent = self.agent.core.name(),
                session_id = self.trace.session_id(),
                "the caller's audio stopped coming: the silence re-prompts wait until it comes again"
            );
        }
        while let Some(due) = self.turns.clock.poll(now) {
            let agent = self.agent.core.name();
            let metrics = &self.shared.metrics;
            let prompt = match due {
                Due::Reprompt(line) => {
                    metrics.reprompts.with_label_values(&[agent]).inc();
                    say_prompt("The caller has been silent for a while.", &line)
                }
                Due::Warn(line) => say_prompt("The call is close to its time limit.", &line),
                Due::Goodbye(line, _) => say_prompt("The call is ending now.", &line),
                Due::End(reason, text) => {
                    metrics.calls_ended.with_label_values(&[agent, reason.label()]).inc();
                    tracing::info!(agent, session_id = self.trace.session_id(), "the agent ends the call: {text}");
                    let effects = session.handle(Input::Hangup { reason: text }, now);
                    return self.apply(session, effects).await;
                }
            };
            self.turns.speaker.protect(now);
            if self.stream.send_text(prompt).await.is_err() {
                return Some(Exit::model_gone());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(vec![u8::try_from(i).expect("a few"); 640])).collect()
    }

    fn quiet_after_two_seconds() -> switchboard_crds::persona::TurnTaking {
        let mut settings = switchboard_crds::persona::TurnTaking::default();
        settings.silence.after_seconds = 2;
        settings.max_call.seconds = 0;
        settings
    }

    fn ready() -> ServerMessage {
        ServerMessage::BidiSessionState { state: SessionState::Ready }
    }

    #[test]
    fn a_caller_whose_audio_stops_coming_is_away_until_it_comes_again() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut turns = Turns::new(&quiet_after_two_seconds(), t0, None, 0);
        turns.state(&ready(), true, t0);
        // No audio yet (a client that sends none): the quiet counts as before.
        assert_eq!(turns.deadline(), Some(ms(2000)));
        // The microphone streams: the next frame is due within the stall.
        turns.caller_audio(ms(500));
        assert_eq!(turns.deadline(), Some(ms(1500)));
        assert!(!turns.check_stall(ms(1499)));
        // It stops: away, and no re-prompt is due however long it stays so.
        assert!(turns.check_stall(ms(1500)));
        assert!(!turns.check_stall(ms(1600)), "once");
        assert_eq!(turns.deadline(), None);
        assert_eq!(turns.clock.poll(ms(60_000)), None);
        // It comes again: the quiet counts afresh from then.
        turns.caller_audio(ms(60_000));
        turns.check_stall(ms(60_000));
        assert_eq!(turns.deadline(), Some(ms(61_000)), "the next frame");
        for n in 1..100 {
            turns.caller_audio(ms(60_000 + n * 20));
        }
        assert_eq!(turns.deadline(), Some(ms(62_000)), "the quiet period, from the caller's return");
        assert!(matches!(turns.clock.poll(ms(62_000)), Some(Due::Reprompt(_))));
        // Push-to-talk released: no audio is expected, the quiet counts.
        turns.audio_ended(ms(62_100));
        turns.state(&ready(), true, ms(63_000));
        assert!(!turns.check_stall(ms(70_000)), "not away");
    }

    #[test]
    fn speech_over_a_line_is_kept_in_order_up_to_a_minute_and_the_rest_counted_as_dropped() {
        let mut withheld = Withheld::default();
        assert!(withheld.is_empty());
        withheld.keep(frames(3), MAX_WITHHELD_MS - 100);
        withheld.keep(frames(2), 100);
        withheld.keep(frames(1), 20);
        assert!(!withheld.is_empty());
        let (kept, dropped_ms) = withheld.take();
        let order: Vec<u8> = kept.iter().map(|frame| frame[0]).collect();
        assert_eq!(order, [0, 1, 2, 0, 1], "what fits, in order");
        assert_eq!(dropped_ms, 20, "what did not fit");
        assert!(withheld.is_empty(), "taken whole");
        withheld.keep(frames(1), 20);
        assert_eq!(withheld.take(), (frames(1), 0), "a minute again after a take");
    }
}
