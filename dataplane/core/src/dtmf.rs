//! Keys pressed on a phone's keypad (DTMF), as `bidi_dtmf` brings them: which characters
//! are keys ([`check`]), how fast a person presses them ([`KeyRate`]), and how the agent is
//! told them ([`told`]). Pure: the session's `keys` sub-state uses it, and so may any
//! adapter that wants to refuse bad keys before they travel.

use std::time::{Duration, Instant};

use crate::protocol::ErrorCode;

/// Most keys in one `bidi_dtmf`, and most the agent is told at once.
pub const MAX_DIGITS: usize = 32;

/// Keys a caller may press in a burst before [`KEYS_PER_SECOND`] applies.
pub const BURST: u32 = 32;

/// Keys a second a caller may press, sustained (people press 3 to 8).
pub const KEYS_PER_SECOND: u32 = 10;

/// A pause this long after the last key tells the agent the keys pressed so far.
pub const PAUSE: Duration = Duration::from_millis(1500);

/// Why a `bidi_dtmf` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DtmfError {
    /// `digits` was empty.
    #[error("bidi_dtmf.digits is empty; send the keys pressed (0-9, *, #, A-D)")]
    Empty,
    /// More keys than one message may carry.
    #[error("bidi_dtmf.digits holds {0} keys, more than {MAX_DIGITS}; send keys as they are pressed")]
    TooLong(usize),
    /// A character that is no keypad key.
    #[error("bidi_dtmf.digits holds {0:?}, which is no keypad key; send 0-9, *, # or A-D")]
    NotAKey(char),
    /// Faster than a person presses keys.
    #[error(
        "keys arrive faster than a person presses them (a burst of {BURST}, then {KEYS_PER_SECOND} a second); these were dropped"
    )]
    TooFast,
}

impl DtmfError {
    /// The `bidi_error` code of the refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::TooFast => ErrorCode::DtmfRate,
            Self::Empty | Self::TooLong(_) | Self::NotAKey(_) => ErrorCode::InvalidDtmf,
        }
    }
}

/// Whether `key` is a keypad key: `0`-`9`, `*`, `#`, `A`-`D`.
pub fn is_key(key: char) -> bool {
    matches!(key, '0'..='9' | '*' | '#' | 'A'..='D')
}

/// Checks the `digits` of a `bidi_dtmf`: 1 to [`MAX_DIGITS`] keypad keys.
pub fn check(digits: &str) -> Result<(), DtmfError> {
    if digits.is_empty() {
        return Err(DtmfError::Empty);
    }
    if let Some(bad) = digits.chars().find(|c| !is_key(*c)) {
        return Err(DtmfError::NotAKey(bad));
    }
    let count = digits.chars().count();
    if count > MAX_DIGITS {
        return Err(DtmfError::TooLong(count));
    }
    Ok(())
}

/// The caller's input that tells the agent the keys: "The caller pressed 1 2 3 #".
pub fn told(keys: &str) -> String {
    let mut text = String::from("The caller pressed");
    for key in keys.chars() {
        text.push(' ');
        text.push(key);
    }
    text
}

/// A token bucket of key presses: [`BURST`] at once, refilled at [`KEYS_PER_SECOND`].
#[derive(Clone, Debug)]
pub struct KeyRate {
    /// Keys that may still be pressed, in thousandths of a key.
    milli_keys: u64,
    /// When the bucket was last refilled.
    at: Option<Instant>,
}

impl Default for KeyRate {
    fn default() -> Self {
        Self { milli_keys: u64::from(BURST) * 1000, at: None }
    }
}

impl KeyRate {
    /// Takes `count` keys pressed at `now`, or refuses them all (none is taken).
    pub fn take(&mut self, count: usize, now: Instant) -> Result<(), DtmfError> {
        let full = u64::from(BURST) * 1000;
        if let Some(at) = self.at {
            let elapsed = now.saturating_duration_since(at).as_millis();
            let refill = u64::try_from(elapsed).unwrap_or(u64::MAX).saturating_mul(u64::from(KEYS_PER_SECOND));
            self.milli_keys = self.milli_keys.saturating_add(refill).min(full);
        }
        self.at = Some(now);
        let cost = u64::try_from(count).unwrap_or(u64::MAX).saturating_mul(1000);
        if cost > self.milli_keys {
            return Err(DtmfError::TooFast);
        }
        self.milli_keys -= cost;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_keypad_keys_up_to_the_bound_pass() {
        assert_eq!(check("0123456789*#ABCD"), Ok(()));
        assert_eq!(check(""), Err(DtmfError::Empty));
        assert_eq!(check("12a"), Err(DtmfError::NotAKey('a')));
        assert_eq!(check("1 2"), Err(DtmfError::NotAKey(' ')));
        assert_eq!(check("E"), Err(DtmfError::NotAKey('E')));
        assert_eq!(check(&"1".repeat(MAX_DIGITS)), Ok(()));
        assert_eq!(check(&"1".repeat(MAX_DIGITS + 1)), Err(DtmfError::TooLong(MAX_DIGITS + 1)));
        assert_eq!(check("1".repeat(MAX_DIGITS + 1).as_str()).map_err(|e| e.code()), Err(ErrorCode::InvalidDtmf));
        assert_eq!(DtmfError::TooFast.code(), ErrorCode::DtmfRate);
    }

    #[test]
    fn the_agent_is_told_each_key() {
        assert_eq!(told("123#"), "The caller pressed 1 2 3 #");
        assert_eq!(told("*"), "The caller pressed *");
    }

    #[test]
    fn a_burst_then_ten_a_second() {
        let start = Instant::now();
        let mut rate = KeyRate::default();
        assert_eq!(rate.take(BURST as usize, start), Ok(()));
        assert_eq!(rate.take(1, start), Err(DtmfError::TooFast), "the burst is spent");
        assert_eq!(rate.take(1, start + Duration::from_millis(100)), Ok(()), "a tenth of a second buys a key");
        assert_eq!(rate.take(1, start + Duration::from_millis(150)), Err(DtmfError::TooFast));
        assert_eq!(
            rate.take(BURST as usize, start + Duration::from_secs(60)),
            Ok(()),
            "refilled, never past the burst"
        );
        assert_eq!(rate.take(1, start + Duration::from_secs(60)), Err(DtmfError::TooFast));
    }

    proptest! {
        /// Whatever the string, `check` passes exactly the non-empty strings of at most
        /// MAX_DIGITS keypad keys.
        #[test]
        fn check_passes_exactly_bounded_keys(digits in "[0-9*#A-Da-z ]{0,40}") {
            let valid = !digits.is_empty() && digits.len() <= MAX_DIGITS && digits.chars().all(is_key);
            prop_assert_eq!(check(&digits).is_ok(), valid);
        }

        /// However the presses are timed, no more keys are taken over a span than the
        /// burst and the rate allow.
        #[test]
        fn the_rate_bounds_any_sequence(gaps in proptest::collection::vec((0u64..400, 1usize..6), 1..80)) {
            let start = Instant::now();
            let mut rate = KeyRate::default();
            let (mut at, mut taken) = (start, 0u64);
            for (gap, count) in gaps {
                at += Duration::from_millis(gap);
                if rate.take(count, at).is_ok() {
                    taken += count as u64;
                }
            }
            let allowed = u64::from(BURST) + (at - start).as_millis() as u64 * u64::from(KEYS_PER_SECOND) / 1000;
            prop_assert!(taken <= allowed, "{} keys taken, {} allowed", taken, allowed);
        }
    }
}
