//! A jitter buffer for one incoming stream: packets in as they arrive, one frame
//! out per tick ([`FRAME_MS`](super::FRAME_MS)). It puts packets back in order within its
//! window, drops duplicates and packets too late to play, follows the sequence number
//! across its wrap at 65535, holds at most [`JitterConfig::capacity`] frames, and fills a
//! missing frame of G.711 by repeating the last one, fading it out, then silence (a codec
//! whose bytes cannot be faded, G.722, is concealed by the owner after decoding, with the
//! same [`fade`] and [`JitterBuffer::concealed`]). When nothing
//! has come for a while (the caller's phone stopped sending in silence) it stops and
//! buffers again, so a late burst does not grow the delay.

use std::collections::BTreeMap;

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
    /// Missing frames concealed in a row before the buffer stops and buffers again.
    pub max_concealed: usize,
}

impl Default for JitterConfig {
    /// 60 ms of delay, one second held, up to 60 ms a packet, 200 ms concealed.
    fn default() -> Self {
        Self { depth: 3, capacity: 50, max_payload: 480, max_concealed: 10 }
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
        }
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
        self.next = Some(next + 1);
        if let Some(frame) = self.frames.remove(&next) {
            self.concealed = 0;
            frame.clone_into(&mut self.last);
            return Playout::Frame(frame);
        }
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
}

#[cfg(test)]
mod tests;
