//! Resume: what a session leaves behind when its client goes away, and where it waits.
//!
//! - **Tokens.** Every `bidi_connection_start` the gateway relays carries a fresh resume
//!   token (256 random bits). The store never sees a token: a parked session's key is the
//!   SHA-256 of the client's identity (its API key's name) and the token, so a token is
//!   bound to its key — another key presenting it finds nothing — and a leaked store
//!   leaks no usable token.
//! - **Sequence numbers.** Every message the gateway sends a client counts, from 1, across
//!   connections ([`Replay`] keeps the newest within bounds), so a client that comes back
//!   with the number of the last one it received gets the rest, in order.
//! - **Parking.** A session whose client is gone without a goodbye lets its runtime finish
//!   the turn under way (bounded), then is [`Parked`] in the [`Store`] for the resume
//!   window and its runtime session is closed; a resume takes it out atomically (exactly
//!   one claimant wins) and the session reopens on a runtime pod with its memory and
//!   history. While a session is being parked, a marker says so: a resume that comes
//!   early waits for it instead of being refused.
//! - **Stores.** In memory (one gateway), or Redis (`--redis-url`), which every replica
//!   shares, so a client resumes through any of them. Entries expire with the window.
//!   What a session holds (its memory: the verified caller) is trusted on resume, so in
//!   Redis each parked session is sealed: signed with the gateway's key (every replica has
//!   it) over its store key and contents. One that was changed, moved to another key, or
//!   written by anyone else is refused ([`StoreError::Tampered`]), logged and counted.
//! - **A gateway that dies.** In Redis, an attached session is also held by a lease its
//!   gateway renews, with a snapshot of it at its whole moments (see `store::redis` and
//!   the session driver's keeper): a resume after the lease lapsed takes the snapshot. Each
//!   new token leaves the older one as an alias, so a token a handoff replaced still finds
//!   the session.

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_core::handoff::HandoffContext;
use switchboard_core::protocol::{ServerKind, ServerMessage};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::session::kept::Kept;

mod store;
pub(crate) use store::connect_lazily;
pub use store::{BACKOFF as STORE_BACKOFF, Entry, Renewal, Store, StoreError, Taken, open_text, seal_text};

/// What a session's continuation state is sealed for: the session and the credential that
/// may continue it (`session_start.continue_from`).
pub fn continue_key(session_id: &str, credential: &str) -> String {
    format!("continue:{session_id}:{credential}")
}

/// A fresh resume token: 256 random bits (two v4 UUIDs, from the OS's CSPRNG), as hex.
pub fn new_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Where a session with `token`, opened by `identity`, is parked.
pub fn store_key(identity: &str, token: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(identity.as_bytes());
    digest.update([0]);
    digest.update(token.as_bytes());
    hex::encode(digest.finalize())
}

/// A message sent to the client, kept for replay (sharing the sent frame's bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "StoredFrame", from = "StoredFrame")]
pub enum Frame {
    /// A text frame.
    Text(Utf8Bytes),
    /// A binary frame.
    Binary(Bytes),
}

impl Frame {
    /// Reply audio: a binary frame, or a `bidi_audio_stream` message.
    fn is_audio(&self) -> bool {
        match self {
            Self::Binary(_) => true,
            Self::Text(text) => ServerKind::AudioStream.is(text.as_str()),
        }
    }

    /// The frame in an allocation of its own. A frame read from a socket shares the
    /// reader's buffer (the frame layer splits each message off its read buffer), so a copy
    /// held for replay would keep that whole buffer alive for as long as it is held: 8 KiB
    /// for a 100-byte transcript line with tungstenite's buffer, measured as most of a live voice
    /// session's memory in the gateway (BENCHMARKS.md, `gateway`, part 7).
    fn compact(self) -> Self {
        match self {
            Self::Text(text) => Self::Text(text.as_str().to_owned().into()),
            Self::Binary(data) => Self::Binary(Bytes::copy_from_slice(&data)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Binary(data) => data.len(),
        }
    }

    /// The WebSocket message.
    pub fn into_message(self) -> Message {
        match self {
            Self::Text(text) => Message::Text(text),
            Self::Binary(data) => Message::Binary(data),
        }
    }
}

impl From<ServerMessage> for Frame {
    fn from(message: ServerMessage) -> Self {
        Self::Text(message.to_json().into())
    }
}

impl From<String> for Frame {
    fn from(text: String) -> Self {
        Self::Text(text.into())
    }
}

/// A [`Frame`] as stored.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredFrame {
    Text(String),
    Binary(Vec<u8>),
}

