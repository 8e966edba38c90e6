//! Audio formats (issue 26): a telephone call — G.711 μ-law at 8 kHz both ways — through
//! the real runtime and the real Nova Sonic client against the simulator: the simulator
//! still hears the caller's phrase after the runtime converted it to 16 kHz PCM16, and the
//! reply comes back as μ-law at 8 kHz with the simulator's voice at its pitch and level.
//! Reply audio as binary frames when asked; unsupported formats refused with a clear
//! `bidi_error` while the session goes on.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::audio::{Encoding, Format, from_samples, to_samples};
use switchboard_core::protocol::{
    AudioFormat, AudioSettings, ClientMessage, ServerMessage, SessionStart, TranscriptRole,
};
use switchboard_sim::sonic::audio::sine;
use switchboard_sim::sonic::{phrase_frequency, pitch, voice_frequency};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::common::{self, PATIENCE, finals, is_final_reply, summary};

/// The simulator's reply voice: a sine of amplitude 6000 at triage's voice's pitch.
const REPLY_AMPLITUDE: f64 = 6000.0;

fn reply_hz() -> f64 {
    voice_frequency(Some("tiffany"))
}

/// What the server sent: a protocol message or a binary frame.
#[derive(Debug)]
enum Received {
    Message(ServerMessage),
    Binary(Vec<u8>),
}

/// A caller whose microphone sends 20 ms frames of `format` in binary frames, in real time.
struct Phone {
    say: mpsc::UnboundedSender<u32>,
    read: futures_util::stream::SplitStream<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    >,
    mic: tokio::task::JoinHandle<()>,
    seen: Vec<ServerMessage>,
    binary: Vec<Vec<u8>>,
}

impl Phone {
    async fn call(url: &str, audio: AudioSettings, format: Format) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("websocket connects");
        let (mut sink, read) = ws.split();
        let start = ClientMessage::SessionStart(SessionStart {
            agent: Some("triage".into()),
            modalities: vec!["audio".into()],
            audio: Some(audio),
            ..SessionStart::default()
        });
        sink.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
        let (say, mut said) = mpsc::unbounded_channel::<u32>();
        let mic = tokio::spawn(async move {
            let frame_samples = format.rate as usize / 50;
            let mut pending: Vec<i16> = Vec::new();
            let mut offset = 0u64;
            let mut ticker = tokio::time::interval(Duration::from_millis(20));
            loop {
                ticker.tick().await;
                while let Ok(id) = said.try_recv() {
                    // 700 ms of the phrase's tone, as the caller's phone samples it.
                    let tone = sine(phrase_frequency(id), format.rate, 700, 8000, offset);
                    offset += tone.len() as u64 / 2;
                    let mut samples = Vec::new();
                    to_samples(&tone, Encoding::Pcm16, &mut samples);
                    pending.extend(samples);
                }
                let take = pending.len().min(frame_samples);
                let mut frame: Vec<i16> = pending.drain(..take).collect();
                frame.resize(frame_samples, 0);
                if sink.send(Message::binary(from_samples(&frame, format.encoding))).await.is_err() {
                    return;
                }
            }
        });
        Self { say, read, mic, seen: Vec::new(), binary: Vec::new() }
    }

    fn say(&self, id: u32) {
        let _ = self.say.send(id);
    }

    async fn next(&mut self) -> Received {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.read.next())
                .await
                .unwrap_or_else(|_| panic!("no message in time; seen {:#?}", summary(&self.seen)));
            match frame {
                Some(Ok(Message::Text(text))) => {
                    let message: ServerMessage = serde_json::from_str(text.as_str()).expect("protocol JSON");
                    self.seen.push(message.clone());
                    return Received::Message(message);
                }
                Some(Ok(Message::Binary(data))) => {
                    self.binary.push(data.to_vec());
                    return Received::Binary(data.to_vec());
                }
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}; seen {:#?}", summary(&self.seen)),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}; seen {:#?}", summary(&self.seen)),
            }
        }
    }

    /// Reads until a message matches `pred`; returns what came (binary frames included).
    async fn until(&mut self, pred: impl Fn(&ServerMessage) -> bool) -> Vec<Received> {
        let mut got = Vec::new();
        loop {
            let received = self.next().await;
            let done = matches!(&received, Received::Message(m) if pred(m));
            got.push(received);
            if done {
                return got;
            }
        }
    }

    fn hang_up(self) {
        self.mic.abort();
    }
}

fn messages(received: &[Received]) -> Vec<ServerMessage> {
    received
        .iter()
        .filter_map(|r| match r {
            Received::Message(m) => Some(m.clone()),
            Received::Binary(_) => None,
        })
        .collect()
}

/// The samples of the reply audio in `received`: base64 chunks (each saying `format`) or
/// binary frames, decoded from `format`.
fn reply_samples(received: &[Received], format: Format) -> Vec<i16> {
    let mut bytes = Vec::new();
    for r in received {
        match r {
            Received::Message(ServerMessage::BidiAudioStream { audio, format: said }) => {
                assert_eq!(said.as_ref(), Some(&format.to_wire()), "each chunk says its format");
                bytes.extend(aws_smithy_types::base64::decode(audio).expect("base64"));
            }
            Received::Binary(data) => bytes.extend_from_slice(data),
            Received::Message(_) => {}
        }
    }
    let mut samples = Vec::new();
    to_samples(&bytes, format.encoding, &mut samples);
    samples
}

