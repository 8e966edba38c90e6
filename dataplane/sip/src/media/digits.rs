//! Keys the edge presses on a call (the agent's `send_digits`), without I/O: the keys as the
//! agent asked for them, read and bounded ([`parse`]), and a [`Sequence`] that says, frame
//! by frame, what the call's RTP stream carries while they are pressed: the RFC 4733
//! telephone-event packets of each key, or silence between keys.
//!
//! Each key is held [`KEY_MS`]: one packet a frame (the audio's packetization interval),
//! the first with the marker bit, each with the event's duration so far (the packet at
//! frame *k* of the key covers its first *k*+1 frames); its last frame's packet carries the
//! end bit and the whole duration, and is sent twice more on the next two frames (three
//! end packets, as RFC 4733 asks, spaced so that one lost packet loses no key). Every
//! packet of a key carries the key's start as its RTP timestamp (the stream's media clock
//! when its first packet goes); durations count the telephone-event clock (8 kHz beside
//! G.711 and G.722, 48 kHz beside Opus). [`GAP_MS`] passes between one key's end and the
//! next key (the two end retransmissions fall in it, silence fills the rest), and a `w`
//! waits [`PAUSE_MS`] of silence. While a sequence runs the stream carries nothing else:
//! the agent's audio waits in its queue until the last key's gap is over
//! ([`super::session::MediaSession::press`]).

use super::FRAME_MS;
use super::telephone::{Event, Payload};

/// Most keys and pauses one sequence holds (as many as one `bidi_dtmf` carries).
pub const MAX_DIGITS: usize = 32;
/// How long each key is held.
pub const KEY_MS: u32 = 120;
/// How long passes between one key's end and the next key.
pub const GAP_MS: u32 = 100;
/// How long a `w` waits.
pub const PAUSE_MS: u32 = 500;
/// The volume of the keys' tones, in -dBm0 (RFC 4733: DTMF is sent at -3 to -10 dBm0).
pub const VOLUME: u8 = 10;

/// Frames a key is held.
const KEY_FRAMES: u32 = KEY_MS / FRAME_MS;
/// Frames from a key's end to the next key.
const GAP_FRAMES: u32 = GAP_MS / FRAME_MS;
/// Frames of a `w`.
const PAUSE_FRAMES: u32 = PAUSE_MS / FRAME_MS;
/// End packets a key sends (the first and two retransmissions).
const END_PACKETS: u32 = 3;
const _: () = assert!(GAP_FRAMES >= END_PACKETS - 1, "the end retransmissions fall in the gap");

/// One step of a sequence: a key pressed, or a pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `0`-`9`, `*`, `#`, `A`-`D`.
    Key(Event),
    /// `w`: [`PAUSE_MS`] of silence.
    Pause,
}

/// Why keys do not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DigitsError {
    /// No key at all (empty, or pauses only).
    #[error("no key to press: give at least one of 0-9, *, #, A-D")]
    NoKey,
    /// More than [`MAX_DIGITS`] keys and pauses.
    #[error("{0} keys and pauses, more than {MAX_DIGITS}")]
    TooLong(usize),
    /// A character that is neither a key nor `w`.
    #[error("{0:?} is no key: press 0-9, *, #, A-D, or w for a pause")]
    NotAKey(char),
}

/// Reads keys as the agent sends them: 1 to [`MAX_DIGITS`] characters, each `0`-`9`, `*`,
/// `#`, `A`-`D` or `w`, at least one a key. Nothing else is taken (the core sends them in
/// this form; anything else came from elsewhere).
pub fn parse(text: &str) -> Result<Vec<Step>, DigitsError> {
    let count = text.chars().count();
    if count > MAX_DIGITS {
        return Err(DigitsError::TooLong(count));
    }
    let steps = text
        .chars()
        .map(|c| match c {
            'w' => Ok(Step::Pause),
            _ if Event::code_of(c).is_some() => Ok(Step::Key(Event::Digit(c))),
            _ => Err(DigitsError::NotAKey(c)),
        })
        .collect::<Result<Vec<Step>, DigitsError>>()?;
    if !steps.iter().any(|s| matches!(s, Step::Key(_))) {
        return Err(DigitsError::NoKey);
    }
    Ok(steps)
}

/// What one frame of the stream carries while a sequence runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A telephone-event packet. `start`: the key's first packet (its RTP timestamp is the
    /// media clock now, and it carries the marker bit); every later packet of the key
    /// carries that timestamp too.
    Event {
        /// The key's first packet.
        start: bool,
        /// The payload.
        payload: Payload,
    },
    /// Silence: between keys, and in a pause.
    Silence,
}

