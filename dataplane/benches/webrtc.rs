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
//! (default 2), `BENCH_WORKERS` (tokio workers of every process, default 1), `BENCH_BIN`;
//! `BENCH_PHASE_STEP_MS` (default 2: each turn's phrase is 300 ms plus 1-19 ms, so speech
//! ends anywhere in a packet, as a caller's does; `0`: always 300 ms, the phase where
//! Opus's look-ahead costs a whole packet); `BENCH_OPUS_COMPLEXITY` (a comma-separated list:
//! a gateway for each `--webrtc-opus-complexity`, their WebRTC rounds alternated in one
//! run); `BENCH_TRACE` (print when each turn's speech ended and its first reply audio came,
//! in microseconds since 1970) with `BENCH_GATEWAY_LOG=warn,switchboard_webrtc::latency=trace`
//! (the edge's own timings, on stderr): the breakdown of the latency the edge adds.
//!
//! The time to first audio is measured, both ways, from sending the frame (packet) that
//! completes the simulator's 200 ms of end-of-turn silence; for WebRTC the first reply audio
//! is the first Opus packet the client's str0m gives out; the mean is printed beside the p50
//! and p99 (with phases spread, the p50 hides the turns whose end Opus moved a packet later).

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Stack, cpu_ticks, env_or, rss_kib, voice_script};
use str0m::change::SdpAnswer;
use str0m::channel::ChannelId;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

/// One phrase as the caller's Opus packets: the phrase followed by the silence after it (Opus
/// packets carry the encoder's state: the first ones after a tone still hold its tail).
struct Phrase {
    /// The phrase's packets, then the first of the silence after it.
    packets: Vec<Vec<u8>>,
    /// How many of them are the phrase's (its last one padded with silence).
    speech: usize,
}

/// The caller's Opus packets, encoded once: a phrase for each phase (below), and a packet of
/// settled silence, sent over and over.
struct Spoken {
    phrases: Vec<Phrase>,
    silence: Vec<u8>,
}

/// Packets of silence encoded after the phrase before the encoder has settled.
const SETTLE_FRAMES: usize = 25;

/// The phrase's length: 300 ms, plus the turn's phase.
const PHRASE_MS: u64 = 300;

impl Spoken {
    /// Phrases of [`PHRASE_MS`] plus each of `phases` (ms).
    fn new(phases: &[u64]) -> Self {
        let mut silence = Vec::new();
        let phrases = phases
            .iter()
            .map(|phase| {
                let mut encoder =
                    opus::Encoder::new(16_000, opus::Channels::Mono, opus::Application::Voip).expect("an Opus encoder");
                let mut encode = |frame: &[u8]| {
                    let pcm: Vec<i16> = frame.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
                    encoder.encode_vec(&pcm, 1500).expect("encodes")
                };
                let quiet = vec![0u8; common::FRAME_BYTES];
                let mut packets: Vec<Vec<u8>> =
                    common::phrase_frames(1, PHRASE_MS + phase).iter().map(|f| encode(f)).collect();
                let speech = packets.len();
                packets.extend((0..SETTLE_FRAMES).map(|_| encode(&quiet)));
                silence = packets.pop().expect("silence");
                Phrase { packets, speech }
            })
            .collect();
        Self { phrases, silence }
    }
}

/// Where each turn's phrase ends within a 20 ms frame (`BENCH_PHASE_STEP_MS`, default 2): its
/// length is 300 ms plus 1, 3, 5, ... 19 ms (the middles of the steps), the same for both
/// transports, spread evenly over the calls' turns. Speech ends anywhere in a packet; a phrase that ends on a packet's
/// boundary (phase 0, what every turn was before) is the one case where Opus's 6.5 ms
/// look-ahead always costs a whole packet (the simulator's turn detector hears 20 ms frames:
/// `the_codec_look_ahead_moves_a_phrase_end_on_a_packet_boundary_into_the_next_packet` in
/// switchboard-webrtc). `0`: every phrase 300 ms.
fn phases() -> Vec<u64> {
    let step: u64 = env_or("BENCH_PHASE_STEP_MS", 2);
    if step == 0 { vec![0] } else { (step / 2..20).step_by(step as usize).collect() }
}

