//! What a live session reacts to besides its sockets and timers: the gateway draining (when
//! sessions can move to another replica) or shutting down, the session resumed on another
//! socket (superseded), or taken over by another replica — and, any number of times, an
//! outage switch flipping ([`switchboard_outage::notice::Switches`]). A task of their own waits
//! on them and tells the relay, so the relay polls one cheap future per wake-up instead of
//! the four tokens and the switches (each poll of a token's future locks two mutexes,
//! two of them shared by every session: about 3 % of a voice relay's CPU, BENCHMARKS.md,
//! `gateway`).

use std::future::pending;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::session::machine::Event;

/// A session's signals, in the order they win when several are given.
pub(super) struct Signals {
    /// The gateway drains; `None` where sessions cannot move (no shared store).
    draining: Option<CancellationToken>,
    superseded: CancellationToken,
    taken: CancellationToken,
    shutdown: CancellationToken,
    /// What the watcher tells: a switch flipped, or a token was given (`None` after that).
    told: Option<mpsc::Receiver<Told>>,
    watcher: JoinHandle<()>,
}

/// What the watcher tells the relay.
#[derive(Debug)]
enum Told {
    /// An outage switch flipped (several flips before the relay reads are one).
    Switched,
    /// One of the tokens was given.
    Given,
}

impl Signals {
    /// Starts watching the four tokens and the outage `switches`.
    pub(super) fn watch(
        draining: Option<CancellationToken>,
        superseded: CancellationToken,
        taken: CancellationToken,
        shutdown: CancellationToken,
        mut switches: watch::Receiver<u64>,
    ) -> Self {
        // Room for a flip and the token: a flip that finds it full is already told.
        let (tell, told) = mpsc::channel(2);
        let tokens = (draining.clone(), superseded.clone(), taken.clone(), shutdown.clone());
        let watcher = tokio::spawn(async move {
            let (draining, superseded, taken, shutdown) = tokens;
            let draining = async {
                match &draining {
                    Some(token) => token.cancelled().await,
                    None => pending().await,
                }
            };
            tokio::pin!(draining);
            switches.mark_unchanged();
            let mut following = true;
            loop {
                tokio::select! {
                    () = &mut draining => break,
                    () = superseded.cancelled() => break,
                    () = taken.cancelled() => break,
                    () = shutdown.cancelled() => break,
                    changed = switches.changed(), if following => match changed {
                        // Full: a flip is waiting to be read already, and the relay reads
                        // the switches as they are then.
                        Ok(()) => { let _ = tell.try_send(Told::Switched); }
                        Err(_) => following = false,
                    },
                }
            }
            let _ = tell.send(Told::Given).await;
        });
        Self { draining, superseded, taken, shutdown, told: Some(told), watcher }
    }

    /// The signal given, by precedence: draining, superseded, taken over, shutdown (once
    /// one is given it is ready again at every call, as a cancelled token is); or an outage
    /// switch flipped ([`Event::OutageSwitched`]).
    pub(super) async fn next(&mut self) -> Event {
        if let Some(told) = self.told.as_mut() {
            match told.recv().await {
                Some(Told::Switched) => return Event::OutageSwitched,
                // None: the watcher is gone without a signal (the runtime shuts down);
                // what is cancelled says whether there is one.
                Some(Told::Given) | None => self.told = None,
            }
        }
        match self.given() {
            Some(event) => event,
            None => pending().await,
        }
    }

    fn given(&self) -> Option<Event> {
        if self.draining.as_ref().is_some_and(CancellationToken::is_cancelled) {
            Some(Event::Draining)
        } else if self.superseded.is_cancelled() {
            Some(Event::Superseded)
        } else if self.taken.is_cancelled() {
            Some(Event::TakenOver)
        } else if self.shutdown.is_cancelled() {
            Some(Event::Shutdown)
        } else {
            None
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tokens() -> [CancellationToken; 4] {
        std::array::from_fn(|_| CancellationToken::new())
    }

    /// Switches that never flip.
    fn quiet() -> watch::Receiver<u64> {
        watch::channel(0).1
    }

    async fn soon(signals: &mut Signals) -> Option<Event> {
        tokio::time::timeout(Duration::from_secs(5), signals.next()).await.ok()
    }

    #[tokio::test]
    async fn each_signal_is_told_and_stays_given() {
        for (i, expected) in
            [Event::Draining, Event::Superseded, Event::TakenOver, Event::Shutdown].into_iter().enumerate()
        {
            let [draining, superseded, taken, shutdown] = tokens();
            let mut signals =
                Signals::watch(Some(draining.clone()), superseded.clone(), taken.clone(), shutdown.clone(), quiet());
            [draining, superseded, taken, shutdown][i].cancel();
            let first = soon(&mut signals).await.expect("told");
            assert_eq!(format!("{first:?}"), format!("{expected:?}"));
            let again = soon(&mut signals).await.expect("still given");
            assert_eq!(format!("{again:?}"), format!("{expected:?}"));
        }
    }

    #[tokio::test]
    async fn nothing_is_told_before_a_signal_and_draining_only_where_sessions_move() {
        let [draining, superseded, taken, shutdown] = tokens();
        let mut signals = Signals::watch(None, superseded.clone(), taken.clone(), shutdown.clone(), quiet());
        assert!(tokio::time::timeout(Duration::from_millis(100), signals.next()).await.is_err());
        draining.cancel();
        assert!(tokio::time::timeout(Duration::from_millis(100), signals.next()).await.is_err());
        shutdown.cancel();
        taken.cancel();
        // Both given: taken over goes first, as it did in the relay's biased select.
        let event = soon(&mut signals).await.expect("told");
        assert_eq!(format!("{event:?}"), format!("{:?}", Event::TakenOver));
    }

    #[tokio::test]
    async fn draining_goes_before_the_others_where_sessions_move() {
        let [draining, superseded, taken, shutdown] = tokens();
        let mut signals = Signals::watch(Some(draining.clone()), superseded.clone(), taken, shutdown.clone(), quiet());
        shutdown.cancel();
        superseded.cancel();
        draining.cancel();
        // Whichever woke the watcher, the answer is by precedence.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let event = soon(&mut signals).await.expect("told");
        assert_eq!(format!("{event:?}"), format!("{:?}", Event::Draining));
    }

    #[tokio::test]
    async fn every_flip_is_told_and_a_token_still_wins_after_them() {
        let [draining, superseded, taken, shutdown] = tokens();
        let (flip, switches) = watch::channel(0u64);
        let mut signals = Signals::watch(Some(draining.clone()), superseded, taken, shutdown, switches);
        assert!(tokio::time::timeout(Duration::from_millis(100), signals.next()).await.is_err());
        for round in 1..=3 {
            flip.send_replace(round);
            let event = soon(&mut signals).await.expect("told");
            assert_eq!(format!("{event:?}"), format!("{:?}", Event::OutageSwitched), "round {round}");
        }
        // Flips the relay has not read yet are one (or two) notices, never a blocked watcher.
        for round in 4..=20 {
            flip.send_replace(round);
            tokio::task::yield_now().await;
        }
        draining.cancel();
        let mut seen = Vec::new();
        loop {
            let event = soon(&mut signals).await.expect("told");
            let done = matches!(event, Event::Draining);
            seen.push(format!("{event:?}"));
            if done {
                break;
            }
        }
        assert!(seen.len() <= 3, "{seen:?}");
        let again = soon(&mut signals).await.expect("still given");
        assert_eq!(format!("{again:?}"), format!("{:?}", Event::Draining));
    }
}