/// The frames of one sequence of keys (see the module docs).
#[derive(Clone, Debug)]
pub struct Sequence {
    steps: Vec<Step>,
    /// The step under way.
    step: usize,
    /// The frame of that step.
    frame: u32,
    /// Telephone-event clock units in one frame.
    units_per_frame: u32,
    /// Keys whose end went.
    pressed: u32,
}

impl Sequence {
    /// The sequence of `steps`, with telephone events on a `clock` Hz clock.
    pub fn new(steps: Vec<Step>, clock: u32) -> Self {
        Self { steps, step: 0, frame: 0, units_per_frame: clock / 1000 * FRAME_MS, pressed: 0 }
    }

    /// How long the whole sequence takes, in milliseconds.
    pub fn duration_ms(&self) -> u32 {
        self.steps.iter().map(|s| frames(*s) * FRAME_MS).sum()
    }

    /// The keys in the sequence.
    pub fn keys(&self) -> u32 {
        self.steps.iter().filter(|s| matches!(s, Step::Key(_))).count() as u32
    }

    /// The keys pressed so far: those whose first end packet went.
    pub fn pressed(&self) -> u32 {
        self.pressed
    }

    /// What the next frame carries; `None` once the sequence is over (the last step's gap
    /// or pause included).
    pub fn next_slot(&mut self) -> Option<Slot> {
        let step = *self.steps.get(self.step)?;
        let frame = self.frame;
        self.frame += 1;
        if self.frame >= frames(step) {
            self.step += 1;
            self.frame = 0;
        }
        let Step::Key(event) = step else { return Some(Slot::Silence) };
        if frame >= KEY_FRAMES + END_PACKETS - 1 {
            return Some(Slot::Silence);
        }
        let code = match event {
            Event::Digit(key) => Event::code_of(key).unwrap_or(0),
            Event::Flash => 16,
        };
        let end = frame + 1 >= KEY_FRAMES;
        if frame + 1 == KEY_FRAMES {
            self.pressed += 1;
        }
        let duration = u16::try_from((frame + 1).min(KEY_FRAMES) * self.units_per_frame).unwrap_or(u16::MAX);
        Some(Slot::Event { start: frame == 0, payload: Payload { code, end, volume: VOLUME, duration } })
    }
}

/// Why a call's media cannot press keys now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PressRefused {
    /// Offer/answer settled no telephone events with the phone.
    #[error("the far end settled no telephone events (RFC 4733) for this call")]
    NoTelephoneEvents,
    /// The edge may not send to the phone now (on hold, no address).
    #[error("the call's media is not being sent (the call is on hold)")]
    NotSending,
    /// Another sequence is under way.
    #[error("other keys are being pressed on this call")]
    Busy,
}

/// How a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pressed {
    /// The keys it held.
    pub keys: u32,
    /// The keys pressed (their end packet went).
    pub pressed: u32,
    /// Why it stopped before its end, if it did.
    pub interrupted: Option<&'static str>,
}

/// A sequence under way on a call's stream: its frames, the payload type its events go
/// with, and the RTP timestamp of the key being pressed.
#[derive(Clone, Debug)]
pub(crate) struct Pressing {
    pub(crate) sequence: Sequence,
    pub(crate) payload_type: u8,
    pub(crate) timestamp: u32,
}

impl Pressing {
    /// How it ended, `interrupted` or not.
    pub(crate) fn end(&self, interrupted: Option<&'static str>) -> Pressed {
        Pressed { keys: self.sequence.keys(), pressed: self.sequence.pressed(), interrupted }
    }
}

