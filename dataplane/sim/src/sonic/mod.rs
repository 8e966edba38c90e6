//! `InvokeModelWithBidirectionalStream` — the simulated Amazon Nova Sonic.
//!
//! `POST /model/{modelId}/invoke-with-bidirectional-stream` with a full-duplex
//! `application/vnd.amazon.eventstream` body. The response headers are sent at once (the
//! SDK's `send()` returns when they arrive); request-level faults (`faults.error`,
//! `knownModels`) answer with the service's HTTP error instead. Then one task per stream
//! (`session`) validates the input events ([`protocol`]), detects utterances in the
//! user's audio ([`audio`]) and answers them by the script's rules ([`output`]).
//!
//! The simulator never speaks unprompted and never answers the system prompt or replayed
//! history; asked to speak first (an interactive USER text with `Speak first:` and the
//! greeting in quotes, see [`output::speak_first_greeting`]) it says the greeting as its
//! reply, as Nova 2 Sonic follows such an instruction. It "hears" an utterance by its phrase tone or by its position (see
//! [`script::SonicScript`]), answers with a USER transcript, SPECULATIVE text, real-time
//! paced 24 kHz audio, usage, FINAL text and tool calls — all in one completion per prompt
//! — and stops speaking with an `INTERRUPTED` content end when the user talks over it.
//! Interactive USER text (typed text, or words a client asks again) is answered the same
//! way, without a transcript; non-interactive USER text once the conversation started (a
//! client's notice of what changed) is taken in without an answer: recorded
//! ([`SonicStats::notices`]) and read by the rules' `system` conditions from then on, as
//! the model would know it. Script faults end streams after a while (`close`), in the
//! middle of a reply being spoken (`cutReply`), or fail them at an utterance
//! (`streamError`); see [`script::SonicFaults`].
//! Where the service's behaviour is undocumented, [`protocol`] (input) and `session`
//! (output) say which shipped client the simulator follows.
//!
//! [`SonicStats`] (from [`crate::SimHandle::sonic_stats`]) counts streams, audio
//! frames (with fingerprints when `recordFrames` is on), utterances, replies and faults.

pub mod audio;
pub mod envelope;
pub mod noise;
pub mod output;
pub mod protocol;
pub mod script;
mod session;
pub mod voice;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde::Serialize;
use tokio::sync::mpsc;

use super::http::{Body, BodyError, full_body};
use super::service_error::{ErrorKind, ServiceError};
use super::state::{SimState, applies};
pub use audio::{frame_fingerprint, phrase_frequency, phrase_tone};
pub use script::SonicScript;
pub use voice::{pitch, voice_frequency};

/// Output events buffered per stream before the session waits for the client.
const OUTPUT_BUFFER: usize = 64;

/// Answers one `InvokeModelWithBidirectionalStream` request.
pub fn handle(
    request: http::Request<Incoming>,
    model_id: &str,
    state: &Arc<SimState>,
    request_id: &str,
) -> http::Response<Body> {
    let script = &state.script;
    if !script.known_models.is_empty() && !script.known_models.iter().any(|m| m == model_id) {
        let message = format!("Model {model_id} was not found. Check the model id and the region.");
        return ServiceError::new(ErrorKind::ResourceNotFound, message).into_response(request_id);
    }
    let call = state.next_model_call();
    if let Some(fault) = script.faults.error.as_ref().filter(|f| applies(f.first, call)) {
        state.count_fault();
        let message = fault.message.clone().unwrap_or_else(|| fault.kind.default_message().to_owned());
        tracing::info!(model_id, error = fault.kind.type_name(), "bidirectional stream refused as scripted");
        return ServiceError::new(fault.kind, message).into_response(request_id);
    }
    let stream = state.sonic.next_stream();
    let close_at = script
        .sonic
        .faults
        .close
        .as_ref()
        .filter(|c| applies(c.first, stream))
        .map(|c| tokio::time::Instant::now() + Duration::from_millis(c.after_ms));
    let (out, mut feed) = mpsc::channel::<Bytes>(OUTPUT_BUFFER);
    let session = session::Session::new(state.clone(), model_id.to_owned(), stream, out, close_at);
    tokio::spawn(session.run(request.into_body()));
    tracing::info!(model_id, stream, "bidirectional stream opened");
    let body = futures_util::stream::poll_fn(move |cx| {
        feed.poll_recv(cx).map(|b| b.map(|b| Ok::<_, BodyError>(Frame::data(b))))
    });
    http::Response::builder()
        .status(200)
        .header("content-type", "application/vnd.amazon.eventstream")
        .header("x-amzn-requestid", request_id)
        .body(StreamBody::new(body).boxed_unsync())
        .unwrap_or_else(|_| http::Response::new(full_body(Bytes::new())))
}

