//! The replay window (RFC 3711 §3.3.2): the highest index authenticated and a bitmap of the
//! 128 before it. A packet is fresh when it is ahead of the highest, or inside the window
//! and not yet seen; it is recorded only after it authenticates ([`ReplayWindow::accept`]).

/// How many indexes behind the highest the window remembers.
pub const WINDOW: u64 = 128;

/// The window (see the module docs). Bit `n` of `seen`: index `highest - n` was received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    seen: u128,
    highest: Option<u64>,
}

impl ReplayWindow {
    /// The highest index accepted, once one was.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Whether `index` may be accepted, given the highest index accepted so far.
    pub fn is_fresh(&self, highest: u64, index: u64) -> bool {
        if self.highest.is_none() || index > highest {
            return true;
        }
        let behind = highest - index;
        behind < WINDOW && self.seen & (1u128 << behind) == 0
    }

    /// Records an authenticated `index`; returns the new highest index.
    pub fn accept(&mut self, highest: u64, index: u64) -> u64 {
        match self.highest {
            None => {
                self.seen = 1;
                self.highest = Some(index);
                index
            }
            Some(_) if index > highest => {
                let ahead = index - highest;
                self.seen = if ahead >= WINDOW { 1 } else { (self.seen << ahead) | 1 };
                self.highest = Some(index);
                index
            }
            Some(_) => {
                let behind = highest - index;
                if behind < WINDOW {
                    self.seen |= 1u128 << behind;
                }
                highest
            }
        }
    }
}