/// Frames a step takes: a key's press and its gap, or a pause.
fn frames(step: Step) -> u32 {
    match step {
        Step::Key(_) => KEY_FRAMES + GAP_FRAMES,
        Step::Pause => PAUSE_FRAMES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::telephone::{Receiver, Telephone};

    fn keys(text: &str) -> Vec<Step> {
        parse(text).expect("keys")
    }

    #[test]
    fn keys_read_and_anything_else_is_refused() {
        assert_eq!(
            keys("1#w*D"),
            [
                Step::Key(Event::Digit('1')),
                Step::Key(Event::Digit('#')),
                Step::Pause,
                Step::Key(Event::Digit('*')),
                Step::Key(Event::Digit('D')),
            ]
        );
        assert_eq!(parse(""), Err(DigitsError::NoKey));
        assert_eq!(parse("ww"), Err(DigitsError::NoKey));
        assert_eq!(parse("1 2"), Err(DigitsError::NotAKey(' ')));
        assert_eq!(parse("12a"), Err(DigitsError::NotAKey('a')), "the core sends A-D in capitals");
        assert_eq!(parse("E"), Err(DigitsError::NotAKey('E')));
        assert_eq!(parse("W1"), Err(DigitsError::NotAKey('W')));
        assert_eq!(parse(&"1".repeat(33)), Err(DigitsError::TooLong(33)));
        assert_eq!(parse(&"1".repeat(32)).map(|s| s.len()), Ok(32));
        assert_eq!(parse(&"١".repeat(40)), Err(DigitsError::TooLong(40)), "counted in characters");
    }

    /// The slots of `text` at `clock`, all of them.
    fn slots(text: &str, clock: u32) -> Vec<Slot> {
        let mut sequence = Sequence::new(keys(text), clock);
        std::iter::from_fn(|| sequence.next_slot()).collect()
    }

    #[test]
    fn a_key_is_held_its_time_ends_three_times_and_leaves_its_gap() {
        let slots = slots("5", 8000);
        assert_eq!(slots.len() as u32, (KEY_MS + GAP_MS) / FRAME_MS, "11 frames: 6 held, 5 of gap");
        let events: Vec<(bool, Payload)> = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Event { start, payload } => Some((*start, *payload)),
                Slot::Silence => None,
            })
            .collect();
        assert_eq!(events.len(), 8, "6 frames held, then the end twice more");
        assert!(events[0].0 && events[1..].iter().all(|(start, _)| !start), "the first starts the key");
        let durations: Vec<u16> = events.iter().map(|(_, p)| p.duration).collect();
        assert_eq!(durations, [160, 320, 480, 640, 800, 960, 960, 960], "the duration so far, at 8 kHz");
        let ends: Vec<bool> = events.iter().map(|(_, p)| p.end).collect();
        assert_eq!(ends, [false, false, false, false, false, true, true, true], "the end bit three times");
        assert!(events.iter().all(|(_, p)| p.code == 5 && p.volume == VOLUME));
        assert!(slots[8..].iter().all(|s| *s == Slot::Silence), "the rest of the gap is silence");
        assert_eq!(u32::from(events[5].1.duration) * 1000 / 8000, KEY_MS, "held 120 ms");
    }

    #[test]
    fn beside_opus_the_durations_count_its_48_khz_clock() {
        let slots = slots("#", 48_000);
        let Slot::Event { payload, .. } = slots[5] else { panic!("the end: {slots:?}") };
        assert_eq!((payload.code, payload.end, payload.duration), (11, true, 5760), "120 ms at 48 kHz");
        let Slot::Event { payload, .. } = slots[0] else { panic!("the start") };
        assert_eq!(payload.duration, 960, "a frame at 48 kHz");
    }

    #[test]
    fn a_sequence_is_its_keys_in_order_each_told_once_and_pauses_are_silence() {
        let mut sequence = Sequence::new(keys("12w1#"), 8000);
        assert_eq!(sequence.keys(), 4);
        assert_eq!(sequence.duration_ms(), 4 * (KEY_MS + GAP_MS) + PAUSE_MS);
        // Each key's packets carry the media clock at its first frame: read them back as a
        // phone would, frame by frame on an 8 kHz clock.
        let mut receiver = Receiver::new();
        let (mut told, mut frame, mut key_start, mut pressed_after) = (Vec::new(), 0u32, 0u32, Vec::new());
        let mut silent_frames = 0;
        while let Some(slot) = sequence.next_slot() {
            match slot {
                Slot::Event { start, payload } => {
                    if start {
                        key_start = frame * 160;
                    }
                    let heard = receiver.receive(key_start, &payload.to_bytes(), 8000).expect("a payload");
                    told.extend(heard);
                }
                Slot::Silence => silent_frames += 1,
            }
            pressed_after.push(sequence.pressed());
            frame += 1;
        }
        assert_eq!(frame * FRAME_MS, sequence.duration_ms());
        let pressed: String = told
            .iter()
            .filter_map(|t| match t {
                Telephone::Pressed(Event::Digit(key)) => Some(*key),
                _ => None,
            })
            .collect();
        assert_eq!(pressed, "121#", "the same key twice is two presses");
        let released = told.iter().filter(|t| matches!(t, Telephone::Released { duration_ms: 120, .. })).count();
        assert_eq!(released, 4);
        assert_eq!(silent_frames, 4 * 3 + PAUSE_MS / FRAME_MS, "three silent frames a key, and the pause");
        assert_eq!(pressed_after[5], 1, "a key counts once its end went");
        assert_eq!(sequence.pressed(), 4);
        assert_eq!(sequence.next_slot(), None, "over");
    }
}
