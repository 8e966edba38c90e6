//! RFC 4733 telephone events (DTMF digits in RTP): the 4-byte event payload, a
//! [`Receiver`] that reports each key press once however its packets repeat (updates
//! while the key is held, the end packet sent three times) and ignores packets of an
//! event already over, and [`packets`] that writes the packets of one key press.

/// Why a telephone-event payload does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelephoneError {
    /// Shorter than the 4 bytes of an event.
    #[error("a telephone-event payload is {0} bytes, less than 4")]
    Short(usize),
    /// An event code that is not a DTMF key (0-15) or flash (16).
    #[error("telephone event {0} is not a DTMF key or flash")]
    Unknown(u8),
}

/// A telephone event: one of the sixteen DTMF keys, or a hook flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// `0`-`9`, `*`, `#`, `A`-`D`.
    Digit(char),
    /// A hook flash (event 16).
    Flash,
}

impl Event {
    /// The event of a code (RFC 4733 §3.2).
    pub fn from_code(code: u8) -> Result<Self, TelephoneError> {
        Ok(match code {
            0..=9 => Self::Digit(char::from(b'0' + code)),
            10 => Self::Digit('*'),
            11 => Self::Digit('#'),
            12..=15 => Self::Digit(char::from(b'A' + code - 12)),
            16 => Self::Flash,
            other => return Err(TelephoneError::Unknown(other)),
        })
    }

    /// The code of an event; `None` for a character that is no DTMF key.
    pub fn code_of(key: char) -> Option<u8> {
        Some(match key {
            '0'..='9' => key as u8 - b'0',
            '*' => 10,
            '#' => 11,
            'A'..='D' => key as u8 - b'A' + 12,
            _ => return None,
        })
    }
}

/// One telephone-event payload (RFC 4733 §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The event code.
    pub code: u8,
    /// The end bit: the key was released.
    pub end: bool,
    /// The volume, in -dBm0 (0-63).
    pub volume: u8,
    /// How long the key has been held, in timestamp units (of the event's clock: 8 kHz,
    /// or the audio codec's, e.g. 48 kHz beside Opus).
    pub duration: u16,
}

impl Payload {
    /// Reads the first event of a payload (more may follow for redundancy; the first is
    /// the current one).
    pub fn parse(bytes: &[u8]) -> Result<Self, TelephoneError> {
        let [code, flags, high, low, ..] = *bytes else { return Err(TelephoneError::Short(bytes.len())) };
        Ok(Self { code, end: flags & 0x80 != 0, volume: flags & 0x3F, duration: u16::from_be_bytes([high, low]) })
    }

    /// The 4 bytes on the wire.
    pub fn to_bytes(self) -> [u8; 4] {
        let [high, low] = self.duration.to_be_bytes();
        [self.code, u8::from(self.end) << 7 | (self.volume & 0x3F), high, low]
    }
}

/// What a [`Receiver`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Telephone {
    /// A key went down (reported once per event).
    Pressed(Event),
    /// The key went up after `duration_ms` (reported once per event).
    Released {
        /// The event.
        event: Event,
        /// How long it was held.
        duration_ms: u32,
    },
}

/// Turns the packets of one stream's telephone events into one press and one release
/// each. An event is named by its RTP timestamp (every packet of one press carries the
/// press's start); it keeps only the latest event's state.
#[derive(Clone, Debug, Default)]
pub struct Receiver {
    current: Option<Current>,
}

#[derive(Clone, Copy, Debug)]
struct Current {
    timestamp: u32,
    ended: bool,
}

impl Receiver {
    /// A receiver that has seen no event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one telephone-event packet (its RTP timestamp and payload, at `clock` Hz) and
    /// returns what it tells that was not told before: at most a press and a release.
    pub fn receive(&mut self, timestamp: u32, payload: &[u8], clock: u32) -> Result<Vec<Telephone>, TelephoneError> {
        let payload = Payload::parse(payload)?;
        let event = Event::from_code(payload.code)?;
        let mut out = Vec::new();
        match self.current {
            // An older event's packet arriving late: already told, or over.
            Some(c) if (timestamp.wrapping_sub(c.timestamp) as i32) < 0 => return Ok(out),
            Some(c) if c.timestamp == timestamp => {
                if c.ended {
                    return Ok(out);
                }
            }
            _ => {
                self.current = Some(Current { timestamp, ended: false });
                out.push(Telephone::Pressed(event));
            }
        }
        if payload.end {
            self.current = Some(Current { timestamp, ended: true });
            out.push(Telephone::Released {
                event,
                duration_ms: (u64::from(payload.duration) * 1000 / u64::from(clock.max(1))) as u32,
            });
        }
        Ok(out)
    }
}

/// One packet of a key press to send: when, relative to the press, and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Milliseconds after the first packet.
    pub at_ms: u32,
    /// The marker bit (set on the first packet only).
    pub marker: bool,
    /// The payload.
    pub payload: Payload,
}

