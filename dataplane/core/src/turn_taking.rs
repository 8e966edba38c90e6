//! Turn-taking on a call, without I/O: what counts as the caller interrupting
//! ([`BargeIn`]), which of the agent's lines are played whole ([`Speaker`]), and what the
//! agent does when the line goes quiet or the call runs long ([`CallClock`]). The voice
//! adapter feeds them audio frames, what it hears of the model and the time; they answer
//! with what to pass to the model and what is due. Settings: the Persona's `turnTaking`.
//!
//! **Barge-in.** Nova Sonic stops its reply as soon as it hears speech. So while the agent
//! speaks, the caller's audio is held back from the model until it holds
//! `minInterruptionMs` of voiced audio: then everything held goes to the model at once (it
//! hears the caller from their first word and stops, as before); if the caller falls quiet
//! for [`BACKCHANNEL_GAP_MS`] first, it was a backchannel ("mm-hm") or a cough, and the
//! model is sent as much silence instead — the reply goes on. While a line that must be
//! played whole is spoken, the caller's audio does not reach the model: it gets silence in
//! its place, and the caller's speech is withheld ([`Gated::Withheld`]) for the adapter to
//! send once the line is over, so what the caller said over it is heard after it.

use std::time::{Duration, Instant};

use switchboard_crds::persona::TurnTaking;

/// Silence that ends a burst of caller speech held during the agent's reply: shorter
/// pauses are inside one utterance.
pub const BACKCHANNEL_GAP_MS: u64 = 300;
/// Voiced audio that counts as speech at all (shorter is a click): the speech detector's.
pub const MIN_SPEECH_MS: u64 = 100;
/// How long a line to be played whole may take to start before the caller's audio flows
/// again.
pub const PROTECT_PATIENCE: Duration = Duration::from_secs(10);
/// How long a goodbye may take before the call ends anyway (the model did not say it).
pub const GOODBYE_PATIENCE: Duration = Duration::from_secs(15);

/// What the agent is doing, for the barge-in gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    /// Not speaking: the caller's audio goes to the model.
    Quiet,
    /// Speaking a reply the caller may interrupt.
    Speaking,
    /// Speaking a line that is played whole.
    Uninterruptible,
}

/// What to do with the caller's audio now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gated<F> {
    /// Send this frame to the model (nothing was held): the common case, every frame of a
    /// call the agent is not speaking over, with no list made for it.
    Pass(F),
    /// Send these frames to the model, in order (what was held, then this one).
    Forward(Vec<F>),
    /// Nothing yet: the frame is held.
    Held,
    /// The caller spoke over a line played whole: send `ms` of silence now instead, and
    /// these frames (the speech, in order, with its trailing pause) once the line is over.
    Withheld {
        /// Milliseconds of audio withheld.
        ms: u64,
        /// The frames.
        frames: Vec<F>,
    },
    /// Send `ms` of silence instead of what was held (it did not interrupt).
    Dropped {
        /// Milliseconds of audio dropped.
        ms: u64,
        /// Whether it was speech (a backchannel, or speech over a line played whole) rather
        /// than a click: an interruption ignored.
        speech: bool,
    },
}

/// The barge-in gate over caller audio frames `F`.
#[derive(Clone, Debug)]
pub struct BargeIn<F> {
    min_ms: u64,
    held: Vec<F>,
    held_ms: u64,
    voiced_ms: u64,
    quiet_ms: u64,
    /// The caller's current burst was taken as an interruption: it passes until it ends.
    taken: bool,
}

impl<F> BargeIn<F> {
    /// A gate taking speech of `min_ms` over the agent as an interruption (0: any).
    pub fn new(min_ms: u64) -> Self {
        Self { min_ms, held: Vec::new(), held_ms: 0, voiced_ms: 0, quiet_ms: 0, taken: false }
    }

