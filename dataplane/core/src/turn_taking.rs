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

mod clock;

pub use clock::{CallClock, ClockSettings, Due, EndReason};

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

#[cfg(test)]
#[path = "turn_taking_tests.rs"]
mod tests;
