//! Helpers: local mode on the banking example with a simulator script that adds Nova
//! Sonic phrases, a real WebSocket client with a real-time microphone (20 ms PCM16
//! frames, as binary frames or base64 JSON), and reading protocol messages.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_local::{self as local, LocalOptions};
use switchboard_runtime::ServerConfig;
use switchboard_sim::sonic::{frame_fingerprint, phrase_tone};
use switchboard_sim::{BANKING_SCRIPT_YAML, SimHandle};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

// What the tests read off the messages (in a file of its own; next to this one for every
// test binary that includes this file by path).
#[path = "reading.rs"]
mod reading;
pub use reading::*;

/// Upper bound for waiting on one expected message: a guard against hangs, not a timing
/// assertion.
pub const PATIENCE: Duration = Duration::from_secs(30);
/// One frame: 20 ms of 16 kHz PCM16 mono.
pub const FRAME_BYTES: usize = 640;

/// Voice rules first (the banking rules that read the system prompt cannot apply to a
/// voice stream, whose prompt is fixed when it opens) — after the bundled rules that write
/// a long conversation's summary —, then the bundled banking rules.
const VOICE_RULES: &str = r#"
  - name: voice-story
    when: { userText: "(?i)story" }
    reply: { text: "Once upon a time there was a bank that never closed, and every customer who called was greeted by a patient voice that always had time for one more question about their account." }
  - name: voice-stop
    when: { userText: "(?i)^stop$" }
    reply: { text: "Sure." }
  - name: voice-hours
    when: { userText: "(?i)opening hours" }
    reply: { text: "We are open from nine to five." }
  - name: voice-balance-handoff
    when: { userText: "(?i)^my balance please$", tools: [transfer_to_banking] }
    reply:
      text: "I'll pass you to our banking team."
      toolUse: { name: transfer_to_banking, input: { reason: "balance" } }
"#;

/// Phrase ids the microphone can say.
pub const BALANCE_REQUEST: u32 = 1;
pub const IDV_DETAILS: u32 = 2;
pub const MY_BALANCE: u32 = 3;
pub const STORY: u32 = 4;
pub const STOP: u32 = 5;
pub const HOURS: u32 = 6;

/// The banking script with the voice rules and a `sonic:` section; `extra` is more YAML
/// for the `sonic:` section (indented two spaces), `top` more top-level YAML.
pub fn script(extra: &str, top: &str) -> String {
    let rules =
        BANKING_SCRIPT_YAML.replacen("\n  - name: greeting\n", &format!("{VOICE_RULES}\n  - name: greeting\n"), 1);
    format!(
        r#"{rules}
{top}
sonic:
  turnDetection: {{ silenceMs: {{ high: 300, medium: 300, low: 300 }} }}
  phrases:
    1: "I'd like to check my balance"
    2: "My name is Ada Lovelace, account 12345678, sort code 12-34-56"
    3: "My balance please"
    4: "Tell me a story"
    5: "Stop"
    6: "What are your opening hours?"
  speech: {{ msPerChar: 4, chunkMs: 40, responseDelayMs: 50 }}
  recordFrames: true
{extra}
"#
    )
}

