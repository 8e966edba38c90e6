//! The machine's floor: a WebSocket server that does nothing but answer, used by the
//! latency benchmarks to measure what the same clients see on the same machine without a
//! runtime, a model client or a simulator in the path.
//!
//! It speaks just enough of the session protocol for the benchmarks' clients: a
//! `session_start` gets `bidi_connection_start` and a final greeting; a
//! `bidi_text_input` gets its first reply delta when the simulator would send it (waited
//! for with the simulator's own precise timer, [`pace::sleep_until`]) and then
//! `bidi_response_complete`; binary audio frames are watched for the end of an utterance
//! (the simulator's rule: a voiced frame, then `silence` frames of silence) and the frame
//! that completes it gets a reply audio chunk at once, then `bidi_response_complete`. With
//! [`FloorConfig::reply_chunks`] above one (`voice_density`'s floor) the reply is that many
//! 20 ms chunks of 24 kHz audio, the first `reply_delay` after the utterance's end and the
//! rest paced 20 ms apart, as the simulator sends them, while the caller's frames go on
//! arriving: the CPU of a server that reads a live call's frames and streams its replies,
//! with no model behind it.
//!
//! What a client measures against it is the cost of the WebSocket, loopback TCP, the
//! clients' and the server's wake-ups and the timer on this machine at that moment: a
//! latency figure of the real stack cannot be lower, and the difference between the two
//! is what the runtime (with its model client, TLS and HTTP/2 to the simulator, and the
//! simulator) adds.
//!
//! It runs as a child process — the benchmark's own executable with `BENCH_FLOOR_SERVER`
//! set — on a tokio runtime with as many worker threads as the benchmark gives
//! `switchboard` (`BENCH_WORKERS`, default 1), so it shares the machine the way the
//! runtime does.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};
use switchboard_runtime::voice::audio;
use switchboard_sim::converse::pace;
use tokio_tungstenite::tungstenite::Message;

use crate::common::HelperServer;

const ENV: &str = "BENCH_FLOOR_SERVER";

/// What the floor server is told at start.
#[derive(Clone, Copy, Debug)]
pub struct FloorConfig {
    /// When a text reply's first delta leaves, after the input arrived.
    pub first_delta: Duration,
    /// Silent frames after voice that end an utterance.
    pub silence_frames: usize,
    /// Reply audio chunks per utterance (one: sent at once, with no pacing).
    pub reply_chunks: usize,
    /// When the first of several reply chunks leaves, after the utterance's end.
    pub reply_delay: Duration,
}

impl FloorConfig {
    /// One reply chunk at once: the latency floor of `voice_relay`.
    pub fn one_chunk(silence_frames: usize) -> Self {
        Self { first_delta: Duration::ZERO, silence_frames, reply_chunks: 1, reply_delay: Duration::ZERO }
    }

    /// The reply the simulator speaks for `text` at `ms_per_char`, in its 20 ms chunks,
    /// the first `reply_delay` after the utterance's end.
    pub fn spoken(silence_frames: usize, text: &str, ms_per_char: u64, reply_delay: Duration) -> Self {
        let chunks = switchboard_sim::sonic::audio::speech_ms(text, ms_per_char).div_ceil(CHUNK.as_millis() as u64);
        Self { reply_chunks: chunks as usize, reply_delay, ..Self::one_chunk(silence_frames) }
    }
}

/// Starts this executable as the floor server.
pub fn start(config: FloorConfig) -> HelperServer {
    let value = format!(
        "{},{},{},{}",
        config.first_delta.as_micros(),
        config.silence_frames,
        config.reply_chunks,
        config.reply_delay.as_micros()
    );
    crate::common::spawn_self(ENV, &value, "floor listening on ")
}

/// Runs the floor server and returns true if this process was started as one; the
/// benchmark's `main` calls it first.
pub fn serve_if_asked() -> bool {
    let Ok(value) = std::env::var(ENV) else { return false };
    let mut parts = value.split(',').map(|p| p.parse::<u64>().unwrap_or(0));
    let config = FloorConfig {
        first_delta: Duration::from_micros(parts.next().unwrap_or(0)),
        silence_frames: parts.next().unwrap_or(10) as usize,
        reply_chunks: parts.next().unwrap_or(1).max(1) as usize,
        reply_delay: Duration::from_micros(parts.next().unwrap_or(0)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(crate::common::workers()))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        println!("floor listening on {}", listener.local_addr().expect("address").port());
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(socket, config));
        }
    });
    true
}

