//! The keys a caller pressed that the agent has not been told yet: [`Keys`] checks each
//! `bidi_dtmf` ([`crate::dtmf::check`]), bounds how fast keys come ([`KeyRate`]) and
//! gathers them until the caller ends them with `#`, pauses for [`PAUSE`], or has pressed
//! [`MAX_DIGITS`]; then the session tells the agent (`dtmf::told`) as the caller's input.

use std::time::Instant;

use crate::dtmf::{DtmfError, KeyRate, MAX_DIGITS, PAUSE, check};

/// Keys pressed and not yet told.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keys {
    /// The keys since the agent was last told.
    pending: String,
    /// When the last of them was pressed.
    last: Option<Instant>,
    rate: KeyRate,
}

impl Keys {
    /// Takes the keys of one `bidi_dtmf` pressed at `now`; returns the groups of keys to
    /// tell the agent now (each ended by `#` or [`MAX_DIGITS`] long), in order. A refused
    /// message takes none of its keys.
    pub(crate) fn press(&mut self, digits: &str, now: Instant) -> Result<Vec<String>, DtmfError> {
        check(digits)?;
        self.rate.take(digits.chars().count(), now)?;
        let mut told = Vec::new();
        for key in digits.chars() {
            self.pending.push(key);
            if key == '#' || self.pending.len() >= MAX_DIGITS {
                told.push(std::mem::take(&mut self.pending));
            }
        }
        self.last = (!self.pending.is_empty()).then_some(now);
        Ok(told)
    }

    /// Checks the keys of one `bidi_dtmf` pressed at `now` and counts them against the
    /// rate, without gathering them: keys a keypad input collects (they never reach the
    /// agent). A refused message takes none.
    pub(crate) fn take(&mut self, digits: &str, now: Instant) -> Result<(), DtmfError> {
        check(digits)?;
        self.rate.take(digits.chars().count(), now)
    }

    /// The keys to tell the agent because the caller paused after them, if the pause is
    /// over by `now`.
    pub(crate) fn due(&mut self, now: Instant) -> Option<String> {
        let deadline = self.deadline()?;
        if deadline > now {
            return None;
        }
        self.last = None;
        Some(std::mem::take(&mut self.pending))
    }

    /// When the keys pending are told unless more come.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.last.map(|last| last + PAUSE)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn keys_are_told_at_the_hash_or_after_a_pause() {
        let start = Instant::now();
        let mut keys = Keys::default();
        assert_eq!(keys.press("1", start), Ok(vec![]));
        assert_eq!(keys.press("2", start + Duration::from_millis(300)), Ok(vec![]));
        assert_eq!(keys.deadline(), Some(start + Duration::from_millis(300) + PAUSE));
        assert_eq!(keys.due(start + Duration::from_millis(400)), None, "the caller may press more");
        assert_eq!(keys.press("3#4", start + Duration::from_millis(600)), Ok(vec!["123#".to_owned()]));
        assert_eq!(keys.due(start + Duration::from_millis(600) + PAUSE), Some("4".to_owned()));
        assert_eq!((keys.deadline(), keys.due(start + Duration::from_secs(60))), (None, None));
    }

    #[test]
    fn a_long_run_of_keys_is_told_in_bounded_groups_and_bad_keys_take_nothing() {
        let start = Instant::now();
        let mut keys = Keys::default();
        assert_eq!(keys.press(&"7".repeat(MAX_DIGITS), start), Ok(vec!["7".repeat(MAX_DIGITS)]));
        assert_eq!(keys.deadline(), None);
        let later = start + Duration::from_secs(10);
        assert_eq!(keys.press("1x", later), Err(DtmfError::NotAKey('x')));
        assert_eq!(keys.deadline(), None, "nothing of a refused message is kept");
        assert_eq!(keys.press(&"1".repeat(MAX_DIGITS), later), Ok(vec!["1".repeat(MAX_DIGITS)]));
        assert_eq!(keys.press("2", later), Err(DtmfError::TooFast));
    }
}

