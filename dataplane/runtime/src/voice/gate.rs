//! The audio gate: what a connection's reader does with audio now (refuse, accept, or drop
//! quietly), set by the session loop and read by the reader without a lock; and whether
//! the writer sends reply audio as binary frames ([`BinaryAudio`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What a connection's reader does with audio now; shared with its session loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// A text connection: audio gets a `bidi_error` (as before voice existed).
    Refuse,
    /// A voice session: audio is checked and passed on.
    Accept,
    /// An audio connection now served by a text-only agent (after a handoff): audio is
    /// dropped quietly (the session said so once).
    Ignore,
}

/// The [`Gate`] of one connection.
#[derive(Clone, Debug, Default)]
pub struct AudioGate(Arc<std::sync::atomic::AtomicU8>);

impl AudioGate {
    /// Sets the gate.
    pub fn set(&self, gate: Gate) {
        let value = match gate {
            Gate::Refuse => 0,
            Gate::Accept => 1,
            Gate::Ignore => 2,
        };
        self.0.store(value, Ordering::Relaxed);
    }

    /// The gate now.
    pub fn get(&self) -> Gate {
        match self.0.load(Ordering::Relaxed) {
            1 => Gate::Accept,
            2 => Gate::Ignore,
            _ => Gate::Refuse,
        }
    }
}

/// Whether a connection's writer sends reply audio (`bidi_audio_stream`) as binary frames
/// of its raw bytes (`session_start.audio.binary_output`); shared with the session loop.
#[derive(Clone, Debug, Default)]
pub struct BinaryAudio(Arc<std::sync::atomic::AtomicBool>);

impl BinaryAudio {
    /// Sets it.
    pub fn set(&self, binary: bool) {
        self.0.store(binary, Ordering::Relaxed);
    }

    /// Whether reply audio goes as binary frames now.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
