//! A stream's output as it goes out: the planned events sent when they are due (and what
//! sending them changes: speaking, pending tool calls, replies sent whole, a scripted cut
//! of the reply being spoken), the barge-in that stops a reply, and the ends of the output
//! — a scripted close, an in-stream exception, the client's end.

use bytes::Bytes;
use tokio::time::Instant;

use super::super::envelope::{EnvelopeError, encode_event, encode_message};
use super::super::output::{Marker, Planner, Usage};
use super::{DRAIN_LIMIT, Session};
use crate::service_error::StreamExceptionKind;
use crate::state::applies;

impl Session {
    pub(super) fn planner(&mut self) -> Planner<'_> {
        Planner {
            ids: &self.ids,
            speech: &self.state.script.sonic.speech,
            next_id: &mut self.next_id,
            queue: &mut self.queue,
        }
    }

    /// When a new reply may start: after the response delay, and after what is queued.
    pub(super) fn reply_start(&self) -> Instant {
        let speech = &self.state.script.sonic.speech;
        let delay = if speech.pace <= 0.0 {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::from_secs_f64(speech.response_delay_ms as f64 / 1000.0 / speech.pace)
        };
        let start = Instant::now() + delay;
        self.queue.back().map_or(start, |last| last.at.max(start))
    }

    /// Sends every planned event that is due, as one write: a reply's leading events (the
    /// user transcript, content starts, SPECULATIVE text, the first audio) are due at the
    /// same instant, and the service does not make a client wait for a network write per
    /// event between them.
    pub(super) async fn emit_due(&mut self) {
        let now = Instant::now();
        let mut due = Vec::new();
        // What is planned for the script's close or later never goes out (the close may be
        // set on the way, by a scripted cut).
        while self.queue.front().is_some_and(|p| p.at <= now && self.close_at.is_none_or(|close| p.at < close)) {
            let Some(planned) = self.queue.pop_front() else { break };
            match planned.marker {
                Marker::AudioStart(id) => {
                    self.speaking = Some(id);
                    self.maybe_cut(planned.at);
                }
                Marker::AudioEnd => self.speaking = None,
                Marker::ToolPending(id, name) => {
                    self.protocol.expect_tool_result(&id);
                    self.pending_tools.insert(id, name);
                }
                Marker::Done => self.state.sonic.count_reply_sent(),
                Marker::None => {}
            }
            due.push(planned.event.encode());
        }
        self.send_encoded(due).await;
    }

    /// Barge-in: stop speaking and tell the client. Tool calls already made keep waiting
    /// for their results (asynchronous tool calling); the completion stays open.
    pub(super) async fn interrupt(&mut self) {
        let Some(audio_id) = self.speaking.take() else {
            return;
        };
        self.queue.clear();
        self.state.sonic.count_interruption();
        let text_id = format!("text-interrupted-{audio_id}");
        let events = [
            self.ids.content_end(&audio_id, "AUDIO", "INTERRUPTED"),
            self.ids.content_start(&text_id, "TEXT", "ASSISTANT", Some("FINAL")),
            self.ids.text_output(&text_id, "ASSISTANT", "{ \"interrupted\" : true }"),
            self.ids.content_end(&text_id, "TEXT", "INTERRUPTED"),
            self.ids.usage(&Usage::default(), &self.total),
        ];
        self.send_encoded(events.iter().map(encode_event)).await;
    }

    /// A reply's audio starts (planned `at`): the script's `cutReply` fault may end the
    /// stream `afterMs` into it — by the reply's plan, so what is planned from then on is
    /// never sent, however late this task runs.
    fn maybe_cut(&mut self, at: Instant) {
        let index = self.state.sonic.next_reply_spoken();
        let Some(fault) = &self.state.script.sonic.faults.cut_reply else {
            return;
        };
        if fault.at_reply.is_some_and(|n| n != index) || !applies(fault.first, self.state.sonic.next_cut()) {
            return;
        }
        let at = at + std::time::Duration::from_millis(fault.after_ms);
        tracing::info!(stream = self.stream, reply = index, after_ms = fault.after_ms, "cutting the reply as scripted");
        self.close_at = Some(self.close_at.map_or(at, |close| close.min(at)));
        self.close_exception = fault.exception;
        self.cutting = true;
    }

    pub(super) async fn scripted_close(&mut self) {
        self.close_at = None;
        self.state.sonic.count_close();
        self.state.count_fault();
        if std::mem::take(&mut self.cutting) && self.speaking.is_some() {
            self.state.sonic.count_cut();
        }
        match self.close_exception {
            Some(kind) => self.fail(kind, "The stream reached its connection time limit (simulated).").await,
            None => self.finish_output(),
        }
    }

    /// Sends an in-stream exception and ends the output.
    pub(super) async fn fail(&mut self, kind: StreamExceptionKind, message: &str) {
        tracing::info!(stream = self.stream, exception = kind.type_name(), message, "failing the stream");
        self.send_encoded([encode_message(&kind.message(message))]).await;
        self.finish_output();
    }

    /// Ends the output; the input is still read (and audio frames counted) until the
    /// client ends it.
    pub(super) fn finish_output(&mut self) {
        self.queue.clear();
        if self.out.take().is_some() && !self.input_done {
            self.drain_until = Some(Instant::now() + DRAIN_LIMIT);
        }
    }

    /// Sends encoded output messages in order, in one write (one that could not be
    /// encoded is logged and left out).
    pub(super) async fn send_encoded(&mut self, encoded: impl IntoIterator<Item = Result<Bytes, EnvelopeError>>) {
        let mut bytes = bytes::BytesMut::new();
        for message in encoded {
            match message {
                Ok(message) => bytes.extend_from_slice(&message),
                Err(error) => tracing::warn!(%error, "cannot encode an output event"),
            }
        }
        let Some(out) = &self.out else {
            return;
        };
        if !bytes.is_empty() && out.send(bytes.freeze()).await.is_err() {
            self.out = None;
        }
    }
}