impl From<Frame> for StoredFrame {
    fn from(frame: Frame) -> Self {
        match frame {
            Frame::Text(text) => Self::Text(text.as_str().to_owned()),
            Frame::Binary(data) => Self::Binary(data.to_vec()),
        }
    }
}

impl From<StoredFrame> for Frame {
    fn from(frame: StoredFrame) -> Self {
        match frame {
            StoredFrame::Text(text) => Self::Text(text.into()),
            StoredFrame::Binary(data) => Self::Binary(data.into()),
        }
    }
}

/// The newest messages sent to a client, numbered, within a count and a byte budget. Reply
/// audio is kept only for the reply in progress ([`Replay::forget_audio`]): a client that
/// resumes has no use for the audio of a reply it has moved past, and that audio is most
/// of a voice session's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replay {
    /// The number of the last message sent (0: none yet).
    pub seq: u64,
    /// `(number, message)`, oldest first.
    frames: VecDeque<(u64, Frame)>,
    bytes: usize,
    /// The newest number that the budget pushed out (0: none): a client that resumes
    /// from before it missed messages that are gone.
    #[serde(default)]
    lost: u64,
}

/// What a client missed, from [`Replay::since`].
#[derive(Debug, PartialEq, Eq)]
pub struct Missed {
    /// The messages to send again, in order.
    pub frames: Vec<Frame>,
    /// Messages the client missed that are no longer held: `(first, last)` numbers.
    pub gap: Option<(u64, u64)>,
}

impl Replay {
    /// Numbers a message about to be sent and keeps a copy (in an allocation of its own:
    /// [`Frame::compact`]); returns its number. The oldest copies go first when the budget
    /// (`max_frames`, `max_bytes`) is exceeded.
    pub fn record(&mut self, frame: Frame, max_frames: usize, max_bytes: usize) -> u64 {
        self.seq += 1;
        self.bytes += frame.len();
        self.frames.push_back((self.seq, frame.compact()));
        self.trim(max_frames, max_bytes);
        self.seq
    }

    /// Drops the oldest copies until at most `max_frames` of `max_bytes` are held; a
    /// client that resumes from before them is told of the gap.
    pub fn trim(&mut self, max_frames: usize, max_bytes: usize) {
        while self.frames.len() > max_frames || self.bytes > max_bytes {
            let Some((n, old)) = self.frames.pop_front() else { break };
            self.bytes -= old.len();
            self.lost = n;
        }
    }

    /// The messages held less reply audio (as [`Replay::forget_audio`] leaves them), without
    /// copying the audio first: what a snapshot keeps.
    pub fn without_audio(&self) -> Self {
        let frames: VecDeque<(u64, Frame)> = self.frames.iter().filter(|(_, f)| !f.is_audio()).cloned().collect();
        let bytes = frames.iter().map(|(_, f)| f.len()).sum();
        Self { seq: self.seq, frames, bytes, lost: self.lost }
    }

    /// Drops the reply audio held (a new reply starts, or the caller interrupted the one
    /// in progress): no resuming client plays it. Its numbers are not reported as a gap.
    pub fn forget_audio(&mut self) {
        let before = self.frames.len();
        self.frames.retain(|(_, frame)| !frame.is_audio());
        if self.frames.len() != before {
            self.bytes = self.frames.iter().map(|(_, f)| f.len()).sum();
        }
    }

