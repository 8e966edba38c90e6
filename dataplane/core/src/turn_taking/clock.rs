//! The call clock: what the agent does when the line goes quiet (silence re-prompts, then a
//! goodbye) or the call runs long (a warning, then the end), and why a call ended.

use std::time::{Duration, Instant};

use switchboard_crds::persona::TurnTaking;

use super::GOODBYE_PATIENCE;

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
    /// Since when the line is quiet (nobody speaks, nothing is being worked on) with the
    /// caller there to hear it.
    idle_since: Option<Instant>,
    /// The line is quiet (the session's state says so).
    quiet: bool,
    /// The caller is not heard: their audio stopped coming (see [`CallClock::caller_away`]).
    away: bool,
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
            quiet: false,
            away: false,
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
        self.quiet = idle;
        self.count_quiet(now);
    }

    /// Whether the caller is away: their audio stopped coming (a connection gone quiet,
    /// not a quiet caller — nobody is there to hear a re-prompt). Away, the quiet does not
    /// count; back, it counts afresh from `now`, as after a handoff or a resume. The
    /// re-prompts said before stay said.
    pub fn caller_away(&mut self, away: bool, now: Instant) {
        self.away = away;
        self.count_quiet(now);
    }

    /// The quiet counts while the line is quiet and the caller is there.
    fn count_quiet(&mut self, now: Instant) {
        match (self.quiet && !self.away, self.idle_since) {
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