/// The packets of one key press held `duration_ms` (RFC 4733 §2.5), durations at `clock`
/// Hz: one at once with the marker bit, an update every 50 ms, then the end packet three
/// times. They all carry the press's start as their RTP timestamp.
pub fn packets(event: Event, duration_ms: u32, clock: u32) -> Vec<Planned> {
    let code = match event {
        Event::Digit(key) => Event::code_of(key).unwrap_or(0),
        Event::Flash => 16,
    };
    let duration_ms = duration_ms.clamp(40, 5000);
    let units = |ms: u32| u16::try_from(u64::from(ms) * u64::from(clock) / 1000).unwrap_or(u16::MAX);
    let mut out = Vec::new();
    let mut at = 0;
    while at < duration_ms {
        out.push(Planned {
            at_ms: at,
            marker: at == 0,
            payload: Payload { code, end: false, volume: 10, duration: units(at) },
        });
        at += 50;
    }
    for _ in 0..3 {
        out.push(Planned {
            at_ms: duration_ms,
            marker: false,
            payload: Payload { code, end: true, volume: 10, duration: units(duration_ms) },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(code: u8, end: bool, duration: u16) -> [u8; 4] {
        Payload { code, end, volume: 10, duration }.to_bytes()
    }

    #[test]
    fn codes_name_keys() {
        let keys: String = (0..16)
            .map(|c| match Event::from_code(c).unwrap() {
                Event::Digit(k) => k,
                Event::Flash => '!',
            })
            .collect();
        assert_eq!(keys, "0123456789*#ABCD");
        assert_eq!(Event::from_code(16), Ok(Event::Flash));
        assert_eq!(Event::from_code(17), Err(TelephoneError::Unknown(17)));
        assert!(keys.chars().enumerate().all(|(i, k)| Event::code_of(k) == Some(i as u8)));
    }

    #[test]
    fn a_press_is_told_once_and_its_end_once_whatever_repeats() {
        let mut r = Receiver::new();
        assert_eq!(r.receive(1000, &bytes(5, false, 0), 8000).unwrap(), [Telephone::Pressed(Event::Digit('5'))]);
        assert!(r.receive(1000, &bytes(5, false, 400), 8000).unwrap().is_empty());
        assert!(r.receive(1000, &bytes(5, false, 400), 8000).unwrap().is_empty(), "a duplicate");
        let end = r.receive(1000, &bytes(5, true, 800), 8000).unwrap();
        assert_eq!(end, [Telephone::Released { event: Event::Digit('5'), duration_ms: 100 }]);
        assert!(r.receive(1000, &bytes(5, true, 800), 8000).unwrap().is_empty(), "the end's retransmission");
        assert!(r.receive(1000, &bytes(5, true, 800), 8000).unwrap().is_empty());
    }

    #[test]
    fn a_lost_start_still_tells_the_press_and_a_late_packet_nothing() {
        let mut r = Receiver::new();
        let only_end = r.receive(2000, &bytes(11, true, 1600), 8000).unwrap();
        assert_eq!(only_end.len(), 2, "press and release from the end packet alone");
        assert_eq!(r.receive(3000, &bytes(1, false, 0), 8000).unwrap(), [Telephone::Pressed(Event::Digit('1'))]);
        assert!(r.receive(2000, &bytes(11, true, 1600), 8000).unwrap().is_empty(), "an older event");
        // The same key pressed again is a new event (a new timestamp), across the wrap.
        let mut r = Receiver::new();
        r.receive(u32::MAX - 10, &bytes(1, true, 800), 8000).unwrap();
        assert_eq!(r.receive(500, &bytes(1, false, 0), 8000).unwrap(), [Telephone::Pressed(Event::Digit('1'))]);
    }

    #[test]
    fn bad_payloads_are_errors() {
        assert_eq!(Receiver::new().receive(0, &[1, 2], 8000), Err(TelephoneError::Short(2)));
        assert_eq!(Receiver::new().receive(0, &bytes(99, false, 0), 8000), Err(TelephoneError::Unknown(99)));
    }

    #[test]
    fn planned_packets_are_read_back_as_one_press() {
        let plan = packets(Event::Digit('#'), 120, 8000);
        assert_eq!(plan.iter().map(|p| p.at_ms).collect::<Vec<_>>(), [0, 50, 100, 120, 120, 120]);
        assert!(plan[0].marker && plan[1..].iter().all(|p| !p.marker));
        let mut r = Receiver::new();
        let told: Vec<Telephone> =
            plan.iter().flat_map(|p| r.receive(7, &p.payload.to_bytes(), 8000).unwrap()).collect();
        assert_eq!(
            told,
            [Telephone::Pressed(Event::Digit('#')), Telephone::Released { event: Event::Digit('#'), duration_ms: 120 }]
        );
        // At 48 kHz (telephone-event beside Opus) the durations are six times the units.
        let wide = packets(Event::Digit('#'), 120, 48_000);
        assert_eq!(wide.last().map(|p| p.payload.duration), Some(5760));
        let mut r = Receiver::new();
        let told: Vec<Telephone> =
            wide.iter().flat_map(|p| r.receive(7, &p.payload.to_bytes(), 48_000).unwrap()).collect();
        assert_eq!(told[1], Telephone::Released { event: Event::Digit('#'), duration_ms: 120 });
    }
}
