//! Fillers: while a tool call of a voice session runs longer than [`FILLER_AFTER`], the
//! caller hears a short line from the agent (in its own voice) instead of dead air.
//!
//! The line comes from the model: an interactive text asks Nova Sonic to say it now
//! ([`filler_prompt`]: what runs, from the tool's description, then [`SAY_NOW`] and the
//! line in quotes). Its audio and text reach the client as any reply's do, and its FINAL
//! text enters the conversation — the caller heard it. An echo of the instruction as a
//! USER transcript is not the caller's ([`is_instruction`]). One filler per wait: calls
//! that start after it may get the next.
//!
//! What fillers are for is counted as dead air: a wait of more than [`SILENCE`] for the
//! agent's audio — for a turn's first audio (time to first audio, in the voice driver) or
//! in a pause of its speech within the turn ([`DeadAir`]).

use std::time::{Duration, Instant};

/// How long a tool call runs before the caller hears a filler: well before a wait
/// counts as a [`SILENCE`].
pub const FILLER_AFTER: Duration = Duration::from_millis(1500);
/// A wait for the agent's audio this long is dead air (`switchboard_voice_silences_total`).
pub const SILENCE: Duration = Duration::from_secs(2);
const _: () = assert!(FILLER_AFTER.as_millis() < SILENCE.as_millis(), "a filler comes before the silence counts");
/// What precedes the quoted line in the instruction.
pub const SAY_NOW: &str = "Say now, briefly:";
/// The line asked for.
pub const FILLER_LINE: &str = "Bear with me a moment, I'm still working on that.";

/// The instruction for a filler while `tool` runs (`description`: what it does).
pub fn filler_prompt(tool: &str, description: &str) -> String {
    let what = description.trim().trim_end_matches('.');
    format!(
        "The tool {tool} you called ({what}) is still running and the caller hears silence. \
         Do not answer for it yet. {SAY_NOW} \"{FILLER_LINE}\""
    )
}

/// Whether a USER transcript is the model's echo of a filler instruction.
pub fn is_instruction(text: &str) -> bool {
    text.contains(SAY_NOW)
}

/// The session's running tool calls, for fillers.
#[derive(Debug, Default)]
pub struct Fillers {
    /// Calls that have not had a filler yet: id, tool, since when.
    waiting: Vec<(String, String, Instant)>,
}

impl Fillers {
    /// A call started.
    pub fn started(&mut self, tool_use_id: String, tool: String, now: Instant) {
        self.waiting.push((tool_use_id, tool, now));
    }

    /// A call ended.
    pub fn finished(&mut self, tool_use_id: &str) {
        self.waiting.retain(|(id, _, _)| id != tool_use_id);
    }

    /// Every call ended (cancelled).
    pub fn clear(&mut self) {
        self.waiting.clear();
    }

    /// When the next filler is due, if a call waits.
    pub fn deadline(&self) -> Option<Instant> {
        self.waiting.iter().map(|(_, _, since)| *since + FILLER_AFTER).min()
    }

    /// At `now`: the tool a filler is due for (the longest running); every waiting call
    /// has had its filler then.
    pub fn due(&mut self, now: Instant) -> Option<String> {
        let (_, tool, _) =
            self.waiting.iter().filter(|(_, _, since)| *since + FILLER_AFTER <= now).min_by_key(|w| w.2)?;
        let tool = tool.clone();
        self.waiting.clear();
        Some(tool)
    }
}

/// Pauses in the agent's speech as the caller hears them. (The wait for a turn's first
/// audio is time to first audio, measured where the caller's last voiced frame is known.)
#[derive(Debug, Default)]
pub struct DeadAir {
    /// While the agent has the turn: when its last reply audio went out.
    since: Option<Instant>,
}

impl DeadAir {
    /// The agent's turn is over (answered, interrupted, the caller is asked something, or
    /// speaks or types).
    pub fn over(&mut self) {
        self.since = None;
    }

    /// Reply audio goes out at `now`: whether the caller waited for it longer than
    /// [`SILENCE`] since the agent's last audio in this turn.
    pub fn audio(&mut self, now: Instant) -> bool {
        let waited = self.since.is_some_and(|since| now.saturating_duration_since(since) > SILENCE);
        self.since = Some(now);
        waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filler_is_due_once_per_wait_after_the_threshold() {
        let start = Instant::now();
        let mut fillers = Fillers::default();
        assert_eq!(fillers.deadline(), None);
        fillers.started("t1".into(), "perform_idv_check".into(), start);
        fillers.started("t2".into(), "check_balance".into(), start + Duration::from_millis(500));
        assert_eq!(fillers.deadline(), Some(start + FILLER_AFTER));
        assert_eq!(fillers.due(start + FILLER_AFTER - Duration::from_millis(1)), None, "not yet");
        assert_eq!(fillers.due(start + FILLER_AFTER).as_deref(), Some("perform_idv_check"));
        assert_eq!((fillers.deadline(), fillers.due(start + FILLER_AFTER * 3)), (None, None), "one per wait");
        fillers.started("t3".into(), "check_balance".into(), start + FILLER_AFTER * 3);
        fillers.finished("t3");
        assert_eq!(fillers.deadline(), None, "a call that ended in time gets none");
        fillers.started("t4".into(), "check_balance".into(), start);
        fillers.clear();
        assert_eq!(fillers.due(start + FILLER_AFTER * 9), None, "cancelled calls get none");
    }

    #[test]
    fn a_pause_of_more_than_two_seconds_in_the_agents_speech_is_dead_air() {
        let start = Instant::now();
        let after = |ms| start + Duration::from_millis(ms);
        let mut air = DeadAir::default();
        assert!(!air.audio(start), "a turn's first audio: its wait is time to first audio");
        assert!(!air.audio(after(40)), "its next chunk");
        assert!(!air.audio(after(1900)), "a pause under two seconds");
        assert!(air.audio(after(3910)), "2.01 s after the last audio");
        air.over();
        assert!(!air.audio(after(9000)), "the next turn's first audio");
    }

    #[test]
    fn the_instruction_names_the_tool_and_quotes_the_line_and_its_echo_is_recognised() {
        let prompt = filler_prompt("perform_idv_check", "Verify a customer's identity. ");
        assert!(prompt.contains("perform_idv_check you called (Verify a customer's identity)"), "{prompt}");
        assert!(prompt.ends_with(&format!("{SAY_NOW} \"{FILLER_LINE}\"")), "{prompt}");
        assert!(is_instruction(&prompt) && !is_instruction(FILLER_LINE));
    }
}