/// The phase (an index into [`phases`]) of call `call`'s turn `turn`.
fn phase_of(call: usize, turn: usize, turns: usize, phases: usize) -> usize {
    (call * turns + turn) % phases
}

/// Microseconds since 1970, for the latency trace (`BENCH_TRACE`), to set beside the
/// gateway's log lines.
fn unix_us() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros())
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
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let call_ms = round.wall.as_secs_f64() * 1000.0 * calls as f64;
    let share = 100.0 * round.gateway_ms / call_ms;
    println!(
        "{what:<12} {calls:>5} {:>7.1} {:>9.0} {:>12.3} {:>13.1} {:>10.0} {:>12.1} {:>10.1} {:>9.1} {:>9.1}",
        round.wall.as_secs_f64(),
        round.gateway_ms,
        share,
        1000.0 * round.gateway_ms / (call_ms / 20.0),
        round.runtime_ms,
        round.rss.1.saturating_sub(round.rss.0) as f64 / calls as f64,
        at(0.5),
        at(0.99),
        mean,
    );
}

/// A WebSocket voice call through the gateway: `turns` spoken turns.
async fn websocket_call(url: String, i: usize, turns: usize, silence_frames: usize) -> Vec<Duration> {
    tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
    let mut ws = common::open(&url).await;
    let mut latencies = Vec::with_capacity(turns);
    let phases = phases();
    for turn in 0..turns {
        let phase = phases[phase_of(i, turn, turns, phases.len())];
        latencies.push(common::spoken_turn_of(&mut ws, PHRASE_MS + phase, silence_frames).await.0);
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
    /// Datagrams sent.
    transmitted: u64,
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
                    self.transmitted += 1;
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
        let now = Instant::now();
        if let Err(error) = writer.write(pt, now, time, packet.to_vec()) {
            panic!("the client cannot send audio: {error}");
        }
        // str0m sends what was written once time has passed for it (its pacer's snapshot of
        // the queues is taken on a timeout): at once, as a browser sends, not at the wake-up
        // for the timeout it asks for next (a millisecond later with tokio's timers, which
        // the packet that ends the speech spent in the client).
        let _ = self.rtc.handle_input(Input::Timeout(now));
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
    let mut peer =
        Peer { rtc, socket, local, mid, channel, pt, started: false, sent: 0, transmitted: 0, buffer: vec![0; 2048] };
    // In the trace: the datagrams sent when speech ended, until the next one leaves.
    let mut sent_at_end: Option<u64> = None;

    let mut ticker = tokio::time::interval(common::FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut latencies = Vec::with_capacity(turns);
    let trace = std::env::var_os("BENCH_TRACE").is_some();
    let phrase_of = |turn: usize| &spoken.phrases[phase_of(i, turn, turns, spoken.phrases.len())];
    let mut phrase = phrase_of(0);
    // Whether the first reply audio was released by a datagram's arrival (or by a timeout:
    // held back by the client's str0m).
    let mut by_datagram = false;
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
        if let Some(before) = sent_at_end
            && peer.transmitted > before
        {
            println!("trace {} call {i} turn {} datagram sent after the end of speech", unix_us(), latencies.len());
            sent_at_end = None;
        }
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
                    } else if text.contains("\"bidi_response_complete\"") && frame > phrase.speech {
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
                    if first_audio.is_none() && frame > phrase.speech {
                        first_audio = Some(last_audio);
                        if trace {
                            let via = if by_datagram { "a datagram" } else { "a timeout" };
                            println!(
                                "trace {} call {i} turn {} first reply audio (released by {via})",
                                unix_us(),
                                latencies.len()
                            );
                        }
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
            phrase = phrase_of(latencies.len().min(turns - 1));
            continue;
        }
        let wait = tokio::time::Instant::from_std(timeout.max(Instant::now()));
        tokio::select! {
            received = peer.socket.recv_from(&mut peer.buffer) => {
                let Ok((n, source)) = received else { continue };
                let Ok(contents) = peer.buffer[..n].try_into() else { continue };
                let input = Input::Receive(Instant::now(), Receive { proto: Protocol::Udp, source, destination: peer.local, contents });
                let _ = peer.rtc.handle_input(input);
                by_datagram = true;
            }
            () = tokio::time::sleep_until(wait) => {
                let _ = peer.rtc.handle_input(Input::Timeout(Instant::now()));
                by_datagram = false;
            }
            _ = ticker.tick() => {
                if peer.started {
                    let packet = phrase.packets.get(frame).unwrap_or(&spoken.silence).clone();
                    peer.send_packet(&packet);
                    frame += 1;
                    if frame == phrase.speech + silence_frames {
                        end_of_speech = Some(Instant::now());
                        if trace {
                            println!("trace {} call {i} turn {} end of speech (packet {frame} sent)", unix_us(), latencies.len());
                            sent_at_end = Some(peer.transmitted);
                        }
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
    // BENCH_OPUS_COMPLEXITY: a gateway for each (`--webrtc-opus-complexity`), their WebRTC
    // rounds alternated after each WebSocket round (on the first); unset: one gateway at its
    // default (and a BENCH_BIN from before the flag).
    let complexities: Vec<Option<String>> = match std::env::var("BENCH_OPUS_COMPLEXITY") {
        Ok(list) => list.split(',').map(|c| Some(c.trim().to_owned())).collect(),
        Err(_) => vec![None],
    };
    let mut gateways = Vec::new();
    for complexity in &complexities {
        let mut more = vec!["--webrtc-udp", "127.0.0.1:0", "--webrtc-max-calls", "4096"];
        if let Some(complexity) = complexity {
            more.extend(["--webrtc-opus-complexity", complexity.as_str()]);
        }
        let (url, pid) = stack.add_gateway_with(&[("idv", &idv)], calls * 4, &more).await;
        let address: SocketAddr = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .and_then(|a| a.parse().ok())
            .expect("the gateway's address");
        let label = complexity.as_ref().map_or_else(|| "webrtc".to_owned(), |c| format!("webrtc c{c}"));
        gateways.push((url, pid, address, label));
    }
    let phases = phases();
    let spoken = Arc::new(Spoken::new(&phases));
    // One call each way first: what the processes allocate once is not counted.
    for (url, _, address, _) in &gateways {
        websocket_call(url.clone(), 0, 1, silence_frames).await;
        webrtc_call(*address, 0, 1, silence_frames, spoken.clone()).await;
    }
    println!(
        "gateway pid(s) {:?}, runtime idv pid {}, simulator pid {}; {} worker thread(s) each; load {}",
        gateways.iter().map(|g| g.1).collect::<Vec<_>>(),
        stack.runtime_pid,
        stack.sim_pid,
        common::workers(),
        common::load_average()
    );
    println!(
        "{calls} calls at once x {turns} spoken turns ({PHRASE_MS} ms phrase + a phase of {phases:?} ms, 200 ms silence, 280 ms reply), {rounds} alternated rounds"
    );
    println!(
        "{:<12} {:>5} {:>7} {:>9} {:>12} {:>13} {:>10} {:>12} {:>10} {:>9} {:>9}",
        "path",
        "calls",
        "wall s",
        "gw CPU ms",
        "gw % core/call",
        "gw us/20ms",
        "rt CPU ms",
        "gw KiB/call",
        "p50 ms",
        "p99 ms",
        "mean ms"
    );
    for _ in 0..rounds {
        let (url, pid, ..) = &gateways[0];
        let url = url.clone();
        let mut ws =
            round(calls, *pid, stack.runtime_pid, |i| websocket_call(url.clone(), i, turns, silence_frames)).await;
        report("websocket", calls, &mut ws);
        for (_, pid, address, label) in &gateways {
            let (spoken, address) = (spoken.clone(), *address);
            let mut rtc = round(calls, *pid, stack.runtime_pid, |i| {
                webrtc_call(address, i, turns, silence_frames, spoken.clone())
            })
            .await;
            report(label, calls, &mut rtc);
        }
    }
    println!("load {}", common::load_average());
    drop(stack);
}
