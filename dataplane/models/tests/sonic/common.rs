//! Helpers: a simulator, a client pointed at it, a microphone task that sends 20 ms
//! frames in real time, and event collection.

use std::time::Duration;

use bytes::Bytes;
use switchboard_models::bedrock::{BedrockConfig, build_client};
use switchboard_models::sonic::{
    GenerationStage, RestartReason, Role, SonicConfig, SonicEvent, SonicEvents, SonicSession,
};
use switchboard_sim::sonic::{frame_fingerprint, phrase_tone};
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator};
use tokio::sync::{mpsc, oneshot};

/// One frame: 20 ms at 16 kHz, PCM16.
pub const FRAME_MS: u64 = 20;
const FRAME_BYTES: usize = 640;

pub async fn start(yaml: &str) -> SimHandle {
    let script = Script::parse(yaml).expect("test script parses");
    Simulator::start(SimConfig::new(script)).await.expect("simulator starts")
}

pub fn bedrock(sim: &SimHandle) -> BedrockConfig {
    BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path())
}

pub async fn client(sim: &SimHandle) -> aws_sdk_bedrockruntime::Client {
    build_client(&bedrock(sim)).await.expect("client builds")
}

pub fn config() -> SonicConfig {
    let mut config = SonicConfig::new("You are the Example Bank voice assistant. Keep answers short.");
    config.retry.initial_backoff = Duration::from_millis(20);
    config.retry.jitter_seed = Some(7);
    config
}

pub async fn session(sim: &SimHandle, config: SonicConfig) -> (SonicSession, SonicEvents) {
    SonicSession::start(client(sim).await, config).await.expect("session starts")
}

/// Faint deterministic noise (RMS far below the speech threshold), so that every frame
/// is unique and frames can be told apart by fingerprint.
fn faint_noise(frame: u64, pcm: &mut [u8]) {
    let mut rng = fastrand::Rng::with_seed(frame);
    for pair in pcm.chunks_exact_mut(2) {
        let base = i16::from_le_bytes([pair[0], pair[1]]);
        let value = base.saturating_add(rng.i16(-20..=20));
        pair.copy_from_slice(&value.to_le_bytes());
    }
}

/// A microphone: sends a 20 ms frame every 20 ms — queued phrases, else silence — until
/// stopped, and remembers the fingerprint of every frame it sent.
pub struct Microphone {
    say: mpsc::UnboundedSender<(u32, u64)>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Vec<u64>>,
}

impl Microphone {
    pub fn start(session: SonicSession) -> Self {
        let (say, mut queue) = mpsc::unbounded_channel::<(u32, u64)>();
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut pending: Vec<u8> = Vec::new();
            let mut ticker = tokio::time::interval(Duration::from_millis(FRAME_MS));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = ticker.tick() => {}
                }
                while pending.len() < FRAME_BYTES {
                    match queue.try_recv() {
                        Ok((id, ms)) => pending.extend(phrase_tone(id, ms, 8000)),
                        Err(_) => break,
                    }
                }
                let mut frame: Vec<u8> = if pending.is_empty() {
                    vec![0; FRAME_BYTES]
                } else {
                    let take = pending.len().min(FRAME_BYTES);
                    let mut frame: Vec<u8> = pending.drain(..take).collect();
                    frame.resize(FRAME_BYTES, 0);
                    frame
                };
                faint_noise(sent.len() as u64, &mut frame);
                sent.push(frame_fingerprint(&frame));
                if session.send_audio(Bytes::from(frame)).await.is_err() {
                    break;
                }
            }
            sent
        });
        Self { say, stop: Some(stop), task }
    }

    /// Speaks phrase `id` for `ms` (after what is already queued).
    pub fn say(&self, id: u32, ms: u64) {
        self.say.send((id, ms)).expect("microphone running");
    }

    /// Stops; returns the fingerprints of the frames sent, in order.
    pub async fn stop(mut self) -> Vec<u64> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.expect("microphone task")
    }
}

/// Receives events until `done` says so (the matching event included); panics after
/// `limit`.
pub async fn until(
    events: &mut SonicEvents,
    limit: Duration,
    mut done: impl FnMut(&SonicEvent) -> bool,
) -> Vec<SonicEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => {
                let stop = done(&event);
                seen.push(event);
                if stop {
                    return seen;
                }
            }
            Ok(None) => panic!("the session ended early; events: {seen:#?}"),
            Err(_) => panic!("timed out; events so far: {seen:#?}"),
        }
    }
}

/// The reasons of the stream switches among `events`, in order.
pub fn restarts(events: &[SonicEvent]) -> Vec<RestartReason> {
    events
        .iter()
        .filter_map(|e| if let SonicEvent::Restarted { reason, .. } = e { Some(reason.clone()) } else { None })
        .collect()
}

/// The assistant's FINAL texts among `events`, in order.
pub fn final_replies(events: &[SonicEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            SonicEvent::Text { role: Role::Assistant, stage: Some(GenerationStage::Final), text, .. } => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

/// Total bytes of reply audio among `events`.
pub fn audio_bytes(events: &[SonicEvent]) -> usize {
    events.iter().map(|e| if let SonicEvent::Audio { pcm, .. } = e { pcm.len() } else { 0 }).sum()
}

/// Assistant/user texts among `events`, with their stage.
pub fn texts(events: &[SonicEvent]) -> Vec<(String, Option<String>, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SonicEvent::Text { role, stage, text, .. } => {
                Some((format!("{role:?}"), stage.map(|s| format!("{s:?}")), text.clone()))
            }
            _ => None,
        })
        .collect()
}