fn json(message: &ServerMessage) -> Message {
    Message::text(serde_json::to_string(message).expect("json"))
}

async fn connection(socket: tokio::net::TcpStream, config: FloorConfig) {
    let ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024);
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(socket, Some(ws_config)).await else { return };
    // 20 ms of 24 kHz PCM16, the size of one reply chunk.
    let chunk = base64_of_silence(960);
    let (mut turn, mut voiced, mut silent) = (0u64, false, 0usize);
    // A paced reply under way: chunks still to send and when the next one leaves.
    let mut reply: Option<(usize, tokio::time::Instant)> = None;
    loop {
        let message = tokio::select! {
            message = ws.next() => match message {
                Some(Ok(message)) => message,
                _ => break,
            },
            () = due(reply.map(|(_, at)| at)) => {
                let Some((left, at)) = reply.take() else { continue };
                if ws.feed(json(&ServerMessage::BidiAudioStream { audio: chunk.clone(), format: None })).await.is_err() {
                    return;
                }
                if left > 1 {
                    reply = Some((left - 1, at + CHUNK));
                } else {
                    turn += 1;
                    let done = ServerMessage::BidiResponseComplete { turn, stop_reason: "end_turn".into() };
                    if ws.feed(json(&done)).await.is_err() {
                        return;
                    }
                }
                if ws.flush().await.is_err() {
                    return;
                }
                continue;
            }
        };
        let replies = match message {
            Message::Text(text) => match serde_json::from_str::<ClientMessage>(text.as_str()) {
                Ok(ClientMessage::SessionStart(_)) => vec![
                    ServerMessage::BidiConnectionStart {
                        session_id: "floor".into(),
                        agent: "floor".into(),
                        mode: "hybrid".into(),
                        model: "none".into(),
                        resume_token: None,
                        seq: None,
                        candidate: false,
                    },
                    ServerMessage::BidiTranscriptStream {
                        role: TranscriptRole::Assistant,
                        text: "Hello.".into(),
                        delta: false,
                        is_final: true,
                        input_id: None,
                    },
                ],
                Ok(ClientMessage::BidiTextInput { .. }) => {
                    let arrived = Instant::now();
                    pace::sleep_until((arrived + config.first_delta).into()).await;
                    turn += 1;
                    vec![
                        ServerMessage::BidiTranscriptStream {
                            role: TranscriptRole::Assistant,
                            text: "A reply".into(),
                            delta: true,
                            is_final: false,
                            input_id: None,
                        },
                        ServerMessage::BidiResponseComplete { turn, stop_reason: "end_turn".into() },
                    ]
                }
                _ => Vec::new(),
            },
            Message::Binary(pcm) => {
                if audio::rms(&pcm) >= audio::VOICED_RMS {
                    (voiced, silent) = (true, 0);
                    Vec::new()
                } else if voiced {
                    silent += 1;
                    if silent == config.silence_frames && config.reply_chunks > 1 {
                        (voiced, silent) = (false, 0);
                        reply = Some((config.reply_chunks, tokio::time::Instant::now() + config.reply_delay));
                        Vec::new()
                    } else if silent == config.silence_frames {
                        (voiced, silent) = (false, 0);
                        turn += 1;
                        vec![
                            ServerMessage::BidiAudioStream { audio: chunk.clone(), format: None },
                            ServerMessage::BidiResponseComplete { turn, stop_reason: "end_turn".into() },
                        ]
                    } else {
                        Vec::new()
                    }
                } else {
                    Vec::new()
                }
            }
            Message::Close(_) => break,
            _ => Vec::new(),
        };
        for reply in &replies {
            if ws.feed(json(reply)).await.is_err() {
                return;
            }
        }
        if !replies.is_empty() && ws.flush().await.is_err() {
            return;
        }
    }
}

/// The pace of reply chunks.
const CHUNK: Duration = Duration::from_millis(20);

/// Waits until `at`, or for ever when there is nothing to wait for.
async fn due(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn base64_of_silence(bytes: usize) -> String {
    switchboard_models::sonic::EncodedAudio::from_pcm(&vec![0u8; bytes]).into_base64()
}