    /// Takes a number for a message that is not kept (a `bidi_connection_start`: a
    /// resumed client gets a fresh one, never the old one again).
    pub fn skip(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The messages after `last` (the last number the client received; `None`: all held).
    pub fn since(&self, last: Option<u64>) -> Missed {
        let first_held = self.frames.front().map_or(self.seq + 1, |(n, _)| *n);
        let from = last.map_or(first_held, |l| l.saturating_add(1));
        let gap = (from <= self.lost).then_some((from, self.lost));
        let frames = self.frames.iter().filter(|(n, _)| *n >= from).map(|(_, f)| f.clone()).collect();
        Missed { frames, gap }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Where a parked session was placed ([`Parked::placed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The Agent (`namespace/name`) it was placed for: only its streams open there.
    pub agent: String,
    /// The fallback region.
    pub region: String,
    /// Why: `full` or `failing`.
    pub cause: String,
}

impl Placement {
    /// The cause as the machine keeps it; `None` for one this version does not know.
    pub fn cause(&self) -> Option<&'static str> {
        ["full", "failing"].into_iter().find(|c| *c == self.cause)
    }
}

/// A session waiting for its client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Parked {
    /// The gateway's session id.
    pub session_id: String,
    /// The serving Agent's namespace and name.
    pub namespace: String,
    /// The serving Agent.
    pub agent: String,
    /// The client's voice choice.
    pub voice: Option<String>,
    /// The client's modalities.
    pub modalities: Vec<String>,
    /// The text model the client chose and the agent it chose it for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<(String, String)>,
    /// The client's audio formats (`session_start.audio`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<switchboard_core::protocol::AudioSettings>,
    /// Memory, history, return target, inputs in flight.
    pub kept: Kept,
    /// A handoff the runtime made while the client was away (performed on resume).
    pub handoff: Option<(String, HandoffContext)>,
    /// Runtime streams opened so far after the first.
    pub generation: u64,
    /// The messages sent, for replay.
    pub replay: Replay,
    /// The W3C `traceparent` of the gateway's session span it parked under (none when not
    /// traced): the resumed session's span is its child, so a resume continues the trace —
    /// on this replica or, through the shared store (sealed like the rest), on another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// A test session reaches candidate pods, wherever it resumes.
    #[serde(default, skip_serializing_if = "is_live")]
    pub reach: crate::directory::Reach,
    /// The variant the session runs of each Agent it reached that runs variants, by
    /// `namespace/name`: a resumed session keeps them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub variants: std::collections::BTreeMap<String, String>,
    /// Why the session is served in text only (an outage's `switch` or `breaker`), if it
    /// is: a resumed session stays so, and its notices say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_only: Option<String>,
    /// The fallback region the session was placed on (its Agent's own was full or
    /// failing), if it was: a resumed session opens that Agent's streams there again and
    /// takes its slot in that region's pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<Placement>,
}

fn is_live(reach: &crate::directory::Reach) -> bool {
    *reach == crate::directory::Reach::Live
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Frame {
        Frame::Text(s.to_owned().into())
    }

    #[test]
    fn replay_numbers_every_message_and_keeps_the_newest_within_budget() {
        let mut replay = Replay::default();
        for i in 1..=5 {
            assert_eq!(replay.record(text(&format!("m{i}")), 3, 1 << 20), i);
        }
        // Held: 3, 4, 5.
        assert_eq!(replay.since(Some(3)), Missed { frames: vec![text("m4"), text("m5")], gap: None });
        assert_eq!(replay.since(Some(5)), Missed { frames: vec![], gap: None });
        assert_eq!(
            replay.since(Some(0)),
            Missed { frames: vec![text("m3"), text("m4"), text("m5")], gap: Some((1, 2)) },
            "what is no longer held is reported as a gap"
        );
        assert_eq!(replay.since(None).frames.len(), 3, "no number: everything held");
        assert_eq!(replay.since(Some(99)), Missed { frames: vec![], gap: None }, "a number from the future: nothing");
        assert_eq!(replay.skip(), 6, "a skipped number is not held");
        assert_eq!(replay.since(Some(5)), Missed { frames: vec![], gap: None });
        // The byte budget: one 10-byte message fits in 12, two do not.
        let mut small = Replay::default();
        small.record(text("0123456789"), 100, 12);
        small.record(text("abcdefghij"), 100, 12);
        assert_eq!(small.bytes(), 10);
        assert_eq!(small.since(None).frames, vec![text("abcdefghij")]);
        // Shedding under memory pressure: the oldest go, and a resume from before them is
        // told of the gap.
        let mut shed = Replay::default();
        for i in 1..=4 {
            shed.record(text(&format!("m{i}-456789")), 100, 1 << 20);
        }
        shed.trim(100, 20);
        assert_eq!(shed.bytes(), 18, "two of 9 bytes fit in 20");
        assert_eq!(
            shed.since(Some(1)),
            Missed { frames: vec![text("m3-456789"), text("m4-456789")], gap: Some((2, 2)) }
        );
    }

    #[test]
    fn reply_audio_is_held_only_for_the_reply_in_progress_and_its_numbers_are_no_gap() {
        let audio =
            || Frame::Text(ServerMessage::BidiAudioStream { audio: "A".repeat(1000), format: None }.to_json().into());
        let mut replay = Replay::default();
        replay.record(text("reply 1"), 100, 1 << 20);
        replay.record(audio(), 100, 1 << 20);
        replay.record(Frame::Binary(vec![0; 640].into()), 100, 1 << 20);
        let before = replay.bytes();
        let snapshot = replay.without_audio();
        replay.forget_audio();
        assert_eq!(replay.bytes(), before - audio().len() - 640, "only the text is held");
        assert_eq!(snapshot, replay, "a snapshot holds what forgetting the audio leaves");
        replay.record(text("reply 2"), 100, 1 << 20);
        replay.record(audio(), 100, 1 << 20);
        let missed = replay.since(Some(0));
        assert_eq!(missed.frames, vec![text("reply 1"), text("reply 2"), audio()], "the new reply's audio stays");
        assert_eq!(missed.gap, None, "dropped audio is no gap");
    }

    #[test]
    fn a_held_frame_does_not_keep_the_buffer_it_was_read_into() {
        // As the frame layer hands over a message: split off its read buffer, sharing it.
        let mut buffer = bytes::BytesMut::with_capacity(8 * 1024);
        buffer.extend_from_slice(br#"{"type":"bidi_transcript_stream","text":"hi"}"#);
        buffer.extend_from_slice(&[0; 640]);
        let text = buffer.split_to(45).freeze();
        let binary = buffer.split_to(640).freeze();
        let text = Frame::Text(Utf8Bytes::try_from(text.clone()).expect("utf-8"));
        let mut replay = Replay::default();
        replay.record(text.clone(), 100, 1 << 20);
        replay.record(Frame::Binary(binary.clone()), 100, 1 << 20);
        let held = replay.since(None).frames;
        assert_eq!(held, vec![text.clone(), Frame::Binary(binary.clone())], "the same messages");
        let (Frame::Text(sent), Frame::Text(kept)) = (&text, &held[0]) else { panic!("text") };
        assert_ne!(sent.as_str().as_ptr(), kept.as_str().as_ptr(), "the text is held in its own allocation");
        let Frame::Binary(kept) = &held[1] else { panic!("binary") };
        assert_ne!(binary.as_ptr(), kept.as_ptr(), "the audio is held in its own allocation");
    }

    #[test]
    fn a_token_is_bound_to_its_identity() {
        let token = new_token();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token());
        assert_ne!(store_key("alice", &token), store_key("bob", &token));
        assert_eq!(store_key("alice", &token), store_key("alice", &token));
        assert!(!store_key("alice", &token).contains(&token), "the store never sees the token");
    }
}
