//! Switching streams: the current one is lost (and what it owed the user is asked again,
//! [`super::super::reask`]), the next one is opened, prepared, and swapped in at a turn
//! boundary — or at once when there is no current stream.

use tokio::time::Instant;

use super::super::connection::{Connection, stream_span};
use super::super::events::{RestartReason, SonicEvent};
use super::super::wire::OutputParser;
use super::{Deferred, Next, Supervisor};
use crate::ModelError;

impl Supervisor {
    /// The current stream is being lost: if the user's words wait for a reply, the client
    /// hears the reply is cut ([`SonicEvent::ReplyCut`]), and the words are kept to ask the
    /// next stream once — the history goes back to before them (the cut reply's part goes
    /// with it) and they go in again as the user's. Returns false when the session must end.
    async fn reask_owed(&mut self) -> bool {
        if self.current.is_none() || !self.turn.owes_reply() {
            return true;
        }
        let reask = self.turn.take_reask();
        let reasked = reask.is_some();
        if let Some(reask) = reask {
            let rewound = reask.mark.as_ref().is_some_and(|mark| self.history.rewind(mark));
            if rewound {
                self.history.push(super::super::history::HistoryEntry::user(reask.said));
            }
            tracing::info!(rewound, "the stream was lost mid-reply; the next one is asked the user's words again");
            self.reask = Some(reask.ask);
        } else {
            tracing::info!(
                "the stream was lost owing a reply; the user's words are not asked again (asked once already, or left unanswered too long)"
            );
        }
        self.events.send(SonicEvent::ReplyCut { reasked }).await.is_ok()
    }

    /// The current stream is gone: switch to the next one as soon as there is one. A
    /// stream that failed before it ever worked counts as a failed attempt; after
    /// `retry.max_attempts` of those in a row the session fails with `error`.
    pub(super) async fn stream_failed(&mut self, reason: RestartReason, error: ModelError) -> bool {
        if !self.reask_owed().await {
            return false;
        }
        let lived = self.current.as_ref().is_some_and(|c| c.opened_at.elapsed() >= self.config.stable_after);
        if self.current_healthy || lived {
            self.failures = 0;
        } else {
            self.failures += 1;
        }
        if let Some(old) = self.current.take() {
            old.span.record("sonic.ended_for", reason.label());
            old.span.record("error.type", error.metric_label());
            tokio::spawn(old.close());
        }
        self.current_healthy = false;
        self.parser = OutputParser::default();
        self.turn.new_stream();
        if self.failures >= self.config.retry.max_attempts {
            tracing::warn!(%error, attempts = self.failures, "Nova Sonic streams keep failing; giving up");
            self.failed = true;
            let _ = self.events.send(SonicEvent::Failed(error)).await;
            return false;
        }
        match std::mem::replace(&mut self.next, Next::Idle) {
            Next::Ready { connection, deadline, .. } => self.next = Next::Ready { reason, connection, deadline },
            Next::Opening { generation, .. } => self.next = Next::Opening { reason, generation },
            Next::Idle | Next::Waiting { .. } if self.failures > 0 => {
                let wait = self.config.retry.backoff(self.failures, &mut self.rng);
                self.next = Next::Waiting { reason, at: Instant::now() + wait };
            }
            Next::Idle | Next::Waiting { .. } => self.begin_opening(reason),
        }
        true
    }

    pub(super) fn begin_opening(&mut self, reason: RestartReason) {
        self.generation += 1;
        let generation = self.generation;
        let (client, config, voice, out) =
            (self.client.clone(), self.config.clone(), self.voice.clone(), self.outputs_tx.clone());
        let span = stream_span(&self.trace, &client, &config, generation, reason.label());
        self.opening =
            Some(tokio::spawn(async move { Connection::open(&client, &config, &voice, generation, out, span).await }));
        self.next = Next::Opening { reason, generation };
    }