    /// Whether frames are held now.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// One frame of `ms` milliseconds (`voiced`: it has speech energy) while the agent is
    /// doing `agent`.
    pub fn push(&mut self, frame: F, ms: u64, voiced: bool, agent: Agent) -> Gated<F> {
        if voiced {
            self.voiced_ms += ms;
            self.quiet_ms = 0;
        } else {
            self.quiet_ms += ms;
        }
        let burst_over = self.quiet_ms >= BACKCHANNEL_GAP_MS;
        if agent == Agent::Uninterruptible {
            self.taken = false;
            self.held.push(frame);
            self.held_ms += ms;
            return if burst_over || !self.voiced() { self.withhold_held() } else { Gated::Held };
        }
        if self.taken || agent == Agent::Quiet || self.min_ms == 0 {
            if burst_over {
                self.taken = false;
                self.voiced_ms = 0;
            }
            return self.forward(frame);
        }
        // The agent speaks and may be interrupted.
        if self.held.is_empty() && !voiced {
            self.voiced_ms = 0;
            return Gated::Pass(frame);
        }
        self.held.push(frame);
        self.held_ms += ms;
        if self.voiced_ms >= self.min_ms {
            self.taken = true;
            return self.forward_held();
        }
        if burst_over { self.drop_held() } else { Gated::Held }
    }

    fn voiced(&self) -> bool {
        self.voiced_ms > 0
    }

    /// Passes `frame` after anything held (the agent stopped while the caller spoke: what
    /// they said is theirs).
    fn forward(&mut self, frame: F) -> Gated<F> {
        if self.held.is_empty() {
            return Gated::Pass(frame);
        }
        self.held.push(frame);
        self.forward_held()
    }

    fn forward_held(&mut self) -> Gated<F> {
        self.held_ms = 0;
        Gated::Forward(std::mem::take(&mut self.held))
    }

    /// What was held over a line played whole: speech is withheld, anything else dropped.
    fn withhold_held(&mut self) -> Gated<F> {
        if self.voiced_ms < MIN_SPEECH_MS {
            return self.drop_held();
        }
        let ms = self.held_ms;
        self.held_ms = 0;
        self.voiced_ms = 0;
        Gated::Withheld { ms, frames: std::mem::take(&mut self.held) }
    }

    fn drop_held(&mut self) -> Gated<F> {
        let speech = self.voiced_ms >= MIN_SPEECH_MS;
        let ms = self.held_ms;
        self.held.clear();
        self.held_ms = 0;
        self.voiced_ms = 0;
        Gated::Dropped { ms, speech }
    }
}

/// Whether the agent is speaking, and whether what it says now is played whole.
#[derive(Clone, Debug, Default)]
pub struct Speaker {
    /// Reply audio flows.
    speaking: bool,
    /// A line to be played whole was asked for (or is being spoken).
    protected: bool,
    /// The protected line's audio started.
    protected_started: bool,
    /// When the protection lapses if the line's audio has not started (the model did not
    /// say it): the caller is never shut out for long.
    protect_by: Option<Instant>,
}

impl Speaker {
    /// The next line the agent says (asked for at `now`) is played whole.
    pub fn protect(&mut self, now: Instant) {
        self.protected = true;
        self.protected_started = false;
        self.protect_by = Some(now + PROTECT_PATIENCE);
    }

    /// Reply audio started.
    pub fn reply_started(&mut self) {
        self.speaking = true;
        if self.protected {
            self.protected_started = true;
            self.protect_by = None;
        }
    }

    /// Reply audio ended; a protected line that was spoken is over.
    pub fn reply_ended(&mut self) {
        self.speaking = false;
        if self.protected_started {
            self.protected = false;
            self.protected_started = false;
        }
    }

    /// The line played whole no longer is (it was abandoned): the caller may speak over
    /// what the agent says from now on.
    pub fn unprotect(&mut self) {
        self.protected = false;
        self.protected_started = false;
        self.protect_by = None;
    }

    /// Whether a protected line is asked for or being spoken.
    pub fn protected(&self) -> bool {
        self.protected
    }

