//! The record's one writer task: it takes entries off the queue, writes them in batches
//! (one transaction each), and rides out store outages — the batch that failed and
//! everything after it wait in a bounded backlog, retried with backoff (1 s doubling to
//! 30 s) and written in order once the store answers. Entries beyond the backlog's bound
//! are dropped and counted. Once an hour (and at the first write) sessions past the
//! retention are deleted, and callers ([`super::store::callers`]) not seen within theirs.
//! Every few seconds to a minute (a sweep), the writer says its replica lives
//! ([`Store::heartbeat`]), sessions whose client went and never came back within the
//! resume window are marked `abandoned`, and live sessions of a replica not heard of for as
//! long are marked `lost` (its gateway died holding them); both are reported.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::store::{Store, StoreError};
use super::{Entry, RecordConfig, RecordMetrics};

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);
const EXPIRY_EVERY: Duration = Duration::from_secs(3600);
/// How long the last flush at shutdown may take.
const LAST_FLUSH: Duration = Duration::from_secs(5);
/// How long after a session's end its report is due from the store: longer than the
/// summary may take ([`super::summary`] waits 30 s at most) and a first delivery, so a
/// gateway that lives delivers its own reports first.
pub const REPORT_GRACE: Duration = Duration::from_secs(60);

/// The writer task's state.
#[derive(Debug)]
pub struct Writer {
    store: Store,
    config: RecordConfig,
    rx: mpsc::Receiver<Entry>,
    metrics: RecordMetrics,
    backlog: VecDeque<Entry>,
    migrated: bool,
    /// In an outage: when to try again, and the pause after that.
    retry: Option<(Instant, Duration)>,
    next_expiry: Instant,
    next_sweep: Instant,
    /// Ended sessions' ids, once their end is written (the end-of-call webhook).
    ended: Option<mpsc::Sender<String>>,
    /// The bytes of entries queued or in the backlog ([`super::Recorder::pending`]): the
    /// writer gives back each entry's as it is written or dropped.
    pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Writer {
    pub(super) fn new(
        store: Store,
        config: RecordConfig,
        rx: mpsc::Receiver<Entry>,
        metrics: RecordMetrics,
        pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> Self {
        Self {
            store: store.writing_as(&config.replica),
            config,
            rx,
            metrics,
            backlog: VecDeque::new(),
            migrated: false,
            retry: None,
            next_expiry: Instant::now(),
            next_sweep: Instant::now(),
            ended: None,
            pending,
        }
    }

    /// Also tells `ended` the id of each session whose end it wrote (or that it found
    /// abandoned or lost), and makes each such session's report due in the store
    /// [`REPORT_GRACE`] after its end, should it not be delivered by then.
    pub fn reporting_to(mut self, ended: mpsc::Sender<String>) -> Self {
        self.ended = Some(ended);
        self.store = self.store.reporting(REPORT_GRACE);
        self
    }

    /// Writes until `shutdown` (then flushes what it holds, for a few seconds at most) or
    /// until every recorder is gone.
    pub async fn run(mut self, shutdown: CancellationToken) {
        // The tables at once, so readers (the API, a continued session) find them before the
        // first write; a store that is down is migrated at the first write that succeeds.
        match self.store.migrate().await {
            Ok(()) => self.migrated = true,
            Err(error) => {
                tracing::warn!(store = %self.store.display, "the conversation record's store: {error}; retrying with the first entries")
            }
        }
        loop {
            let retry_at = self.retry.map(|(at, _)| at);
            let wake = retry_at.unwrap_or_else(|| self.next_expiry.min(self.next_sweep));
            tokio::select! {
                entry = self.rx.recv() => match entry {
                    Some(entry) => {
                        self.take(entry);
                        self.fill().await;
                    }
                    None => return self.last_flush().await,
                },
                () = tokio::time::sleep_until(wake), if !self.backlog.is_empty() || self.retry.is_none() => {}
                () = shutdown.cancelled() => return self.last_flush().await,
            }
            if self.retry.is_some_and(|(at, _)| Instant::now() < at) {
                continue;
            }
            self.flush_or_wait().await;
        }
    }

    /// Keeps `entry` for the next write, unless the backlog is full.
    fn take(&mut self, entry: Entry) {
        if self.backlog.len() >= self.config.backlog.max(self.config.batch) {
            self.metrics.dropped.with_label_values(&["backlog_full"]).inc();
            self.give_back(std::slice::from_ref(&entry));
            return;
        }
        self.backlog.push_back(entry);
        self.metrics.backlog.set(self.backlog.len() as i64);
    }

    /// Takes more entries until a batch is full or the flush interval passed.
    async fn fill(&mut self) {
        let deadline = Instant::now() + self.config.flush_interval;
        while self.backlog.len() < self.config.batch {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(entry)) => self.take(entry),
                Ok(None) | Err(_) => return,
            }
        }
    }

