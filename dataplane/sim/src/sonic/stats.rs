//! What the simulated Nova Sonic counted and recorded, shared by every stream: streams,
//! audio frames, utterances, replies, notices and faults ([`SonicStats`], read through
//! [`crate::SimHandle::sonic_stats`]; its counts alone are [`SonicCounters`]). Streams
//! count through [`SonicState`]; this module sees no stream.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

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

/// An audio input frame the simulator received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameRecord {
    /// The stream (0-based) it arrived on.
    pub stream: u64,
    /// [`super::frame_fingerprint`] of its PCM bytes.
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
    /// Audio input frames a live stream received: 20 ms each ([`super::INPUT_FRAME_BYTES`]), so
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

    pub(super) fn next_stream(&self) -> u64 {
        self.with(|s| {
            s.streams += 1;
            s.streams - 1
        })
    }

    pub(super) fn next_utterance(&self) -> u64 {
        self.with(|s| s.utterances += 1);
        self.utterances.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn next_stream_error(&self) -> u64 {
        self.stream_errors.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn next_completion(&self) -> u64 {
        self.completions.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn next_tool_use(&self) -> u64 {
        self.tool_uses.fetch_add(1, Ordering::Relaxed)
    }

    /// A reply's audio starts: its index (0-based, over all streams).
    pub(super) fn next_reply_spoken(&self) -> u64 {
        self.replies_spoken.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn next_cut(&self) -> u64 {
        self.cuts.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn count_cut(&self) {
        self.with(|s| s.replies_cut += 1);
    }

    pub(super) fn count_audio_event(&self) {
        self.with(|s| s.audio_events += 1);
    }

    pub(super) fn count_frame(&self, frame: FrameRecord, record: bool) {
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

    pub(super) fn record_reply(&self, reply: ReplyRecord) {
        self.with(|s| s.replies.push(reply));
    }

    pub(super) fn count_reply_sent(&self) {
        self.with(|s| s.replies_sent += 1);
    }

    pub(super) fn count_tool_result(&self) {
        self.with(|s| s.tool_results += 1);
    }

    pub(super) fn count_interruption(&self) {
        self.with(|s| s.interruptions += 1);
    }

    pub(super) fn count_validation_error(&self) {
        self.with(|s| s.validation_errors += 1);
    }

    pub(super) fn record_voice(&self, stream: u64, voice: Option<String>) {
        self.with(|s| s.voices.push((stream, voice)));
    }

    pub(super) fn record_system_prompt(&self, stream: u64, prompt: &str) {
        self.with(|s| {
            if s.system_prompts.len() >= KEPT_SYSTEM_PROMPTS {
                s.system_prompts.pop_front();
            }
            s.system_prompts.push_back((stream, prompt.to_owned()));
        });
    }

    pub(super) fn record_history(&self, stream: u64, role: &str, text: &str) {
        self.with(|s| {
            if s.history.len() >= KEPT_HISTORY {
                s.history.pop_front();
            }
            s.history.push_back((stream, role.to_owned(), text.to_owned()));
        });
    }

    pub(super) fn record_notice(&self, stream: u64, text: &str, awaiting_tools: Vec<String>) {
        self.with(|s| {
            if s.notices.len() >= KEPT_HISTORY {
                s.notices.pop_front();
            }
            let record =
                NoticeRecord { stream, text: text.to_owned(), awaiting_tools, replies_before: s.replies.len() };
            s.notices.push_back(record);
        });
    }

    pub(super) fn record_typed(&self, text: &str) {
        self.with(|s| s.typed.push(text.to_owned()));
    }

    pub(super) fn count_close(&self) {
        self.with(|s| s.scripted_closes += 1);
    }
}