/// The session with keys: what the agent is told, and when.
#[cfg(test)]
mod session_tests {
    use std::time::{Duration, Instant};

    use super::super::test_agents::{core, init};
    use super::super::*;
    use crate::dtmf::PAUSE;
    use crate::events::VoiceEffect;

    fn told_voice(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Voice(VoiceEffect::SendText(text)) => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    fn recorded_user(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Transcript(entry) if entry.event == "user" => Some(entry.data["text"].to_string()),
                _ => None,
            })
            .collect()
    }

    fn errors(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(ServerMessage::BidiError { code, .. }) => Some(code.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_voice_agent_is_told_the_keys_as_the_callers_input_at_the_hash() {
        let (mut session, _) = Session::start_voice(core("idv"), init());
        let now = Instant::now();
        for (i, key) in ["1", "2", "3"].into_iter().enumerate() {
            let effects =
                session.handle(Input::Dtmf { digits: key.into() }, now + Duration::from_millis(200 * i as u64));
            assert!(told_voice(&effects).is_empty(), "not told before the caller ends the keys");
        }
        let effects = session.handle(Input::Dtmf { digits: "#".into() }, now + Duration::from_millis(700));
        assert_eq!(told_voice(&effects), ["The caller pressed 1 2 3 #"]);
        assert_eq!(recorded_user(&effects), [r#""The caller pressed 1 2 3 #""#], "in the record as caller input");
        assert_eq!(session.next_deadline(), None, "nothing pending");
    }

    #[test]
    fn a_pause_tells_the_keys_pressed_so_far() {
        let (mut session, _) = Session::start_voice(core("triage"), init());
        let now = Instant::now();
        assert!(session.handle(Input::Dtmf { digits: "2".into() }, now).iter().all(|e| !matches!(e, Effect::Voice(_))));
        assert_eq!(session.next_deadline(), Some(now + PAUSE));
        assert!(told_voice(&session.handle(Input::Tick, now + PAUSE / 2)).is_empty(), "still within the pause");
        assert_eq!(told_voice(&session.handle(Input::Tick, now + PAUSE)), ["The caller pressed 2"]);
        assert!(told_voice(&session.handle(Input::Tick, now + PAUSE * 3)).is_empty(), "told once");
    }

    #[test]
    fn a_text_agent_gets_the_keys_as_a_typed_input() {
        let (mut session, _) = Session::start(core("disputes"), init());
        let effects = session.handle(Input::Dtmf { digits: "9#".into() }, Instant::now());
        let asked = effects.iter().any(|e| match e {
            Effect::CallModel(request) => format!("{:?}", request.messages.last()).contains("The caller pressed 9 #"),
            _ => false,
        });
        assert!(asked, "the model is asked about the keys: {effects:?}");
    }

    #[test]
    fn bad_or_too_fast_keys_are_refused_with_their_code_and_not_told() {
        let (mut session, _) = Session::start_voice(core("triage"), init());
        let now = Instant::now();
        let effects = session.handle(Input::Dtmf { digits: "1x#".into() }, now);
        assert_eq!((errors(&effects), told_voice(&effects)), (vec!["invalid_dtmf".to_owned()], vec![]));
        assert_eq!(errors(&session.handle(Input::Dtmf { digits: String::new() }, now)), ["invalid_dtmf"]);
        let flood = "1".repeat(crate::dtmf::MAX_DIGITS);
        assert_eq!(told_voice(&session.handle(Input::Dtmf { digits: flood.clone() }, now)).len(), 1);
        let effects = session.handle(Input::Dtmf { digits: "5#".into() }, now);
        assert_eq!((errors(&effects), told_voice(&effects)), (vec!["dtmf_rate".to_owned()], vec![]));
        let later = session.handle(Input::Dtmf { digits: "5#".into() }, now + Duration::from_secs(1));
        assert_eq!(told_voice(&later), ["The caller pressed 5 #"], "a second later keys are taken again");
    }
}