/// A running local mode and how to stop it.
pub struct Running {
    pub addr: SocketAddr,
    pub sim: SimHandle,
    stop: Option<oneshot::Sender<()>>,
    _keep: Vec<Box<dyn std::any::Any + Send>>,
    _script: tempfile_path::TempPath,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Running {
    pub fn url(&self) -> String {
        format!("ws://{}/v1/session", self.addr)
    }
}

mod tempfile_path {
    /// A file removed when dropped.
    pub struct TempPath(pub std::path::PathBuf);
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Local mode on examples/banking with the simulator running `yaml`.
pub async fn banking(yaml: &str) -> Running {
    banking_with(yaml, ServerConfig::default()).await
}

/// [`banking`] with `server`'s settings.
pub async fn banking_with(yaml: &str, server: ServerConfig) -> Running {
    banking_copy(yaml, |_| {}, server, None, None).await
}

/// Triage in `copy` (a copy of the example) set to `speakFirst: speak_first`.
fn triage_speaks_first(copy: &std::path::Path, speak_first: bool) {
    let triage = copy.join("triage.yaml");
    let text = std::fs::read_to_string(&triage).expect("reads triage.yaml");
    let (head, rest) = text.split_once("\n  speakFirst: ").expect("the Example Bank's triage Persona sets speakFirst");
    let tail = rest.split_once('\n').map_or("", |(_, tail)| tail);
    std::fs::write(&triage, format!("{head}\n  speakFirst: {speak_first}\n{tail}")).expect("writes triage.yaml");
}

/// [`banking`] with triage's Persona set to `speakFirst: speak_first` (a copy of the
/// example, removed with the returned [`Running`]).
pub async fn banking_speaking_first(yaml: &str, speak_first: bool) -> Running {
    banking_edited(yaml, |copy| triage_speaks_first(copy, speak_first)).await
}

/// [`banking`] on a copy of the example that `edit` changed first (removed with the
/// returned [`Running`]).
pub async fn banking_edited(yaml: &str, edit: impl FnOnce(&std::path::Path)) -> Running {
    banking_edited_with(yaml, edit, ServerConfig::default()).await
}

/// [`banking_edited`] with `server`'s settings.
pub async fn banking_edited_with(yaml: &str, edit: impl FnOnce(&std::path::Path), server: ServerConfig) -> Running {
    banking_copy(yaml, edit, server, None, None).await
}

/// [`banking_edited`] writing the sessions' transcripts into `transcripts` and keeping the
/// gateway's record with `record` (local mode serves it at `/v1/sessions` on loopback).
pub async fn banking_edited_recorded(
    yaml: &str,
    edit: impl FnOnce(&std::path::Path),
    transcripts: PathBuf,
    record: std::sync::Arc<switchboard_record::Recorder>,
) -> Running {
    banking_copy(yaml, edit, ServerConfig::default(), Some(transcripts), Some(record)).await
}

async fn banking_copy(
    yaml: &str,
    edit: impl FnOnce(&std::path::Path),
    server: ServerConfig,
    transcripts: Option<PathBuf>,
    record: Option<std::sync::Arc<switchboard_record::Recorder>>,
) -> Running {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let copy = std::env::temp_dir().join(format!("switchboard-voice-banking-{}", uuid::Uuid::new_v4()));
    copy_dir(&example, &copy);
    // The example's triage speaks first (a phone caller hears its greeting); these tests were
    // written for a triage that listens first, so their copy does unless a test's `edit`
    // says otherwise ([`banking_speaking_first`]; `speak_first.rs` tests the greeting).
    triage_speaks_first(&copy, false);
    edit(&copy);
    let mut running = local_mode(&copy, yaml, server, transcripts, record).await;
    running._keep.push(Box::new(TempDir(copy)));
    running
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("creates the copy");
    for entry in std::fs::read_dir(from).expect("reads the example") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copies a file");
        }
    }
}

/// Local mode on the agent definitions in `dir` with the simulator running `yaml`
/// (writing transcripts into `transcripts` and keeping the record with `record` when given).
async fn local_mode(
    dir: &std::path::Path,
    yaml: &str,
    server: ServerConfig,
    transcripts: Option<PathBuf>,
    record: Option<std::sync::Arc<switchboard_record::Recorder>>,
) -> Running {
    let path = std::env::temp_dir().join(format!("switchboard-voice-test-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&path, yaml).expect("writes the script");
    let options = LocalOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        bedrock: false,
        sim_script: Some(path.clone()),
        transcripts,
        server,
        ca_file: None,
        gateway_key: None,
        capacity: Default::default(),
        ..LocalOptions::default()
    };
    let mut local = local::start_recording(dir, options, record).await.expect("local mode starts");
    let addr = local.server.local_addr().expect("bound");
    let sim = local.sim.take().expect("the simulator runs");
    let (tx, rx) = oneshot::channel::<()>();
    let server = local.server;
    tokio::spawn(async move {
        let _ = server
            .run(async move {
                let _ = rx.await;
            })
            .await;
    });
    let keep: Vec<Box<dyn std::any::Any + Send>> = vec![Box::new(local.demo_tools)];
    Running { addr, sim, stop: Some(tx), _keep: keep, _script: tempfile_path::TempPath(path) }
}

/// How the microphone sends audio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Raw PCM in binary frames.
    Binary,
    /// Base64 in `bidi_audio_input` JSON.
    Json,
}

