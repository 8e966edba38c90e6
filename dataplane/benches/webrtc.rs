//! The WebRTC edge's CPU and memory per live call, beside a WebSocket call through the same
//! gateway in the same run (issue 47).
//!
//! Real release binaries as child processes — `switchboard sim`, `switchboard runtime` (the
//! `idv` voice agent) and `switchboard gateway --webrtc-udp 127.0.0.1:0` — and the clients
//! here. Rounds alternate, `BENCH_ROUNDS` pairs:
//!
//! - **WebSocket**: `BENCH_CALLS` voice sessions on `/v1/session`, each `BENCH_TURNS`
//!   spoken turns (a 300 ms phrase, then silence in real time until the reply is complete:
//!   20 ms PCM16 16 kHz frames up, the agent's audio down), as `gateway`'s part 4;
//! - **WebRTC**: as many calls on `POST /v1/webrtc`, each a full-ICE `str0m` peer on its own
//!   UDP socket with an Opus track each way and the session on its data channel, the same
//!   turns spoken as Opus packets every 20 ms (encoded once, before the rounds: the clients
//!   spend no codec time), the reply's Opus packets counted as they arrive.
//!
//! Each round prints the gateway's CPU (user + system, from /proc) as a share of a core per
//! live call — the gateway's CPU over the round divided by its wall time and by the calls —
//! and per 20 ms of a call, the runtime's beside it, the gateway's RSS growth per call at
//! the round's peak, and the time from the end of speech to the first reply audio (for
//! WebRTC: the first Opus packet received). WebRTC minus WebSocket is what the edge adds:
//! Opus decode to 16 kHz (with its jitter buffer) of the caller, Opus encode from 24 kHz and
//! real-time pacing of the reply, SRTP both ways, SCTP for the data channel, DTLS set-up.
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench webrtc
//! ```
//!
//! Environment: `BENCH_CALLS` (default 50), `BENCH_TURNS` (default 5), `BENCH_ROUNDS`
//! (default 2), `BENCH_WORKERS` (tokio workers of every process, default 1), `BENCH_BIN`.

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Stack, cpu_ticks, env_or, rss_kib};
use str0m::change::SdpAnswer;
use str0m::channel::ChannelId;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

/// The caller's Opus packets, encoded once: the phrase followed by the silence after it (Opus
/// packets carry the encoder's state: the first ones after a tone still hold its tail), and
/// a packet of settled silence, sent over and over.
struct Spoken {
    /// The phrase's packets, then the first of the silence after it.
    phrase: Vec<Vec<u8>>,
    /// How many of them are the phrase's.
    speech: usize,
    silence: Vec<u8>,
}

/// Packets of silence encoded after the phrase before the encoder has settled.
const SETTLE_FRAMES: usize = 25;

impl Spoken {
    fn new() -> Self {
        let mut encoder =
            opus::Encoder::new(16_000, opus::Channels::Mono, opus::Application::Voip).expect("an Opus encoder");
        let mut encode = |frame: &[u8]| {
            let pcm: Vec<i16> = frame.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
            encoder.encode_vec(&pcm, 1500).expect("encodes")
        };
        let quiet = vec![0u8; common::FRAME_BYTES];
        let mut phrase: Vec<Vec<u8>> = common::phrase_frames(1, 300).iter().map(|f| encode(f)).collect();
        let speech = phrase.len();
        phrase.extend((0..SETTLE_FRAMES).map(|_| encode(&quiet)));
        let silence = phrase.pop().expect("silence");
        Self { phrase, speech, silence }
    }
}

/// What a round measured.
struct Round {
    /// End of speech to first reply audio, per turn.
    latencies: Vec<Duration>,
    wall: Duration,
    gateway_ms: f64,
    runtime_ms: f64,
    /// The gateway's RSS before the round and at its peak (KiB).
    rss: (u64, u64),
}

