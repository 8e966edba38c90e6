//! What the session's tests (`session::tests`) read and set of a machine: its fields stay
//! private to the machine's own module tree, and a test reaches them only through these.

use std::time::Instant;

use tokio_tungstenite::tungstenite::Message as UpMessage;

use super::{Kept, Limits, Machine, Replay};

impl Machine {
    /// What the session keeps.
    pub(in crate::session) fn kept(&self) -> &Kept {
        &self.kept
    }

    /// The messages sent to the client, numbered, for replay.
    pub(in crate::session) fn replay(&self) -> &Replay {
        &self.replay
    }

    /// The limits and timings it applies, to change for a test.
    pub(in crate::session) fn limits_mut(&mut self) -> &mut Limits {
        &mut self.limits
    }

    /// What waits for the next runtime connection.
    pub(in crate::session) fn unsent(&self) -> &[UpMessage] {
        self.runtime.unsent()
    }

    /// The same session with a fresh client side (its rate bucket full again, as its
    /// limits now say), on the same runtime connection.
    pub(in crate::session) fn with_fresh_client(self) -> Self {
        let mut fresh = Self::blank(self.limits, self.id, self.identity, self.target, None, vec![], Instant::now());
        fresh.runtime = self.runtime;
        fresh
    }
}