enum Outgoing {
    Say(u32, u64),
    /// PCM16 16 kHz audio to say as it is (a recording).
    Play(Vec<u8>),
    /// Push-to-talk released: once what is queued was said, `bidi_audio_input_end` and no
    /// more audio until the next `Say`.
    Release,
    Raw(Message),
    Encoding(Encoding),
    /// The connection drops: no close frame, the socket just goes.
    Vanish,
}

/// A client: a writer task that is also a real-time microphone, and the read side.
pub struct Call {
    out: mpsc::UnboundedSender<Outgoing>,
    stop: Option<oneshot::Sender<()>>,
    mic: tokio::task::JoinHandle<Vec<u64>>,
    read: futures_util::stream::SplitStream<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    >,
    pub seen: Vec<ServerMessage>,
}

/// Faint deterministic noise (far below the speech threshold) so every frame is unique.
fn faint_noise(frame: u64, pcm: &mut [u8]) {
    let mut rng = fastrand::Rng::with_seed(frame);
    for pair in pcm.chunks_exact_mut(2) {
        let value = i16::from_le_bytes([pair[0], pair[1]]).saturating_add(rng.i16(-20..=20));
        pair.copy_from_slice(&value.to_le_bytes());
    }
}

impl Call {
    /// Connects, starts a session with `agent` and `modalities`, and starts the microphone.
    pub async fn start(url: &str, agent: &str, modalities: &[&str], encoding: Encoding) -> Self {
        Self::start_with_voice(url, agent, modalities, encoding, None).await
    }

    /// [`Call::start`], asking for `voice`.
    pub async fn start_with_voice(
        url: &str,
        agent: &str,
        modalities: &[&str],
        encoding: Encoding,
        voice: Option<&str>,
    ) -> Self {
        let start = SessionStart {
            agent: Some(agent.to_owned()),
            modalities: modalities.iter().map(|m| (*m).to_owned()).collect(),
            voice: voice.map(str::to_owned),
            ..SessionStart::default()
        };
        Self::open(url, start, encoding).await
    }

    /// Resumes a session with `token`, the last message received being number `last_seq`,
    /// and starts the microphone.
    #[allow(dead_code)] // the gateway's resume tests
    pub async fn resume(url: &str, token: &str, last_seq: u64, encoding: Encoding) -> Self {
        let start =
            SessionStart { resume_token: Some(token.to_owned()), last_seq: Some(last_seq), ..SessionStart::default() };
        Self::open(url, start, encoding).await
    }