    /// What the agent is doing at `now`, for [`BargeIn::push`].
    pub fn agent(&mut self, now: Instant) -> Agent {
        if self.protect_by.is_some_and(|by| now >= by) {
            self.protected = false;
            self.protect_by = None;
        }
        match (self.protected, self.speaking) {
            (true, _) => Agent::Uninterruptible,
            (false, true) => Agent::Speaking,
            (false, false) => Agent::Quiet,
        }
    }
}

/// Why the agent ended a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The caller stayed silent through every re-prompt.
    Silence,
    /// The call reached its maximum duration.
    MaxDuration,
}

impl EndReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Silence => "idle",
            Self::MaxDuration => "max_duration",
        }
    }
}

/// What the [`CallClock`] says is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Ask whether the caller is still there (the `n`-th time), with this line.
    Reprompt(String),
    /// Warn that the call is about to reach its limit, with this line.
    Warn(String),
    /// Say this goodbye (played whole); the call ends once it has been said.
    Goodbye(String, EndReason),
    /// End the call now: the reason for the record.
    End(EndReason, String),
}

/// The clock settings, from the Persona's `turnTaking`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockSettings {
    /// Quiet before a re-prompt; `None`: off.
    pub silence: Option<Duration>,
    /// The re-prompt line.
    pub prompt: String,
    /// Re-prompts before the call is ended.
    pub max_prompts: u32,
    /// The silent call's goodbye.
    pub silence_goodbye: String,
    /// The longest call; `None`: no limit.
    pub max_call: Option<Duration>,
    /// How long before the limit the warning comes; `None`: no warning.
    pub warning: Option<Duration>,
    /// The warning line.
    pub warning_line: String,
    /// The goodbye at the limit.
    pub max_call_goodbye: String,
}

impl From<&TurnTaking> for ClockSettings {
    fn from(t: &TurnTaking) -> Self {
        let seconds = |s: u32| (s > 0).then(|| Duration::from_secs(u64::from(s)));
        Self {
            silence: seconds(t.silence.after_seconds),
            prompt: t.silence.prompt.clone(),
            max_prompts: t.silence.max_prompts,
            silence_goodbye: t.silence.goodbye.clone(),
            max_call: seconds(t.max_call.seconds),
            warning: seconds(t.max_call.warning_seconds).filter(|_| t.max_call.seconds > t.max_call.warning_seconds),
            warning_line: t.max_call.warning.clone(),
            max_call_goodbye: t.max_call.goodbye.clone(),
        }
    }
}

/// A goodbye under way.
#[derive(Clone, Copy, Debug)]
struct Ending {
    reason: EndReason,
    /// When the call ends if the goodbye's audio has not ended by then.
    by: Instant,
    /// Its audio started.
    started: bool,
}

/// Silence re-prompts and the call's time limit.
#[derive(Clone, Debug)]
pub struct CallClock {
    settings: ClockSettings,
    /// When this runtime session of the call started.
    started: Instant,
    /// How long the call had lasted before it (across handoffs and resumes).
    before: Duration,
    /// Since when the line is quiet (nobody speaks, nothing is being worked on).
    idle_since: Option<Instant>,
    /// Re-prompts since the caller last spoke.
    prompts: u32,
    warned: bool,
    ending: Option<Ending>,
    over: bool,
}

impl CallClock {
    /// A call that started at `now`.
    pub fn new(settings: ClockSettings, now: Instant) -> Self {
        Self::going_on(settings, now, Duration::ZERO)
    }

    /// A call that had lasted `before` when this session of it started at `now` (it was
    /// handed over, or resumed): its limit and warning count from the call's start. A
    /// warning whose time passed before is not said again (the session before said it);
    /// a limit that passed ends the call at once. The silence re-prompts start afresh: a
    /// handoff is not the caller's silence.
    pub fn going_on(settings: ClockSettings, now: Instant, before: Duration) -> Self {
        let mut clock = Self {
            settings,
            started: now,
            before,
            idle_since: None,
            prompts: 0,
            warned: false,
            ending: None,
            over: false,
        };
        clock.warned = clock.warning_at().is_some_and(|at| at <= now) && before > Duration::ZERO;
        clock
    }

