//! A jitter buffer for one incoming stream, in one of two modes ([`JitterConfig::reorder`]):
//!
//! - **Forwarding** (`Some(window)`, the SIP edge's caller → agent path: the agent feeds a
//!   speech model and plays nothing out, so nothing needs a steady pace): a packet that
//!   arrives in order goes out at once ([`JitterBuffer::pop_ready`]); on a gap, the packets
//!   after it wait at most the reorder window (or until [`JitterConfig::backlog`] frames
//!   wait) for the missing one, then the missing frames are concealed and the stream goes on.
//!   Nothing is held much longer than that window (the owner asks after each packet and on
//!   each tick).
//! - **Paced** (`None`, phone to phone across a bridge): one frame out per tick
//!   ([`FRAME_MS`](super::FRAME_MS)) after [`JitterConfig::depth`] frames are held
//!   ([`JitterBuffer::pop`]). A playout that falls behind the phone's packets (its clock
//!   runs faster, or the owner's ticks came late) does not let the delay grow: frames held
//!   beyond `depth + backlog` are dropped, oldest first, and counted
//!   ([`JitterBuffer::take_dropped`]).
//!
//! Either way it puts packets back in order within its window, drops duplicates and packets
//! too late to play, follows the sequence number across its wrap at 65535, holds at most
//! [`JitterConfig::capacity`] frames, and fills a missing frame of G.711 by repeating the
//! last one, fading it out, then silence (a codec whose bytes cannot be faded, G.722, is
//! concealed by the owner after decoding, with the same [`fade`] and
//! [`JitterBuffer::concealed`]). When nothing has come for a while (the caller's phone
//! stopped sending in silence) the paced mode stops and buffers again, so a late burst does
//! not grow the delay.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::g711::Law;

/// How the buffer behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JitterConfig {
    /// Frames held before playout starts (the delay it adds): 3 = 60 ms.
    pub depth: usize,
    /// The most frames held; a packet further ahead than this restarts the stream.
    pub capacity: usize,
    /// The most bytes in one frame's payload (20 ms of G.711 is 160).
    pub max_payload: usize,
    /// Missing frames concealed in a row before the buffer stops and buffers again (paced).
    pub max_concealed: usize,
    /// Paced: frames held past `depth` before the oldest are dropped (the playout fell
    /// behind). Forwarding: frames waiting behind a gap before the gap is concealed at once.
    pub backlog: usize,
    /// `Some(window)`: forward in-order packets at once and wait at most `window` for a
    /// missing one; `None`: paced playout, one frame a tick (see the module docs).
    pub reorder: Option<Duration>,
}

impl JitterConfig {
    /// The forwarding mode with a reorder window of `window`, the rest as the default.
    pub fn forwarding(window: Duration) -> Self {
        Self { reorder: Some(window), ..Self::default() }
    }
}

impl Default for JitterConfig {
    /// Paced: 60 ms of delay, one second held, up to 60 ms a packet, 200 ms concealed, at
    /// most 120 ms behind before the backlog is dropped.
    fn default() -> Self {
        Self { depth: 3, capacity: 50, max_payload: 480, max_concealed: 10, backlog: 3, reorder: None }
    }
}

/// What became of a pushed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Held for playout.
    Held,
    /// Already held.
    Duplicate,
    /// Its frame was already played (or concealed).
    Late,
    /// So far from the expected sequence that the stream restarted from it.
    Restarted,
    /// Its payload is larger than [`JitterConfig::max_payload`] or empty.
    Refused,
}

/// One tick's frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Playout {
    /// Nothing to play yet (buffering).
    Waiting,
    /// The frame that was sent.
    Frame(Vec<u8>),
    /// A lost frame, filled in.
    Concealed(Vec<u8>),
}

/// The gain of the n-th concealed frame in a row (1-based): the last frame repeated,
/// fading to silence by the fifth.
pub fn fade(n: usize) -> f32 {
    match n {
        1 => 1.0,
        2 => 0.7,
        3 => 0.4,
        4 => 0.2,
        _ => 0.0,
    }
}

/// The jitter buffer (see the module docs).
#[derive(Clone, Debug)]
pub struct JitterBuffer {
    config: JitterConfig,
    law: Option<Law>,
    frames: BTreeMap<u64, Vec<u8>>,
    /// The extended sequence number of the next frame to play; `None` before the first
    /// packet.
    next: Option<u64>,
    playing: bool,
    last: Vec<u8>,
    concealed: usize,
    ever_played: bool,
    /// Forwarding: since when a gap has held back the frames after it.
    gap_since: Option<Instant>,
    /// Frames dropped from a backlog (paced) since [`JitterBuffer::take_dropped`].
    dropped: u64,
}

impl JitterBuffer {
    /// An empty buffer for a stream of G.711 in this law, or (`None`) of a codec the owner
    /// conceals itself: its concealed frames are empty.
    pub fn new(law: Option<Law>, config: JitterConfig) -> Self {
        Self {
            config,
            law,
            frames: BTreeMap::new(),
            next: None,
            playing: false,
            last: Vec::new(),
            concealed: 0,
            ever_played: false,
            gap_since: None,
            dropped: 0,
        }
    }

    /// Whether it forwards at once rather than paces ([`JitterConfig::reorder`]).
    pub fn forwards(&self) -> bool {
        self.config.reorder.is_some()
    }