/// A reply the simulator planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyRecord {
    /// The stream (0-based) that answered.
    pub stream: u64,
    /// What the user said or typed (`None` for the continuation after a tool result).
    pub heard: Option<String>,
    /// Whether `heard` was heard in the user's audio (not interactive text).
    pub spoken: bool,
    /// The rule that answered (`None`: the default reply).
    pub rule: Option<String>,
    /// The reply text.
    pub text: Option<String>,
    /// The tool called.
    pub tool: Option<String>,
}

/// The simulator hears its input audio 20 ms at a time, whatever the size of the events
/// it comes in (as the service does not depend on how a client cuts its audio): PCM16 at
/// 16 kHz.
pub const INPUT_FRAME_BYTES: usize = 640;

/// An audio input frame the simulator received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameRecord {
    /// The stream (0-based) it arrived on.
    pub stream: u64,
    /// [`frame_fingerprint`] of its PCM bytes.
    pub fingerprint: u64,
    /// Whether the stream was live (a model heard it) or its output had already ended.
    pub heard: bool,
}

/// A snapshot of the bidirectional operation's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SonicStats {
    /// Streams opened (accepted requests).
    pub streams: u64,
    /// Audio input frames a live stream received: 20 ms each ([`INPUT_FRAME_BYTES`]), so
    /// an `audioInput` event that carries several frames counts as that many (a shorter
    /// rest as one).
    pub audio_frames: u64,
    /// Audio frames that arrived after the stream's output had ended (heard by no model).
    pub frames_after_close: u64,
    /// `audioInput` events received (each of one frame or more).
    pub audio_events: u64,
    /// Every received frame, in arrival order, when the script's `recordFrames` is on.
    pub frames: Vec<FrameRecord>,
    /// Utterances detected.
    pub utterances: u64,
    /// Replies planned, in order (a stream closed before one was sent leaves it planned).
    pub replies: Vec<ReplyRecord>,
    /// Replies whose last event was sent on their stream (complete, not cut by a close).
    pub replies_sent: u64,
    /// Tool results received.
    pub tool_results: u64,
    /// Barge-ins.
    pub interruptions: u64,
    /// Input sequences refused as invalid.
    pub validation_errors: u64,
    /// Streams closed by the script's `close` or `cutReply` fault.
    pub scripted_closes: u64,
    /// Replies whose stream the script's `cutReply` fault ended while they were spoken.
    pub replies_cut: u64,
    /// The voice id each stream's `promptStart` asked for, by stream.
    pub voices: Vec<(u64, Option<String>)>,
    /// User texts typed into streams (interactive text contents), in order.
    pub typed: Vec<String>,
    /// The SYSTEM prompt each stream was given, by stream: the last
    /// [`KEPT_SYSTEM_PROMPTS`], so a long-running simulator does not keep them all.
    pub system_prompts: VecDeque<(u64, String)>,
    /// The replayed history each stream was given (stream, role, text), in order: the last
    /// [`KEPT_HISTORY`] entries.
    pub history: VecDeque<(u64, String, String)>,
    /// Non-interactive USER texts a stream took in mid-session without answering (a
    /// client's notices, context), in order: the last [`KEPT_HISTORY`].
    pub notices: VecDeque<NoticeRecord>,
}

/// A non-interactive USER text a stream took in after its interactive input began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeRecord {
    /// The stream (0-based) that took it in.
    pub stream: u64,
    /// The text.
    pub text: String,
    /// The tools whose results the stream still awaited when it arrived (sorted): a
    /// notice sent before a tool's result names that tool.
    pub awaiting_tools: Vec<String>,
    /// Replies planned (all streams) when it arrived.
    pub replies_before: usize,
}

/// The bidirectional operation's counters, as `GET /stats` reports them (the fields of
/// [`SonicStats`] that are counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SonicCounters {
    /// Streams opened.
    pub streams: u64,
    /// Audio input frames a live stream received.
    pub audio_frames: u64,
    /// Utterances detected.
    pub utterances: u64,
    /// Replies sent complete.
    pub replies_sent: u64,
    /// Tool results received.
    pub tool_results: u64,
    /// Barge-ins.
    pub interruptions: u64,
    /// Input sequences refused as invalid.
    pub validation_errors: u64,
    /// Streams closed by the script's `close` or `cutReply` fault.
    pub scripted_closes: u64,
}

/// How many history entries [`SonicStats::history`] keeps.
pub const KEPT_HISTORY: usize = 256;