    async fn flush_or_wait(&mut self) {
        match self.flush().await {
            Ok(()) => {
                if self.retry.take().is_some() {
                    tracing::info!(store = %self.store.display, "the conversation record's store is back; the backlog is written");
                }
                self.expire_if_due().await;
                self.sweep_if_due().await;
            }
            Err(error) => {
                self.metrics.write_errors.inc();
                let pause = self.retry.map_or(FIRST_PAUSE, |(_, pause)| pause);
                if self.retry.is_none() {
                    tracing::warn!(
                        store = %self.store.display,
                        backlog = self.backlog.len(),
                        "cannot write the conversation record ({error}); entries wait (at most {}) and are written when it is back",
                        self.config.backlog
                    );
                } else {
                    tracing::debug!(store = %self.store.display, "the record store still fails: {error}");
                }
                self.retry = Some((Instant::now() + pause, (pause * 2).min(LONGEST_PAUSE)));
            }
        }
    }

    /// Writes the backlog, batch by batch, oldest first.
    async fn flush(&mut self) -> Result<(), StoreError> {
        if !self.migrated {
            self.store.migrate().await?;
            self.migrated = true;
        }
        while !self.backlog.is_empty() {
            let n = self.backlog.len().min(self.config.batch);
            let batch = &self.backlog.make_contiguous()[..n];
            self.store.write(batch).await?;
            if let Some(ended) = &self.ended {
                for entry in batch {
                    if let Some(super::Update::End { outcome: "ended", .. }) = &entry.update
                        && ended.try_send(entry.session.to_string()).is_err()
                    {
                        // Its report stays due in the store, and goes out from there.
                        self.metrics.webhook.with_label_values(&["queue_full"]).inc();
                    }
                }
            }
            // Counted before their bytes are given back: whoever sees nothing pending sees
            // them written.
            self.metrics.written.inc_by(n as u64);
            let written: Vec<Entry> = self.backlog.drain(..n).collect();
            self.metrics.backlog.set(self.backlog.len() as i64);
            self.give_back(&written);
        }
        Ok(())
    }

    /// `entries` no longer wait: their bytes leave the pending count.
    fn give_back(&self, entries: &[Entry]) {
        let bytes: usize = entries.iter().map(Entry::bytes).sum();
        self.pending.fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    async fn expire_if_due(&mut self) {
        if Instant::now() < self.next_expiry {
            return;
        }
        self.next_expiry = Instant::now() + EXPIRY_EVERY;
        let stale = super::now_us() / 1000 - i64::try_from(self.config.state_ttl.as_millis()).unwrap_or(i64::MAX);
        if let Err(error) = self.store.expire_state(stale).await {
            tracing::warn!("cannot delete expired continuation state: {error}");
        }
        if let Some(retention) = self.config.caller_retention {
            let before = super::now_us() / 1000 - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            match self.store.expire_callers(before).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(callers = n, "deleted callers not seen within the caller retention"),
                Err(error) => tracing::warn!("cannot delete callers past the caller retention: {error}"),
            }
        }
        let Some(retention) = self.config.retention else { return };
        let before = super::now_us() / 1000 - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        match self.store.expire(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sessions = n, "deleted recorded sessions past the retention"),
            Err(error) => tracing::warn!("cannot delete recorded sessions past the retention: {error}"),
        }
    }

    /// How often parked sessions are checked: a third of the time they may stay parked,
    /// between 1 s and a minute.
    fn sweep_every(&self) -> Duration {
        (self.config.abandon_after / 3).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Marks sessions parked for longer than `abandon_after` as abandoned; their reports go
    /// out as those of ended sessions do.
    async fn sweep_if_due(&mut self) {
        if Instant::now() < self.next_sweep {
            return;
        }
        self.next_sweep = Instant::now() + self.sweep_every();
        let now = super::now_us() / 1000;
        if let Err(error) = self.store.heartbeat(now).await {
            tracing::warn!("cannot say this replica lives in the record: {error}");
        }
        let before = now - i64::try_from(self.config.abandon_after.as_millis()).unwrap_or(i64::MAX);
        match self.store.abandon(before).await {
            Ok(ids) => self.report(ids, "the client went and did not come back: the session is abandoned"),
            Err(error) => tracing::warn!("cannot mark abandoned sessions: {error}"),
        }
        match self.store.lose(before, now).await {
            Ok(ids) => self.report(ids, "its gateway replica stopped without ending it: the session is lost"),
            Err(error) => tracing::warn!("cannot mark lost sessions: {error}"),
        }
    }

    /// Tells the reporting tasks of sessions found ended by a sweep.
    fn report(&self, ids: Vec<String>, why: &str) {
        for id in ids {
            tracing::info!(session_id = %id, "{why}");
            if let Some(ended) = &self.ended
                && ended.try_send(id).is_err()
            {
                // Its report stays due in the store, and goes out from there.
                self.metrics.webhook.with_label_values(&["queue_full"]).inc();
            }
        }
    }

    async fn last_flush(mut self) {
        while let Ok(entry) = self.rx.try_recv() {
            self.take(entry);
        }
        if self.backlog.is_empty() {
            return;
        }
        match tokio::time::timeout(LAST_FLUSH, self.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(lost = self.backlog.len(), "cannot write the last record entries: {error}")
            }
            Err(_) => tracing::warn!(lost = self.backlog.len(), "the last record entries were not written in time"),
        }
    }
}