/// Runs `calls` at once (each made by `call`), sampling the gateway's RSS meanwhile.
async fn round<F>(calls: usize, gateway_pid: u32, runtime_pid: u32, call: impl Fn(usize) -> F) -> Round
where
    F: std::future::Future<Output = Vec<Duration>> + Send + 'static,
{
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kib(gateway_pid);
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(gateway_pid));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak
        })
    };
    let (gateway_cpu, runtime_cpu) = (cpu_ticks(gateway_pid), cpu_ticks(runtime_pid));
    let started = Instant::now();
    let tasks: Vec<_> = (0..calls).map(|i| tokio::spawn(call(i))).collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a call"));
    }
    let wall = started.elapsed();
    let gateway_ms = (cpu_ticks(gateway_pid) - gateway_cpu) as f64 * 10.0;
    let runtime_ms = (cpu_ticks(runtime_pid) - runtime_cpu) as f64 * 10.0;
    sampling.store(false, Ordering::Relaxed);
    let peak = sampler.await.expect("the sampler");
    Round { latencies, wall, gateway_ms, runtime_ms, rss: (before, peak) }
}

fn report(what: &str, calls: usize, round: &mut Round) {
    round.latencies.sort();
    let ms: Vec<f64> = round.latencies.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    let at = |q: f64| common::percentile(&ms, q);
    let call_ms = round.wall.as_secs_f64() * 1000.0 * calls as f64;
    let share = 100.0 * round.gateway_ms / call_ms;
    println!(
        "{what:<10} {calls:>5} {:>7.1} {:>9.0} {:>12.3} {:>13.1} {:>10.0} {:>12.1} {:>10.1} {:>9.1}",
        round.wall.as_secs_f64(),
        round.gateway_ms,
        share,
        1000.0 * round.gateway_ms / (call_ms / 20.0),
        round.runtime_ms,
        round.rss.1.saturating_sub(round.rss.0) as f64 / calls as f64,
        at(0.5),
        at(0.99),
    );
}

/// A WebSocket voice call through the gateway: `turns` spoken turns.
async fn websocket_call(url: String, i: usize, turns: usize, silence_frames: usize) -> Vec<Duration> {
    tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
    let mut ws = common::open(&url).await;
    let mut latencies = Vec::with_capacity(turns);
    for _ in 0..turns {
        latencies.push(common::spoken_turn(&mut ws, silence_frames).await.0);
    }
    let _ = futures_util::SinkExt::close(&mut ws).await;
    latencies
}

/// An HTTP/1.1 request to the gateway: (status, Location, body).
async fn http(gateway: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Option<String>, String) {
    let mut stream = tokio::net::TcpStream::connect(gateway).await.expect("connects to the gateway");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {gateway}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let location = head.lines().find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("location")).map(|(_, v)| v.trim().to_owned())
    });
    (status, location, body.to_owned())
}

/// One WebRTC call's client: a full-ICE str0m peer on its own UDP socket.
struct Peer {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    mid: Mid,
    channel: ChannelId,
    pt: Option<Pt>,
    started: bool,
    /// Opus packets sent (for their RTP time).
    sent: u64,
    buffer: Vec<u8>,
}

impl Peer {
    /// Sends what str0m has to send; returns its events and when it wants time next.
    fn poll(&mut self) -> (Vec<Event>, Instant) {
        let mut events = Vec::new();
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(at)) => return (events, at),
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.try_send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(event)) => events.push(event),
                Err(error) => panic!("the client's str0m failed: {error}"),
            }
        }
    }

    fn send_packet(&mut self, packet: &[u8]) {
        let (Some(pt), Some(writer)) = (self.pt, self.rtc.writer(self.mid)) else { return };
        let time = MediaTime::new(self.sent * 960, Frequency::FORTY_EIGHT_KHZ);
        self.sent += 1;
        if let Err(error) = writer.write(pt, Instant::now(), time, packet.to_vec()) {
            panic!("the client cannot send audio: {error}");
        }
    }
}