    /// When the call reaches its limit.
    fn limit(&self) -> Option<Instant> {
        self.settings.max_call.map(|max| self.started + max.saturating_sub(self.before))
    }

    /// When the warning is due (said or not).
    fn warning_at(&self) -> Option<Instant> {
        let (max, before) = (self.settings.max_call?, self.settings.warning?);
        Some(self.started + max.saturating_sub(before).saturating_sub(self.before))
    }

    /// Whether the line is quiet now (the session is ready: nobody speaks, nothing runs).
    pub fn idle(&mut self, idle: bool, now: Instant) {
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(now),
            (false, _) => self.idle_since = None,
            (true, Some(_)) => {}
        }
    }

    /// The caller said something (the model heard a turn): the re-prompts start again.
    pub fn caller_spoke(&mut self) {
        self.prompts = 0;
    }

    /// Re-prompts since the caller last spoke.
    pub fn prompts(&self) -> u32 {
        self.prompts
    }

    /// Whether a goodbye is under way.
    pub fn ending(&self) -> bool {
        self.ending.is_some()
    }

    /// Reply audio started (the goodbye's, when one is under way).
    pub fn reply_started(&mut self) {
        if let Some(ending) = &mut self.ending {
            ending.started = true;
        }
    }

    /// The reply ended (its completion, after its audio): a goodbye that was spoken ends
    /// the call now.
    pub fn reply_ended(&mut self, now: Instant) {
        if let Some(ending) = &mut self.ending
            && ending.started
        {
            ending.by = now;
        }
    }

    /// When something is due next.
    pub fn deadline(&self) -> Option<Instant> {
        if self.over {
            return None;
        }
        if let Some(ending) = self.ending {
            return Some(ending.by);
        }
        let limit = self.limit();
        let warning = self.warning_at().filter(|_| !self.warned);
        let quiet = self.settings.silence.zip(self.idle_since).map(|(after, since)| since + after);
        [limit, warning, quiet].into_iter().flatten().min()
    }

    /// What is due at `now`, if anything (call it until it says nothing).
    pub fn poll(&mut self, now: Instant) -> Option<Due> {
        if self.over {
            return None;
        }
        if let Some(ending) = self.ending {
            if now < ending.by {
                return None;
            }
            self.over = true;
            return Some(Due::End(ending.reason, self.reason(ending.reason)));
        }
        if self.limit().is_some_and(|limit| now >= limit) {
            return Some(self.goodbye(EndReason::MaxDuration, now));
        }
        if !self.warned && self.warning_at().is_some_and(|at| now >= at) {
            self.warned = true;
            return Some(Due::Warn(self.settings.warning_line.clone()));
        }
        let after = self.settings.silence?;
        if now < self.idle_since? + after {
            return None;
        }
        if self.prompts >= self.settings.max_prompts {
            return Some(self.goodbye(EndReason::Silence, now));
        }
        self.prompts += 1;
        // The quiet counts again from now (the re-prompt's audio will interrupt it).
        self.idle_since = Some(now);
        Some(Due::Reprompt(self.settings.prompt.clone()))
    }

    fn goodbye(&mut self, reason: EndReason, now: Instant) -> Due {
        self.ending = Some(Ending { reason, by: now + GOODBYE_PATIENCE, started: false });
        let line = match reason {
            EndReason::Silence => &self.settings.silence_goodbye,
            EndReason::MaxDuration => &self.settings.max_call_goodbye,
        };
        Due::Goodbye(line.clone(), reason)
    }

    /// The reason the record keeps.
    fn reason(&self, reason: EndReason) -> String {
        match reason {
            EndReason::Silence => format!(
                "idle: the caller said nothing after {} re-prompt(s) (turnTaking.silence)",
                self.settings.max_prompts
            ),
            EndReason::MaxDuration => format!(
                "max_duration: the call reached its limit of {} s (turnTaking.maxCall)",
                self.settings.max_call.map_or(0, |d| d.as_secs())
            ),
        }
    }
}

#[cfg(test)]
#[path = "turn_taking_tests.rs"]
mod tests;
