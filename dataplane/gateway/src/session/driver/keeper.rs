//! The session's hold in the store, kept by a task of its own beside the relay: it
//! registers each new resume token (and makes the older one an alias of it), keeps the
//! session's snapshot up to date, and renews the hold's lease every ping interval. In
//! Redis, a gateway that dies stops renewing: its sessions' leases lapse within
//! [`lease`], and a resume through any replica takes the snapshot. Should a lease lapse
//! while this gateway still holds the session (Redis unreachable from here for that long)
//! and a resume elsewhere take it, the next renewal finds the snapshot taken and this
//! gateway lets the session go ([`Keeper::taken`]): one copy of a session lives at a time.
//! A hold the store lost (Redis restarted empty) is registered again.
//!
//! The store's writes happen here, in order, off the relay's path: a slow Redis delays
//! a snapshot, never a frame. Two are waited for: a new token, so that a client never
//! holds a token the store does not know, and a handoff's snapshot, so that the target is
//! opened only once a replica taking over would make the handoff too.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::GatewayConfig;
use crate::resume::{Parked, Renewal, Store};

/// Jobs queued before a snapshot is dropped (a newer one follows at the next boundary).
const QUEUE: usize = 16;
/// The longest a new token's registration, or the keeper's last write, is waited for.
const WAIT: Duration = Duration::from_secs(3);

/// How long a hold lasts unless renewed: the ping timeout (a gateway silent that long is
/// as gone as a client would be), and never under three ping intervals.
pub fn lease(config: &GatewayConfig) -> Duration {
    config.ping_timeout.max(config.ping_interval * 3)
}

enum Job {
    /// A new resume token's key; `previous` becomes its alias.
    Hold { key: String, previous: Option<String>, snapshot: Option<Box<Parked>>, done: oneshot::Sender<()> },
    /// The session as it stands now; `done` when the relay waits for it.
    Snapshot(Box<Parked>, Option<oneshot::Sender<()>>),
}

/// The keeper of one session's hold.
pub(super) struct Keeper {
    jobs: mpsc::Sender<Job>,
    task: tokio::task::JoinHandle<()>,
    /// Cancelled when a resume elsewhere took the session.
    taken: CancellationToken,
}

impl Keeper {
    /// Starts keeping the holds of session `id` in `store`.
    pub(super) fn start(store: Store, config: &GatewayConfig, id: &str) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let taken = CancellationToken::new();
        let run = Run {
            store,
            lease: lease(config),
            window: config.resume_window,
            id: id.to_owned(),
            key: None,
            established: false,
            last: None,
            taken: taken.clone(),
        };
        let every = config.ping_interval.max(Duration::from_millis(100));
        let task = tokio::spawn(run.run(queue, every));
        Self { jobs, task, taken }
    }

    /// Cancelled when a resume elsewhere took the session: this gateway lets it go.
    pub(super) fn taken(&self) -> CancellationToken {
        self.taken.clone()
    }

    /// Registers the session under `key` (its newest token's), with its `snapshot` (a
    /// shared store), `previous` becoming an alias; returns once the store has it (or
    /// failed: logged).
    pub(super) async fn hold(&self, key: String, previous: Option<String>, snapshot: Option<Box<Parked>>) {
        let (done, registered) = oneshot::channel();
        if self.jobs.send(Job::Hold { key, previous, snapshot, done }).await.is_ok() {
            let _ = tokio::time::timeout(WAIT, registered).await;
        }
    }

    /// Keeps `snapshot` as the session's (dropped when the queue is full: the next
    /// boundary brings a newer one).
    pub(super) fn snapshot(&self, snapshot: Box<Parked>) {
        let _ = self.jobs.try_send(Job::Snapshot(snapshot, None));
    }

    /// Keeps `snapshot` as the session's and returns once the store has it (or failed).
    pub(super) async fn snapshot_now(&self, snapshot: Box<Parked>) {
        let (done, written) = oneshot::channel();
        if self.jobs.send(Job::Snapshot(snapshot, Some(done))).await.is_ok() {
            let _ = tokio::time::timeout(WAIT, written).await;
        }
    }

    /// Stops, after the writes under way: none lands after the session is parked or
    /// released.
    pub(super) async fn stop(self) {
        drop(self.jobs);
        let mut task = self.task;
        if tokio::time::timeout(WAIT, &mut task).await.is_err() {
            task.abort();
        }
    }
}

/// The newest of the snapshots queued together, with everyone waiting for any of them, and
/// the hold that followed them if one did.
struct Newest {
    snapshot: Box<Parked>,
    done: Vec<oneshot::Sender<()>>,
    next: Option<Job>,
}

