//! What a live session reacts to besides its sockets and timers: the gateway draining (when
//! sessions can move to another replica) or shutting down, the session resumed on another
//! socket (superseded), or taken over by another replica. A task of their own waits on the
//! four and tells the relay once one is given, so the relay polls one cheap future per
//! wake-up instead of the four tokens (each poll of a token's future locks two mutexes,
//! two of them shared by every session: about 3 % of a voice relay's CPU, BENCHMARKS.md,
//! `gateway`).

use std::future::pending;

use tokio::sync::oneshot;
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
    /// Resolves once one of them is given (`None` after that).
    given: Option<oneshot::Receiver<()>>,
    watcher: JoinHandle<()>,
}

impl Signals {
    /// Starts watching the four tokens.
    pub(super) fn watch(
        draining: Option<CancellationToken>,
        superseded: CancellationToken,
        taken: CancellationToken,
        shutdown: CancellationToken,
    ) -> Self {
        let (tell, given) = oneshot::channel();
        let tokens = (draining.clone(), superseded.clone(), taken.clone(), shutdown.clone());
        let watcher = tokio::spawn(async move {
            let (draining, superseded, taken, shutdown) = tokens;
            let draining = async {
                match &draining {
                    Some(token) => token.cancelled().await,
                    None => pending().await,
                }
            };
            tokio::select! {
                () = draining => {}
                () = superseded.cancelled() => {}
                () = taken.cancelled() => {}
                () = shutdown.cancelled() => {}
            }
            let _ = tell.send(());
        });
        Self { draining, superseded, taken, shutdown, given: Some(given), watcher }
    }

    /// The signal given, by precedence: draining, superseded, taken over, shutdown. Once
    /// one is given it is ready again at every call, as a cancelled token is.
    pub(super) async fn next(&mut self) -> Event {
        if let Some(given) = self.given.as_mut() {
            // An error: the watcher is gone without a signal (the runtime shuts down);
            // what is cancelled says whether there is one.
            let _ = given.await;
            self.given = None;
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
                Signals::watch(Some(draining.clone()), superseded.clone(), taken.clone(), shutdown.clone());
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
        let mut signals = Signals::watch(None, superseded.clone(), taken.clone(), shutdown.clone());
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
        let mut signals = Signals::watch(Some(draining.clone()), superseded.clone(), taken, shutdown.clone());
        shutdown.cancel();
        superseded.cancel();
        draining.cancel();
        // Whichever woke the watcher, the answer is by precedence.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let event = soon(&mut signals).await.expect("told");
        assert_eq!(format!("{event:?}"), format!("{:?}", Event::Draining));
    }
}