    pub(super) fn on_opened(&mut self, opened: Result<Result<Connection, ModelError>, tokio::task::JoinError>) -> bool {
        let Next::Opening { reason, .. } = std::mem::replace(&mut self.next, Next::Idle) else {
            return true;
        };
        let opened = opened
            .unwrap_or_else(|join| Err(ModelError::Connection { message: format!("opening task failed: {join}") }));
        match opened {
            Ok(connection) => {
                let deadline = match (&reason, &self.current) {
                    (RestartReason::Rotation, Some(current)) => {
                        current.opened_at + self.config.rotate_after + self.config.boundary_wait
                    }
                    _ => Instant::now() + self.config.boundary_wait,
                };
                self.next = Next::Ready { reason, connection, deadline };
                true
            }
            Err(error) if error.is_retryable() => self.retry_later(reason, Some(error)),
            Err(error) => {
                self.failed = true;
                let events = self.events.clone();
                tokio::spawn(async move { events.send(SonicEvent::Failed(error)).await });
                false
            }
        }
    }

    /// Schedules another attempt, unless the attempts in a row are used up and no stream
    /// is left (then the session fails).
    pub(super) fn retry_later(&mut self, reason: RestartReason, error: Option<ModelError>) -> bool {
        self.failures += 1;
        if self.failures >= self.config.retry.max_attempts && self.current.is_none() {
            let error = error.unwrap_or_else(|| ModelError::StreamInterrupted {
                message: format!("no stream could be opened in {} attempts", self.failures),
            });
            self.failed = true;
            let events = self.events.clone();
            tokio::spawn(async move { events.send(SonicEvent::Failed(error)).await });
            return false;
        }
        let wait = self.config.retry.backoff(self.failures, &mut self.rng);
        tracing::info!(attempt = self.failures, ?wait, ?error, "opening the next Nova Sonic stream failed; retrying");
        self.next = Next::Waiting { reason, at: Instant::now() + wait };
        true
    }

    /// Switches to a prepared stream when there is no current one, at a turn boundary, or
    /// past its deadline. Returns false when the session must end.
    pub(super) async fn try_swap(&mut self) -> bool {
        let due = match &self.next {
            Next::Ready { deadline, .. } => {
                self.current.is_none()
                    || self.turn.at_boundary(self.config.boundary_quiet)
                    || Instant::now() >= *deadline
            }
            _ => false,
        };
        if !due {
            return true;
        }
        let Next::Ready { reason, mut connection, .. } = std::mem::replace(&mut self.next, Next::Idle) else {
            return true;
        };
        let replay = match &self.reask {
            Some(ask) => self.history.replay_without(ask),
            None => self.history.replay(),
        };
        if let Err(error) = connection.begin(&replay).await {
            return self.retry_later(reason, Some(error));
        }
        if let Some(ask) = &self.reask
            && let Err(error) = connection.text(ask).await
        {
            return self.retry_later(reason, Some(error));
        }
        // The held input goes to the new stream; it leaves the queue only once the stream
        // took all of it: a switch that fails keeps it for the next stream.
        for i in 0..self.deferred.len() {
            let sent = match &self.deferred[i] {
                Deferred::Audio(pcm) => connection.audio(pcm).await,
                Deferred::Text(text) => connection.text(text).await,
            };
            if let Err(error) = sent {
                return self.retry_later(reason, Some(error));
            }
        }
        for input in std::mem::take(&mut self.deferred) {
            if let Deferred::Text(text) = input {
                // Held text enters the history now, after the replay it was not part of.
                self.turn.typed(&text, &mut self.history);
            }
        }
        let generation = connection.generation;
        if let Some(old) = self.current.replace(connection) {
            old.span.record("sonic.ended_for", reason.label());
            tokio::spawn(old.close());
        }
        self.parser = OutputParser::default();
        self.turn.new_stream();
        self.current_healthy = false;
        match self.reask.take() {
            Some(ask) => self.echo.expect(&ask),
            None => self.echo.reset(),
        }
        tracing::info!(generation, reason = reason.label(), "switched to a new Nova Sonic stream");
        self.events.send(SonicEvent::Restarted { reason, generation }).await.is_ok()
    }

    pub(super) async fn cancel_next(&mut self) {
        if let Some(task) = self.opening.take() {
            task.abort();
        }
        if let Next::Ready { connection, .. } = std::mem::replace(&mut self.next, Next::Idle) {
            connection.close().await;
        }
    }
}