    async fn open(url: &str, start: SessionStart, encoding: Encoding) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("websocket connects");
        let (mut sink, read) = ws.split();
        let start = ClientMessage::SessionStart(start);
        sink.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
        let (out, mut queue) = mpsc::unbounded_channel::<Outgoing>();
        let (stop, mut stopped) = oneshot::channel();
        let mic = tokio::spawn(async move {
            let mut encoding = encoding;
            let mut sent = Vec::new();
            let mut pending: Vec<u8> = Vec::new();
            let (mut releasing, mut released) = (false, false);
            let mut ticker = tokio::time::interval(Duration::from_millis(20));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = ticker.tick() => {}
                }
                while let Ok(outgoing) = queue.try_recv() {
                    match outgoing {
                        Outgoing::Say(id, ms) => {
                            pending.extend(phrase_tone(id, ms, 8000));
                            released = false;
                        }
                        Outgoing::Play(pcm) => {
                            pending.extend(pcm);
                            released = false;
                        }
                        Outgoing::Release => releasing = true,
                        Outgoing::Raw(message) => {
                            if sink.send(message).await.is_err() {
                                return sent;
                            }
                        }
                        Outgoing::Encoding(e) => encoding = e,
                        Outgoing::Vanish => return sent,
                    }
                }
                if releasing && pending.is_empty() {
                    releasing = false;
                    released = true;
                    let end = serde_json::to_string(&ClientMessage::BidiAudioInputEnd {}).expect("json");
                    if sink.send(Message::text(end)).await.is_err() {
                        break;
                    }
                }
                if released {
                    continue;
                }
                let take = pending.len().min(FRAME_BYTES);
                let mut frame: Vec<u8> = pending.drain(..take).collect();
                frame.resize(FRAME_BYTES, 0);
                faint_noise(sent.len() as u64, &mut frame);
                sent.push(frame_fingerprint(&frame));
                let message = match encoding {
                    Encoding::Binary => Message::binary(frame),
                    Encoding::Json => {
                        let audio = aws_smithy_types::base64::encode(&frame);
                        Message::text(serde_json::to_string(&ClientMessage::BidiAudioInput { audio }).expect("json"))
                    }
                };
                if sink.send(message).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
            sent
        });
        Self { out, stop: Some(stop), mic, read, seen: Vec::new() }
    }

    /// Speaks phrase `id` for `ms` (after what is already queued).
    pub fn say(&self, id: u32, ms: u64) {
        let _ = self.out.send(Outgoing::Say(id, ms));
    }

    /// Plays `pcm` (PCM16 16 kHz, e.g. a WAV file's audio) into the microphone, in real
    /// time, after what is already queued.
    #[allow(dead_code)] // the gateway's noise test
    pub fn play(&self, pcm: &[u8]) {
        let _ = self.out.send(Outgoing::Play(pcm.to_vec()));
    }

    /// Push-to-talk: releases the button once what is queued was said (the microphone then
    /// sends `bidi_audio_input_end` and no audio until the next [`Call::say`]).
    pub fn release(&self) {
        let _ = self.out.send(Outgoing::Release);
    }

    /// Sends a protocol message (between audio frames).
    pub fn send(&self, message: &ClientMessage) {
        let _ = self.out.send(Outgoing::Raw(Message::text(serde_json::to_string(message).expect("json"))));
    }

    /// Sends a raw WebSocket frame (between audio frames).
    pub fn send_raw(&self, message: Message) {
        let _ = self.out.send(Outgoing::Raw(message));
    }

    /// Switches the microphone's encoding.
    pub fn encoding(&self, encoding: Encoding) {
        let _ = self.out.send(Outgoing::Encoding(encoding));
    }

    /// Stops the microphone (and the connection); returns the fingerprints of the
    /// frames it sent, in order.
    pub async fn hang_up(mut self) -> Vec<u64> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.mic).await.expect("microphone task")
    }

    /// Drops the connection without a goodbye (no close frame), as a lost network does.
    #[allow(dead_code)] // the gateway's resume tests
    pub async fn vanish(mut self) {
        let _ = self.out.send(Outgoing::Vanish);
        let _ = (&mut self.mic).await;
        self.stop.take();
    }

    /// Reads (into `seen`) whatever comes until `deadline`: a message repeated or late shows
    /// up in it.
    pub async fn read_until(&mut self, deadline: tokio::time::Instant) {
        while tokio::time::Instant::now() < deadline {
            let _ = tokio::time::timeout_at(deadline, self.next()).await;
        }
    }

    /// The next protocol message; panics on the end of the connection.
    pub async fn next(&mut self) -> ServerMessage {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.read.next())
                .await
                .unwrap_or_else(|_| panic!("no message in time; seen {:#?}", summary(&self.seen)));
            match frame {
                Some(Ok(Message::Text(text))) => {
                    let message: ServerMessage = serde_json::from_str(text.as_str()).expect("protocol JSON");
                    self.seen.push(message.clone());
                    return message;
                }
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}; seen {:#?}", summary(&self.seen)),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}; seen {:#?}", summary(&self.seen)),
            }
        }
    }

    /// Reads until `pred` holds; returns what was read (the match last).
    pub async fn until(&mut self, pred: impl Fn(&ServerMessage) -> bool) -> Vec<ServerMessage> {
        let mut got = Vec::new();
        loop {
            let message = self.next().await;
            let done = pred(&message);
            got.push(message);
            if done {
                return got;
            }
        }
    }

    /// Reads until the server closes; returns the close code and reason.
    pub async fn closed(&mut self) -> (u16, String) {
        loop {
            match tokio::time::timeout(PATIENCE, self.read.next()).await.expect("the server closes in time") {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(message) = serde_json::from_str::<ServerMessage>(text.as_str()) {
                        self.seen.push(message);
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    return frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
                }
                Some(Ok(_)) => continue,
                _ => return (1006, String::new()),
            }
        }
    }
}
