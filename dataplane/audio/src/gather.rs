//! Frames of a caller's audio gathered into fewer, larger pieces: the runtime's events to
//! the voice model (`switchboard_models::sonic::chunk`) and the gateway's frames to the
//! runtime (its relay's `AudioBatch`). Each piece costs its sender and receiver the same
//! whatever it carries, so fewer cost less; a frame waits at most `hold` for the rest of its
//! piece. What goes alone without being gathered is each user's own rule. Generic over the
//! clock (`std` or tokio's pausable `Instant`), pure and I/O-free.

use std::ops::Add;
use std::time::Duration;

/// The audio of the next piece.
#[derive(Debug)]
pub struct Gather<I> {
    /// Bytes from which the piece is complete.
    target: usize,
    /// The longest a frame waits.
    hold: Duration,
    pending: Vec<u8>,
    /// When the pending piece's first frame came.
    since: Option<I>,
}

impl<I: Copy + Add<Duration, Output = I>> Gather<I> {
    /// Pieces of `target` bytes, a frame waiting at most `hold`.
    pub fn new(target: usize, hold: Duration) -> Self {
        Self { target, hold, pending: Vec::new(), since: None }
    }

    /// Bytes from which a piece is complete.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds a frame come at `now`; the piece, once it holds `target` bytes.
    pub fn push(&mut self, frame: &[u8], now: I) -> Option<Vec<u8>> {
        if self.pending.is_empty() {
            self.since = Some(now);
            self.pending.reserve(self.target.min(64 * 1024).max(frame.len()));
        }
        self.pending.extend_from_slice(frame);
        if self.pending.len() >= self.target { self.take() } else { None }
    }

    /// When the pending piece is to go however much it holds.
    pub fn deadline(&self) -> Option<I> {
        self.since.map(|since| since + self.hold)
    }

    /// The pending piece, if any (it goes now).
    pub fn take(&mut self) -> Option<Vec<u8>> {
        self.since = None;
        if self.pending.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn frames_gather_in_order_until_the_target_and_the_deadline_is_the_first_frame_s() {
        let mut gather = Gather::new(1920, Duration::from_millis(60));
        let start = Instant::now();
        assert!(gather.is_empty());
        assert_eq!(gather.push(&[1; 640], start), None);
        assert_eq!(gather.deadline(), Some(start + Duration::from_millis(60)));
        assert_eq!(gather.push(&[2; 640], start + Duration::from_millis(20)), None);
        assert_eq!(gather.deadline(), Some(start + Duration::from_millis(60)));
        let piece = gather.push(&[3; 640], start + Duration::from_millis(40)).expect("complete");
        assert_eq!(piece.len(), 1920);
        assert!(piece[..640].iter().all(|b| *b == 1) && piece[1280..].iter().all(|b| *b == 3));
        assert_eq!((gather.deadline(), gather.take()), (None, None));
    }

    #[test]
    fn a_partial_piece_is_taken_whole() {
        let mut gather = Gather::new(1920, Duration::from_millis(60));
        assert_eq!(gather.push(&[5; 640], Instant::now()), None);
        assert!(!gather.is_empty());
        assert_eq!(gather.take(), Some(vec![5; 640]));
        assert!(gather.is_empty());
        assert_eq!(gather.deadline(), None);
    }
}
