//! What a session's WebSocket reads: every frame the client sends passes here first
//! ([`super::socket`] reads them). It enforces the message size limit, the message rate
//! (token bucket) and, for voice, the audio byte rate — both judged by when the frames could
//! have arrived ([`Reader::caught_up`]), so a socket task that fell behind does not take its
//! backlog for a flood; it checks audio frames (raw samples in
//! binary frames or base64 in `bidi_audio_input`, in the format `session_start.audio`
//! chose), converts them to the voice model's 16 kHz PCM16, and decodes JSON messages. A bad
//! frame gets a recoverable `bidi_error` ([`Verdict::Tell`]) and reading goes on; a broken
//! limit is [`Verdict::Fatal`]: the socket closes with its own code.

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_serve::TokenBucket;
use switchboard_serve::frames::{self, Message};
use tokio::sync::mpsc;

use super::metrics::Metrics;
use super::voice::{AudioGate, Gate, audio};
use switchboard_core::audio::{Decoder, Format, negotiate};
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, close_code, decode_client};

/// The limits the reader holds a client to (the server's, [`super::ServerConfig`]).
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// Largest client message after the first, in bytes; larger ones close with 1009.
    pub max_message_bytes: usize,
    /// Client messages per second on average...
    pub rate_per_second: u32,
    /// ...and in a burst; beyond it the session is closed with 1008.
    pub rate_burst: u32,
    /// No client message for this long closes the session.
    pub idle_timeout: Duration,
}

/// The reader's side of the audio channel.
#[derive(Debug)]
pub struct AudioIn {
    /// Checked PCM16 frames towards the voice session.
    pub tx: mpsc::Sender<Bytes>,
    /// Whether audio is accepted now, ignored or refused.
    pub gate: AudioGate,
}

/// What to do after a frame.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Read the next one.
    Next,
    /// Tell the client this (a recoverable error about its frame), and read the next one.
    Tell(ServerMessage),
    /// Stop reading: the client closed or went away, or the session is gone.
    Stop,
    /// Close with this code and reason (and metric kind), then drain.
    Fatal(u16, String, &'static str),
    /// The session's audio queue is full (the session is behind, not the client: its rate
    /// was checked): the frame waits for room, and nothing more is read meanwhile, so what
    /// the client sends waits in its socket — backpressure, not a close.
    Hold(Bytes),
}

/// The client's side of a session: its frames, checked, to the session.
pub(super) struct Reader {
    in_tx: mpsc::Sender<ClientMessage>,
    audio_in: AudioIn,
    bucket: TokenBucket,
    audio_bucket: audio::AudioBucket,
    limits: ReadLimits,
    /// Counts refused frames and broken limits.
    metrics: Metrics,
    /// The first message was read (only a `session_start` may exceed the message limit).
    started: bool,
    /// The caller's audio format (`session_start.audio.input`) to the model's.
    decoder: Decoder,
}

impl Reader {
    /// A reader passing what it reads to `in_tx` (messages) and `audio_in` (audio).
    pub(super) fn new(
        in_tx: mpsc::Sender<ClientMessage>,
        audio_in: AudioIn,
        limits: ReadLimits,
        metrics: Metrics,
    ) -> Self {
        Self {
            in_tx,
            audio_in,
            bucket: TokenBucket::new(limits.rate_per_second, limits.rate_burst),
            audio_bucket: audio::AudioBucket::default(),
            limits,
            metrics,
            started: false,
            decoder: Decoder::new(Format::MODEL_INPUT),
        }
    }

    /// The socket was found empty at `at` (everything that had arrived was read): the
    /// rates judge what is read next from there, not from when the socket task got to it
    /// ([`switchboard_serve::bucket`]).
    pub(super) fn caught_up(&mut self, at: Instant) {
        self.bucket.caught_up(at);
        self.audio_bucket.caught_up(at);
    }

    /// No client message for this long closes the session.
    pub(super) fn idle_timeout(&self) -> Duration {
        self.limits.idle_timeout
    }

    /// The close for a client that sent nothing for [`Reader::idle_timeout`].
    pub(super) fn idle(&self) -> Verdict {
        let reason = format!("no message for {} s; the session was closed", self.limits.idle_timeout.as_secs());
        Verdict::Fatal(close_code::IDLE_TIMEOUT, reason, "idle_timeout")
    }

    /// A message over the configured limit ends the session with 1009; the first may be a
    /// signed `session_start` up to [`switchboard_core::grant::MAX_START_BYTES`] (the
    /// socket refuses anything larger).
    fn over_limit(&mut self, frame: &Message) -> Option<Verdict> {
        let len = match frame {
            Message::Text(text) => text.len(),
            Message::Binary(data) => data.len(),
            _ => return None,
        };
        let first = !std::mem::replace(&mut self.started, true);
        let limit = self.limits.max_message_bytes;
        // Parsed only when it matters: a first text frame over the limit.
        let start = || matches!(frame, Message::Text(text) if switchboard_core::protocol::is_session_start(text));
        (len > limit && !(first && start())).then(|| {
            let reason = format!("a message exceeded the limit of {limit} bytes");
            Verdict::Fatal(close_code::TOO_BIG, reason, "message_too_big")
        })
    }