/// A WebRTC call to the gateway: `turns` spoken turns as Opus, the session on the data
/// channel; DELETE at the end.
async fn webrtc_call(
    gateway: SocketAddr,
    i: usize,
    turns: usize,
    silence_frames: usize,
    spoken: Arc<Spoken>,
) -> Vec<Duration> {
    tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
    let local = socket.local_addr().expect("addr");
    // As a browser's jitter buffer plays on past a lost packet, the client's str0m gives up on
    // one after 60 ms (as the edge's does): by default it holds what follows a lost packet
    // until 15 more came, and a reply of 14 packets after a loss was never heard.
    let mut rtc = Rtc::builder()
        .set_reordering_size_audio(3)
        .set_reordering_timeout_audio(Some(Duration::from_millis(60)))
        .build(Instant::now());
    rtc.add_local_candidate(Candidate::host(local, "udp").expect("a candidate"));
    let mut change = rtc.sdp_api();
    let mid = change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    let channel = change.add_channel("session".into());
    let (offer, pending) = change.apply().expect("an offer");
    let (status, location, answer) = http(gateway, "POST", "/v1/webrtc", &offer.to_sdp_string()).await;
    assert_eq!(status, 201, "the offer was not answered: {answer}");
    let answer = SdpAnswer::from_sdp_string(&answer).expect("an SDP answer");
    rtc.sdp_api().accept_answer(pending, answer).expect("takes the answer");
    let pt = rtc.writer(mid).and_then(|w| w.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()));
    let mut peer = Peer { rtc, socket, local, mid, channel, pt, started: false, sent: 0, buffer: vec![0; 2048] };

    let mut ticker = tokio::time::interval(common::FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut latencies = Vec::with_capacity(turns);
    let (mut frame, mut end_of_speech, mut first_audio) = (0usize, None::<Instant>, None::<Instant>);
    let (mut complete, mut last_audio) = (false, Instant::now());
    let deadline = Instant::now() + Duration::from_secs(120);
    let begun = Instant::now();
    let mut seen: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut note = |what: String| {
        if seen.len() == 40 {
            seen.pop_front();
        }
        seen.push_back(format!("{:.3} {what}", begun.elapsed().as_secs_f64()));
    };
    let mut media = 0u64;
    while latencies.len() < turns {
        assert!(
            Instant::now() < deadline,
            "call {i}: {} of {turns} turns in 120 s; frame {frame}, complete {complete}, first audio {first_audio:?}, last audio {:?} ago, media {media}, state {:?}\n{}",
            latencies.len(),
            last_audio.elapsed(),
            peer.rtc.is_connected(),
            seen.iter().cloned().collect::<Vec<_>>().join("\n")
        );
        let (events, timeout) = peer.poll();
        for event in events {
            match &event {
                Event::MediaData(_) => media += 1,
                Event::ChannelData(data) => note(format!(
                    "frame {frame} media {media}: {}",
                    String::from_utf8_lossy(&data.data).chars().take(90).collect::<String>()
                )),
                other => note(format!("frame {frame}: {other:?}").chars().take(120).collect()),
            }
            match event {
                Event::ChannelOpen(..) => {
                    let start = br#"{"type":"session_start","modalities":["audio"]}"#;
                    let mut channel = peer.rtc.channel(peer.channel).expect("the channel");
                    channel.write(false, start).expect("sends session_start");
                }
                Event::ChannelData(data) => {
                    let text = String::from_utf8_lossy(&data.data);
                    if text.contains("\"bidi_connection_start\"") {
                        peer.started = true;
                    } else if text.contains("\"bidi_response_complete\"") && frame > spoken.speech {
                        complete = true;
                    } else if text.contains("\"bidi_error\"") {
                        panic!("call {i} failed: {text}");
                    }
                }
                Event::Closed => panic!(
                    "call {i}: the call was closed at turn {} of {turns}\n{}",
                    latencies.len() + 1,
                    seen.iter().cloned().collect::<Vec<_>>().join("\n")
                ),
                Event::MediaData(_) => {
                    last_audio = Instant::now();
                    // The reply may begin before the client's last frame of silence left
                    // (the runtime's clock is not the client's): then it counts as 0.
                    if first_audio.is_none() && frame > spoken.speech {
                        first_audio = Some(last_audio);
                    }
                }
                _ => {}
            }
        }
        // The turn is over once its reply is complete, its audio began and has stopped
        // coming (paced in real time, it ends after the data channel's message; they come by two
        // ways: the data channel, the track).
        if complete
            && last_audio.elapsed() > Duration::from_millis(100)
            && let Some(first) = first_audio
        {
            latencies.push(first.saturating_duration_since(end_of_speech.unwrap_or(first)));
            (frame, end_of_speech, first_audio, complete) = (0, None, None, false);
            continue;
        }
        let wait = tokio::time::Instant::from_std(timeout.max(Instant::now()));
        tokio::select! {
            received = peer.socket.recv_from(&mut peer.buffer) => {
                let Ok((n, source)) = received else { continue };
                let Ok(contents) = peer.buffer[..n].try_into() else { continue };
                let input = Input::Receive(Instant::now(), Receive { proto: Protocol::Udp, source, destination: peer.local, contents });
                let _ = peer.rtc.handle_input(input);
            }
            () = tokio::time::sleep_until(wait) => {
                let _ = peer.rtc.handle_input(Input::Timeout(Instant::now()));
            }
            _ = ticker.tick() => {
                if peer.started {
                    let packet = spoken.phrase.get(frame).unwrap_or(&spoken.silence).clone();
                    peer.send_packet(&packet);
                    frame += 1;
                    if frame == spoken.speech + silence_frames {
                        end_of_speech = Some(Instant::now());
                    }
                }
            }
        }
    }
    if let Some(location) = location {
        let (status, _, body) = http(gateway, "DELETE", &location, "").await;
        assert_eq!(status, 200, "DELETE: {body}");
    }
    latencies
}