/// Takes the snapshots queued behind `snapshot` (up to a hold): only the newest is written.
/// A session that changes faster than the store takes its writes (a client typing
/// hundreds of inputs a second) costs one write, and one encoding, per write the store
/// completes, not one per change.
fn newest(snapshot: Box<Parked>, done: Option<oneshot::Sender<()>>, queue: &mut mpsc::Receiver<Job>) -> Newest {
    let mut newest = Newest { snapshot, done: done.into_iter().collect(), next: None };
    while let Ok(job) = queue.try_recv() {
        match job {
            Job::Snapshot(snapshot, done) => {
                newest.snapshot = snapshot;
                newest.done.extend(done);
            }
            hold @ Job::Hold { .. } => {
                newest.next = Some(hold);
                break;
            }
        }
    }
    newest
}

struct Run {
    store: Store,
    lease: Duration,
    window: Duration,
    id: String,
    /// The newest key.
    key: Option<String>,
    /// Whether the store has the hold and snapshot at `key` (renewals need one).
    established: bool,
    /// The newest snapshot, to register again after a failure.
    last: Option<Box<Parked>>,
    taken: CancellationToken,
}

impl Run {
    async fn run(mut self, mut queue: mpsc::Receiver<Job>, every: Duration) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A hold found behind the snapshots taken together, done next.
        let mut next: Option<Job> = None;
        loop {
            let job = match next.take() {
                Some(job) => Some(job),
                None => tokio::select! {
                    job = queue.recv() => match job {
                        Some(job) => Some(job),
                        None => return,
                    },
                    _ = ticks.tick() => None,
                },
            };
            let kept = match job {
                Some(Job::Hold { key, previous, snapshot, done }) => {
                    self.last = snapshot;
                    self.key = Some(key);
                    self.register(previous.as_deref()).await;
                    let _ = done.send(());
                    true
                }
                Some(Job::Snapshot(snapshot, done)) => {
                    let newest = newest(snapshot, done, &mut queue);
                    next = newest.next;
                    self.last = Some(newest.snapshot);
                    let kept = self.renew(true).await;
                    for done in newest.done {
                        let _ = done.send(());
                    }
                    kept
                }
                None => self.renew(false).await,
            };
            if !kept {
                tracing::warn!(session_id = %self.id, "a resume through another gateway replica took this session (its hold here had lapsed); letting it go");
                self.taken.cancel();
                return;
            }
        }
    }

    /// Registers the hold at the newest key (with the newest snapshot).
    async fn register(&mut self, previous: Option<&str>) {
        let Some(key) = &self.key else { return };
        match self.store.hold(key, previous, self.last.as_deref(), self.lease, self.window).await {
            Ok(()) => self.established = self.last.is_some() || !self.store.is_shared(),
            Err(error) => {
                self.established = false;
                tracing::warn!(session_id = %self.id, "cannot register the session for resume: {error}");
            }
        }
    }

    /// Renews the hold (with the newest snapshot when `changed`); false when the session
    /// was taken elsewhere.
    async fn renew(&mut self, changed: bool) -> bool {
        let Some(key) = &self.key else { return true };
        if !self.established {
            self.register(None).await;
            return true;
        }
        let snapshot = if changed { self.last.as_deref() } else { None };
        match self.store.renew(key, snapshot, self.lease, self.window).await {
            Ok(Renewal::Kept) => true,
            Ok(Renewal::Taken) => false,
            Ok(Renewal::Lost) => {
                tracing::info!(session_id = %self.id, "the session store lost this session's hold (restarted?); registering it again");
                self.register(None).await;
                true
            }
            Err(error) => {
                tracing::warn!(session_id = %self.id, "cannot renew the session's hold for resume: {error}");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(agent: &str) -> Box<Parked> {
        let mut parked = crate::session::tests::Drive::live().machine.snapshot(None);
        parked.agent = agent.into();
        Box::new(parked)
    }

    #[test]
    fn snapshots_queued_together_are_written_once_the_newest_and_a_hold_behind_them_waits_its_turn() {
        let (jobs, mut queue) = mpsc::channel(QUEUE);
        let (first_done, first_written) = oneshot::channel();
        for n in 2..=4 {
            jobs.try_send(Job::Snapshot(parked(&format!("agent-{n}")), None)).expect("queued");
        }
        let (waited, waited_written) = oneshot::channel();
        jobs.try_send(Job::Snapshot(parked("agent-5"), Some(waited))).expect("queued");
        let (hold_done, _) = oneshot::channel();
        jobs.try_send(Job::Hold { key: "k2".into(), previous: None, snapshot: None, done: hold_done }).expect("queued");
        jobs.try_send(Job::Snapshot(parked("agent-6"), None)).expect("queued");

        let newest = newest(parked("agent-1"), Some(first_done), &mut queue);
        assert_eq!(newest.snapshot.agent, "agent-5", "the newest before the hold");
        assert_eq!(newest.done.len(), 2, "both waiting are told once it is written");
        assert!(matches!(newest.next, Some(Job::Hold { ref key, .. }) if key == "k2"), "the hold comes next");
        for done in newest.done {
            let _ = done.send(());
        }
        assert!(first_written.blocking_recv().is_ok() && waited_written.blocking_recv().is_ok());
        assert!(matches!(queue.try_recv(), Ok(Job::Snapshot(p, None)) if p.agent == "agent-6"), "after the hold");
    }
}