/// Pitch (the simulator's measure) and RMS level of `samples` at `rate`.
fn pitch_and_level(samples: &[i16], rate: u32) -> (f64, f64) {
    let voiced: Vec<f64> = samples.iter().map(|&s| f64::from(s)).filter(|s| s.abs() > 0.0).collect();
    let level = (voiced.iter().map(|s| s * s).sum::<f64>() / voiced.len().max(1) as f64).sqrt();
    (pitch(samples, rate), level)
}

fn wire(encoding: &str, rate: u32) -> AudioFormat {
    AudioFormat { encoding: encoding.into(), sample_rate: Some(rate) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telephone_call_in_mulaw_at_8_khz_is_heard_and_answered_in_mulaw() {
    let running = common::banking(&common::script("", "")).await;
    let mulaw = Format { encoding: Encoding::Mulaw, rate: 8000 };
    let settings =
        AudioSettings { input: Some(wire("mulaw", 8000)), output: Some(wire("mulaw", 8000)), binary_output: false };
    let mut phone = Phone::call(&running.url(), settings, mulaw).await;
    phone.say(common::STORY);
    let story = phone.until(|m| is_final_reply(m, "Once upon a time")).await;
    let seen = messages(&story);
    assert_eq!(finals(&seen, TranscriptRole::User), vec!["Tell me a story".to_owned()], "{:#?}", summary(&seen));
    assert!(!seen.iter().any(|m| matches!(m, ServerMessage::BidiError { .. })), "{:#?}", summary(&seen));

    let reply = reply_samples(&story, mulaw);
    // The story is 170 characters at 4 ms each: 0.68 s at 8 kHz, one byte a sample.
    assert!(reply.len() > 4000, "{} samples of reply", reply.len());
    let (pitch, level) = pitch_and_level(&reply, 8000);
    assert!((pitch - reply_hz()).abs() < 5.0, "the reply voice's pitch after 24 -> 8 kHz μ-law: {pitch:.1} Hz");
    let expected = REPLY_AMPLITUDE / 2f64.sqrt();
    assert!((level / expected - 1.0).abs() < 0.1, "the reply voice's level: {level:.0}, expected {expected:.0}");

    // A second turn in the same format.
    phone.say(common::HOURS);
    let hours = phone.until(|m| is_final_reply(m, "nine to five")).await;
    assert_eq!(finals(&messages(&hours), TranscriptRole::User), vec!["What are your opening hours?".to_owned()]);
    assert!(running.sim.sonic_stats().utterances >= 2);
    phone.hang_up();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_audio_comes_as_binary_frames_when_asked() {
    let running = common::banking(&common::script("", "")).await;
    let pcm16k = Format { encoding: Encoding::Pcm16, rate: 16_000 };
    let settings = AudioSettings { input: None, output: Some(wire("pcm16", 16_000)), binary_output: true };
    let mut phone = Phone::call(&running.url(), settings, Format::MODEL_INPUT).await;
    phone.say(common::STORY);
    let story = phone.until(|m| is_final_reply(m, "Once upon a time")).await;
    let seen = messages(&story);
    assert!(
        !seen.iter().any(|m| matches!(m, ServerMessage::BidiAudioStream { .. })),
        "no base64 audio: {:#?}",
        summary(&seen)
    );
    let frames = story.iter().filter(|r| matches!(r, Received::Binary(_))).count();
    assert!(frames > 5, "the reply came in binary frames ({frames})");
    assert!(story.iter().all(|r| !matches!(r, Received::Binary(b) if b.len() % 2 != 0)), "whole PCM16 samples");
    let reply = reply_samples(&story, pcm16k);
    let (pitch, level) = pitch_and_level(&reply, 16_000);
    assert!((pitch - reply_hz()).abs() < 5.0, "pitch at 16 kHz: {pitch:.1} Hz");
    assert!((level / (REPLY_AMPLITUDE / 2f64.sqrt()) - 1.0).abs() < 0.1, "level {level:.0}");
    // Everything else is still JSON, in order: the final line after the audio.
    assert!(matches!(story.last(), Some(Received::Message(_))));
    phone.hang_up();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_formats_are_refused_clearly_and_the_session_goes_on_in_the_default() {
    let running = common::banking(&common::script("", "")).await;
    let settings =
        AudioSettings { input: Some(wire("opus", 48_000)), output: Some(wire("mulaw", 16_000)), binary_output: false };
    // The caller falls back to what the errors say: PCM16 16 kHz.
    let mut phone = Phone::call(&running.url(), settings, Format::MODEL_INPUT).await;
    let refused = phone
        .until(|m| matches!(m, ServerMessage::BidiError { message, .. } if message.contains("audio.output")))
        .await;
    let errors: Vec<(String, String, bool)> = messages(&refused)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiError { code, message, recoverable, .. } => {
                Some((code.to_string(), message, recoverable))
            }
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors.iter().all(|(code, _, recoverable)| code == "unsupported_audio_format" && *recoverable));
    assert!(errors[0].1.contains("\"opus\"") && errors[0].1.contains("pcm16, mulaw or alaw"), "{}", errors[0].1);
    assert!(errors[1].1.contains("8000 Hz only") && errors[1].1.contains("PCM16 24 kHz"), "{}", errors[1].1);
    phone.say(common::HOURS);
    let hours = phone.until(|m| is_final_reply(m, "nine to five")).await;
    assert_eq!(finals(&messages(&hours), TranscriptRole::User), vec!["What are your opening hours?".to_owned()]);
    let reply = reply_samples(&hours, Format::MODEL_OUTPUT);
    assert!(!reply.is_empty(), "the reply is spoken in the default format");
    phone.hang_up();
}