/// The simulator's script: as `gateway`'s voice parts (a 300 ms phrase, 200 ms of silence
/// ends the turn, a reply of 28 characters at 10 ms each).
fn voice_script(silence_ms: usize) -> String {
    format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: {silence_ms}, medium: {silence_ms}, low: {silence_ms} }} }}
  phrases: {{ 1: "hello" }}
  speech: {{ msPerChar: 10, chunkMs: 20, responseDelayMs: 0 }}
default: {{ text: "Hello there, how can I help?" }}
"#
    )
}

fn main() {
    tokio::runtime::Runtime::new().expect("a tokio runtime").block_on(bench());
}

async fn bench() {
    let calls: usize = env_or("BENCH_CALLS", 50);
    let turns: usize = env_or("BENCH_TURNS", 5);
    let rounds: usize = env_or("BENCH_ROUNDS", 2);
    let silence_ms = 200;
    let silence_frames = silence_ms / 20;
    let mut stack = Stack::start(&voice_script(silence_ms), "idv", (calls * 2 + 10) as u32).await;
    let idv = stack.addr.clone();
    let more = ["--webrtc-udp", "127.0.0.1:0", "--webrtc-max-calls", "4096"];
    let (url, gateway_pid) = stack.add_gateway_with(&[("idv", &idv)], calls * 4, &more).await;
    let gateway: SocketAddr =
        url.trim_start_matches("ws://").split('/').next().and_then(|a| a.parse().ok()).expect("the gateway's address");
    let spoken = Arc::new(Spoken::new());
    // One call each way first: what the processes allocate once is not counted.
    websocket_call(url.clone(), 0, 1, silence_frames).await;
    webrtc_call(gateway, 0, 1, silence_frames, spoken.clone()).await;
    println!(
        "gateway pid {gateway_pid}, runtime idv pid {}, simulator pid {}; {} worker thread(s) each; load {}",
        stack.runtime_pid,
        stack.sim_pid,
        common::workers(),
        common::load_average()
    );
    println!(
        "{calls} calls at once x {turns} spoken turns (300 ms phrase, 200 ms silence, 280 ms reply), {rounds} alternated pairs"
    );
    println!(
        "{:<10} {:>5} {:>7} {:>9} {:>12} {:>13} {:>10} {:>12} {:>10} {:>9}",
        "path",
        "calls",
        "wall s",
        "gw CPU ms",
        "gw % core/call",
        "gw us/20ms",
        "rt CPU ms",
        "gw KiB/call",
        "p50 ms",
        "p99 ms"
    );
    for _ in 0..rounds {
        let url = url.clone();
        let mut ws =
            round(calls, gateway_pid, stack.runtime_pid, |i| websocket_call(url.clone(), i, turns, silence_frames))
                .await;
        report("websocket", calls, &mut ws);
        let spoken = spoken.clone();
        let mut rtc = round(calls, gateway_pid, stack.runtime_pid, |i| {
            webrtc_call(gateway, i, turns, silence_frames, spoken.clone())
        })
        .await;
        report("webrtc", calls, &mut rtc);
    }
    println!("load {}", common::load_average());
    drop(stack);
}