    /// Frames dropped from a backlog since this was last called (for the owner's metrics).
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Missing frames concealed in a row, up to the last one played (0 after a frame that
    /// came): the `n` of [`fade`].
    pub fn concealed(&self) -> usize {
        self.concealed
    }

    /// Whether no frame is held.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The payload held for the next tick, if it came: after a concealed frame, the packet
    /// that follows the lost one (whose in-band FEC, on an Opus call, rebuilds it).
    pub fn next_held(&self) -> Option<&[u8]> {
        self.frames.get(&self.next?).map(Vec::as_slice)
    }

    /// The extended (wrap-free) number of `sequence`: the one nearest to `reference`.
    fn extend(reference: u64, sequence: u16) -> u64 {
        let candidate = (reference & !0xFFFF) | u64::from(sequence);
        if candidate + 0x8000 < reference {
            candidate + 0x1_0000
        } else if candidate > reference + 0x8000 && candidate >= 0x1_0000 {
            candidate - 0x1_0000
        } else {
            candidate
        }
    }

    /// Takes one packet's sequence number and payload.
    pub fn push(&mut self, sequence: u16, payload: &[u8]) -> Pushed {
        if payload.is_empty() || payload.len() > self.config.max_payload {
            return Pushed::Refused;
        }
        // Extended numbers start at 2^32 so that packets before the first stay positive.
        let next = *self.next.get_or_insert(0x1_0000_0000 | u64::from(sequence));
        let reference = self.frames.last_key_value().map_or(next, |(&k, _)| k.max(next));
        let extended = Self::extend(reference, sequence);
        if extended < next {
            // Before anything played, an earlier packet that came second moves the start back.
            if self.playing || self.ever_played || next - extended >= self.config.capacity as u64 {
                return Pushed::Late;
            }
            self.next = Some(extended);
            self.frames.insert(extended, payload.to_vec());
            return Pushed::Held;
        }
        if extended >= next + self.config.capacity as u64 {
            self.frames.clear();
            self.frames.insert(extended, payload.to_vec());
            self.next = Some(extended);
            self.playing = false;
            self.gap_since = None;
            return Pushed::Restarted;
        }
        if self.frames.contains_key(&extended) {
            return Pushed::Duplicate;
        }
        self.frames.insert(extended, payload.to_vec());
        Pushed::Held
    }

    /// The frame for this tick.
    pub fn pop(&mut self) -> Playout {
        let Some(next) = self.next else { return Playout::Waiting };
        if !self.playing {
            // Start once `depth` frames are held, from the first of them.
            if self.frames.len() < self.config.depth.max(1) {
                return Playout::Waiting;
            }
            self.playing = true;
            self.ever_played = true;
            self.concealed = 0;
            if let Some((&first, _)) = self.frames.first_key_value() {
                self.next = Some(first);
            }
            return self.pop();
        }
        let next = self.catch_up(next);
        self.next = Some(next + 1);
        if let Some(frame) = self.frames.remove(&next) {
            self.concealed = 0;
            frame.clone_into(&mut self.last);
            return Playout::Frame(frame);
        }
        self.conceal(next)
    }

    /// Paced: when more than `depth + backlog` frames are held from `next` on (the playout
    /// fell behind the phone's packets), skips to the last `depth` of them, counting what
    /// it skipped. Returns the frame to play now.
    fn catch_up(&mut self, next: u64) -> u64 {
        let Some((&newest, _)) = self.frames.last_key_value() else { return next };
        let limit = (self.config.depth.max(1) + self.config.backlog) as u64;
        if newest < next + limit {
            return next;
        }
        let from = newest + 1 - self.config.depth.max(1) as u64;
        self.frames = self.frames.split_off(&from);
        self.dropped += from - next;
        from
    }

    /// The frame for `next`, which is missing: the last one faded (G.711), or an empty one
    /// for the owner to conceal. `next` is already moved on.
    fn conceal(&mut self, next: u64) -> Playout {
        self.concealed += 1;
        if self.frames.is_empty() && self.concealed >= self.config.max_concealed {
            // Nothing came: the phone stopped sending (silence). Buffer again, expecting
            // the sequence where it stopped; frames already played stay late.
            self.playing = false;
            self.next = Some(next + 1 - self.concealed as u64);
        }
        let Some(law) = self.law else { return Playout::Concealed(Vec::new()) };
        let mut frame =
            if self.last.is_empty() { vec![law.silence(); super::FRAME_SAMPLES] } else { self.last.clone() };
        law.scale(&mut frame, fade(self.concealed));
        Playout::Concealed(frame)
    }

    /// Forwarding: the next frame ready at `now`, if any: the next packet in order, or a
    /// missing one concealed once the packets after it have waited the reorder window (or
    /// [`JitterConfig::backlog`] of them wait). Call after each push and on each tick, until
    /// it says [`Playout::Waiting`].
    pub fn pop_ready(&mut self, now: Instant) -> Playout {
        let Some(next) = self.next else { return Playout::Waiting };
        if let Some(frame) = self.frames.remove(&next) {
            self.next = Some(next + 1);
            self.playing = true;
            self.ever_played = true;
            if self.frames.is_empty() {
                // Frames still held have waited since the gap's wait began, at least.
                self.gap_since = None;
            }
            self.concealed = 0;
            frame.clone_into(&mut self.last);
            return Playout::Frame(frame);
        }
        let Some((&newest, _)) = self.frames.last_key_value() else {
            self.gap_since = None;
            return Playout::Waiting;
        };
        let since = *self.gap_since.get_or_insert(now);
        let window = self.config.reorder.unwrap_or(Duration::ZERO);
        let waiting = newest - next;
        if now.saturating_duration_since(since) < window && waiting <= self.config.backlog as u64 {
            return Playout::Waiting;
        }
        self.next = Some(next + 1);
        self.ever_played = true;
        let concealed = self.conceal(next);
        // `conceal` may have stopped the (paced) playout; forwarding goes on.
        self.playing = true;
        concealed
    }
}

#[cfg(test)]
mod tests;