    /// A frame that could not be read: too big (its own close code), or the connection broke
    /// (a frame that broke the protocol was already answered with its close, 1002 or 1007).
    pub(super) fn read_error(&self, error: &frames::Error) -> Verdict {
        if matches!(error, frames::Error::TooLong { .. }) {
            let reason = format!("a message exceeded the limit of {} bytes", self.limits.max_message_bytes);
            return Verdict::Fatal(close_code::TOO_BIG, reason, "message_too_big");
        }
        Verdict::Stop
    }

    /// What to do with the client's next frame.
    pub(super) fn frame(&mut self, frame: Message) -> Verdict {
        if let Some(verdict) = self.over_limit(&frame) {
            return verdict;
        }
        let gate = self.audio_in.gate.get();
        let audio_frame = match &frame {
            Message::Binary(_) if gate == Gate::Ignore => return Verdict::Next,
            Message::Binary(data) if gate == Gate::Accept => {
                Some(audio::check_frame(data.clone(), self.decoder.format()))
            }
            Message::Text(text) if gate != Gate::Refuse && text.contains("bidi_audio_input") => {
                match decode_client(text.as_str()) {
                    Ok(ClientMessage::BidiAudioInput { .. }) if gate == Gate::Ignore => return Verdict::Next,
                    Ok(ClientMessage::BidiAudioInput { audio }) => {
                        Some(audio::decode_base64(&audio, self.decoder.format()))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(checked) = audio_frame {
            return self.audio(checked);
        }
        match frame {
            Message::Text(text) => self.text(text.as_str()),
            Message::Binary(_) => {
                let error = ServerMessage::error(
                    ErrorCode::UnsupportedFrame,
                    "binary frames carry audio; text sessions take JSON text frames",
                    true,
                );
                Verdict::Tell(error)
            }
            Message::Close(_) => Verdict::Stop,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Verdict::Next,
        }
    }

    /// A checked audio frame: converted to the model's format, to the voice session, within
    /// the audio byte rate.
    fn audio(&mut self, checked: Result<Bytes, audio::AudioError>) -> Verdict {
        let pcm = match checked {
            Ok(frame) if self.decoder.is_passthrough() => frame,
            Ok(frame) => Bytes::from(self.decoder.decode(&frame)),
            Err(error) => {
                self.count(error.code().metric_label());
                return Verdict::Tell(ServerMessage::error(error.code(), error.to_string(), true));
            }
        };
        if pcm.is_empty() {
            // A frame shorter than one sample of the model's rate: the converter holds it.
            return Verdict::Next;
        }
        if !self.audio_bucket.take_read(pcm.len(), Instant::now()) {
            let reason =
                format!("audio arrives faster than {}x real time; send it as it is recorded", audio::AUDIO_RATE_FACTOR);
            return Verdict::Fatal(close_code::RATE_LIMITED, reason, "audio_rate_limited");
        }
        match self.audio_in.tx.try_send(pcm) {
            Ok(()) => Verdict::Next,
            Err(mpsc::error::TrySendError::Full(pcm)) => Verdict::Hold(pcm),
            Err(mpsc::error::TrySendError::Closed(_)) => Verdict::Stop,
        }
    }

    /// A JSON message: within the message rate, decoded, to the session.
    fn text(&mut self, text: &str) -> Verdict {
        let config = &self.limits;
        if !self.bucket.take_read(Instant::now()) {
            let reason = format!(
                "more than {} messages per second (burst {}); slow down",
                config.rate_per_second, config.rate_burst
            );
            return Verdict::Fatal(close_code::RATE_LIMITED, reason, "rate_limited");
        }
        match decode_client(text) {
            Ok(message) => {
                // A session that asks for audio takes it from its session_start on: a client
                // (or the gateway, moving a call) streams right after it, before the agent's
                // voice stream is open; the driver ignores it if the agent is text-only.
                if let ClientMessage::SessionStart(start) = &message
                    && self.audio_in.gate.get() == Gate::Refuse
                    && start.modalities.iter().any(|m| m.eq_ignore_ascii_case("audio"))
                {
                    self.audio_in.gate.set(Gate::Accept);
                    // An unsupported format stays the default; the session tells the client.
                    self.decoder = Decoder::new(negotiate(start.audio.as_ref()).0.input);
                }
                self.session_message(message)
            }
            Err(error) => {
                self.count(error.code().metric_label());
                Verdict::Tell(ServerMessage::error(error.code(), error.to_string(), true))
            }
        }
    }

    fn session_message(&mut self, message: ClientMessage) -> Verdict {
        match self.in_tx.try_send(message) {
            Ok(()) => Verdict::Next,
            Err(mpsc::error::TrySendError::Full(_)) => {
                Verdict::Fatal(close_code::RATE_LIMITED, "too many messages are waiting; slow down".into(), "flood")
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Verdict::Stop,
        }
    }

    /// The session's audio queue, for a frame [`Verdict::Hold`] keeps waiting.
    pub(super) fn audio_queue(&self) -> &mpsc::Sender<Bytes> {
        &self.audio_in.tx
    }

    fn count(&self, kind: &str) {
        self.metrics.errors.with_label_values(&["", kind]).inc();
    }

    /// Counts a broken limit; the socket then closes, and the reader (and with it the
    /// session's input) is dropped after the close is queued, so the session sees its
    /// client gone only once the close is on its way.
    pub(super) fn fatal(&self, kind: &'static str) {
        self.count(kind);
    }
}