/// How many streams' SYSTEM prompts [`SonicStats::system_prompts`] keeps.
pub const KEPT_SYSTEM_PROMPTS: usize = 64;

/// The counters, shared by every stream.
#[derive(Debug, Default)]
pub struct SonicState {
    stats: Mutex<SonicStats>,
    utterances: AtomicU64,
    stream_errors: AtomicU64,
    completions: AtomicU64,
    tool_uses: AtomicU64,
    replies_spoken: AtomicU64,
    cuts: AtomicU64,
}

impl SonicState {
    fn with<T>(&self, f: impl FnOnce(&mut SonicStats) -> T) -> T {
        let mut stats = self.stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut stats)
    }

    /// The counters now.
    pub fn snapshot(&self) -> SonicStats {
        self.with(|s| s.clone())
    }

    /// The counters alone (no per-frame, per-reply or per-stream records): what
    /// `GET /stats` reports.
    pub fn counters(&self) -> SonicCounters {
        self.with(|s| SonicCounters {
            streams: s.streams,
            audio_frames: s.audio_frames,
            utterances: s.utterances,
            replies_sent: s.replies_sent,
            tool_results: s.tool_results,
            interruptions: s.interruptions,
            validation_errors: s.validation_errors,
            scripted_closes: s.scripted_closes,
        })
    }

    fn next_stream(&self) -> u64 {
        self.with(|s| {
            s.streams += 1;
            s.streams - 1
        })
    }

    fn next_utterance(&self) -> u64 {
        self.with(|s| s.utterances += 1);
        self.utterances.fetch_add(1, Ordering::Relaxed)
    }

    fn next_stream_error(&self) -> u64 {
        self.stream_errors.fetch_add(1, Ordering::Relaxed)
    }

    fn next_completion(&self) -> u64 {
        self.completions.fetch_add(1, Ordering::Relaxed)
    }

    fn next_tool_use(&self) -> u64 {
        self.tool_uses.fetch_add(1, Ordering::Relaxed)
    }

    /// A reply's audio starts: its index (0-based, over all streams).
    fn next_reply_spoken(&self) -> u64 {
        self.replies_spoken.fetch_add(1, Ordering::Relaxed)
    }

    fn next_cut(&self) -> u64 {
        self.cuts.fetch_add(1, Ordering::Relaxed)
    }

    fn count_cut(&self) {
        self.with(|s| s.replies_cut += 1);
    }

    fn count_audio_event(&self) {
        self.with(|s| s.audio_events += 1);
    }

    fn count_frame(&self, frame: FrameRecord, record: bool) {
        self.with(|s| {
            if frame.heard {
                s.audio_frames += 1;
            } else {
                s.frames_after_close += 1;
            }
            if record {
                s.frames.push(frame);
            }
        });
    }

    fn record_reply(&self, reply: ReplyRecord) {
        self.with(|s| s.replies.push(reply));
    }

    fn count_reply_sent(&self) {
        self.with(|s| s.replies_sent += 1);
    }

    fn count_tool_result(&self) {
        self.with(|s| s.tool_results += 1);
    }

    fn count_interruption(&self) {
        self.with(|s| s.interruptions += 1);
    }

    fn count_validation_error(&self) {
        self.with(|s| s.validation_errors += 1);
    }

    fn record_voice(&self, stream: u64, voice: Option<String>) {
        self.with(|s| s.voices.push((stream, voice)));
    }

    fn record_system_prompt(&self, stream: u64, prompt: &str) {
        self.with(|s| {
            if s.system_prompts.len() >= KEPT_SYSTEM_PROMPTS {
                s.system_prompts.pop_front();
            }
            s.system_prompts.push_back((stream, prompt.to_owned()));
        });
    }

    fn record_history(&self, stream: u64, role: &str, text: &str) {
        self.with(|s| {
            if s.history.len() >= KEPT_HISTORY {
                s.history.pop_front();
            }
            s.history.push_back((stream, role.to_owned(), text.to_owned()));
        });
    }

    fn record_notice(&self, stream: u64, text: &str, awaiting_tools: Vec<String>) {
        self.with(|s| {
            if s.notices.len() >= KEPT_HISTORY {
                s.notices.pop_front();
            }
            let record =
                NoticeRecord { stream, text: text.to_owned(), awaiting_tools, replies_before: s.replies.len() };
            s.notices.push_back(record);
        });
    }

    fn record_typed(&self, text: &str) {
        self.with(|s| s.typed.push(text.to_owned()));
    }

    fn count_close(&self) {
        self.with(|s| s.scripted_closes += 1);
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
