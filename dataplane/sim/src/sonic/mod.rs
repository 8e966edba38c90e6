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
//! [`SonicScript`]), answers with a USER transcript, SPECULATIVE text, real-time
//! paced 24 kHz audio, usage, FINAL text and tool calls — all in one completion per prompt
//! — and stops speaking with an `INTERRUPTED` content end when the user talks over it.
//! Interactive USER text (typed text, or words a client asks again) is answered the same
//! way, without a transcript; non-interactive USER text once the conversation started (a
//! client's notice of what changed) is taken in without an answer: recorded
//! ([`SonicStats::notices`]) and read by the rules' `system` conditions from then on, as
//! the model would know it. Script faults end streams after a while (`close`), in the
//! middle of a reply being spoken (`cutReply`), or fail them at an utterance
//! (`streamError`); see [`crate::script::sonic::SonicFaults`].
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
mod session;
pub mod stats;
pub mod voice;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use tokio::sync::mpsc;

use super::http::{Body, BodyError, full_body};
use super::service_error::{ErrorKind, ServiceError};
use super::state::{SimState, applies};
pub use crate::script::sonic::SonicScript;
pub use audio::{INPUT_FRAME_BYTES, frame_fingerprint, phrase_frequency, phrase_tone};
pub use stats::{
    FrameRecord, KEPT_HISTORY, KEPT_SYSTEM_PROMPTS, NoticeRecord, ReplyRecord, SonicCounters, SonicState, SonicStats,
};
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
