//! A burst of loss on the caller's way (the `webrtc` benchmark's unexplained stall: after a
//! hundred or so packets were lost at once, a runtime no longer heard its caller). A str0m
//! client (full ICE, an Opus track and the session's data channel, as the benchmark's) calls
//! local mode; it speaks the balance request and triage hands it to idv, which asks for the
//! caller's details; then RTP packets in a row of what the client sends are lost (its
//! sequence numbers and RTP clock run on, as a sender's do while the network drops its
//! packets), and then it speaks the details. idv must hear them, and no `bidi_error` may
//! come. Two calls: 50 packets lost (a second, the longest gap the edge fills: the second of
//! concealment and the packet after it went to the runtime as one frame, over its
//! one-second limit, refused with `audio_too_large`), and 100 (two seconds, as the
//! benchmark lost; str0m counts the stream as paused after 1.5 s).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use str0m::change::SdpAnswer;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use switchboard_local::{self as local, LocalOptions};
use switchboard_sim::sonic::audio::silence;
use switchboard_sim::sonic::phrase_tone;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

use super::browser::{BALANCE_REQUEST, IDV_DETAILS, call_files};

/// 20 ms of 16 kHz PCM16.
const FRAME_BYTES: usize = 640;

/// An HTTP/1.1 request: (status, Location, body).
async fn http(server: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Option<String>, String) {
    let mut stream = tokio::net::TcpStream::connect(server).await.expect("connects");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {server}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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

/// Whether a datagram is RTP (RFC 7983: first byte 128-191; RTCP's packet types 200-206).
fn is_rtp(contents: &[u8]) -> bool {
    contents.first().is_some_and(|b| (128..192).contains(b))
        && contents.get(1).is_some_and(|b| !(200..=206).contains(b))
}

/// What the caller does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Silence until the greeting is over.
    Greeting,
    /// The balance request, then silence until idv asks for the details.
    Request,
    /// The burst lost, then the details, then silence until they are heard.
    Details,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_heard_after_a_burst_of_loss() {
    let (dir, script_path, _) = call_files("webrtc-loss", 0, 0, 0, 0, 0);
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { sim_script: Some(script_path), webrtc_tcp: None, ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let http_addr = local.server.local_addr().expect("addr");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    for burst in [50, 100] {
        call_losing(http_addr, burst).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One call to local mode at `http_addr` whose client loses `burst` RTP packets in a row
/// before it speaks the details.
async fn call_losing(http_addr: SocketAddr, burst: usize) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
    let me = socket.local_addr().expect("addr");
    // As a browser's jitter buffer plays on, the client gives up on a lost packet after 60 ms.
    let mut rtc = Rtc::builder()
        .set_reordering_size_audio(3)
        .set_reordering_timeout_audio(Some(Duration::from_millis(60)))
        .build(Instant::now());
    rtc.add_local_candidate(Candidate::host(me, "udp").expect("a candidate"));
    let mut change = rtc.sdp_api();
    let mid = change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    let channel = change.add_channel("session".into());
    let (offer, pending) = change.apply().expect("an offer");
    let (status, location, answer) = http(http_addr, "POST", "/v1/webrtc", &offer.to_sdp_string()).await;
    assert_eq!(status, 201, "the offer: {answer}");
    rtc.sdp_api().accept_answer(pending, SdpAnswer::from_sdp_string(&answer).expect("SDP")).expect("the answer");
    let pt = rtc
        .writer(mid)
        .and_then(|w| w.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()))
        .expect("Opus");

    let mut encoder = opus::Encoder::new(16_000, opus::Channels::Mono, opus::Application::Voip).expect("an encoder");
    let (request, details) = (phrase_tone(BALANCE_REQUEST, 1200, 8000), phrase_tone(IDV_DETAILS, 1500, 8000));
    let quiet = silence(20);
    let mut speaking: Vec<u8> = Vec::new();
    let (mut step, mut sent, mut lose, mut lost) = (Step::Greeting, 0u64, 0usize, 0usize);
    let mut messages: Vec<Value> = Vec::new();
    let mut opened: Option<Instant> = None;
    let mut buffer = vec![0u8; 2048];
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let deadline = Instant::now() + Duration::from_secs(90);
    let count = |messages: &[Value], kind: &str| messages.iter().filter(|m| m["type"] == kind).count();
    let heard = |messages: &[Value], words: &str| {
        messages.iter().any(|m| {
            m["type"] == "bidi_transcript_stream"
                && m["role"].as_str().unwrap_or_default().eq_ignore_ascii_case("user")
                && m["text"].as_str().unwrap_or_default().contains(words)
        })
    };
    loop {
        let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
        assert!(Instant::now() < deadline, "{burst} to lose: step {step:?}, {lost} lost: {types:?}");
        assert!(!types.contains(&"bidi_error"), "{burst} to lose: no errors: {messages:?}");
        if step == Step::Details && heard(&messages, "Lovelace") {
            break;
        }
        let timeout = loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(at)) => break at,
                Ok(Output::Transmit(t)) => {
                    if lose > 0 && is_rtp(&t.contents) {
                        lose -= 1;
                        lost += 1;
                        continue;
                    }
                    let _ = socket.try_send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::ChannelOpen(..))) => {
                    let start = br#"{"type":"session_start","agent":"triage","modalities":["audio"]}"#;
                    rtc.channel(channel).expect("the channel").write(false, start).expect("session_start");
                }
                Ok(Output::Event(Event::ChannelData(data))) => {
                    let message: Value = serde_json::from_slice(&data.data).expect("JSON on the data channel");
                    if message["type"] == "bidi_connection_start" {
                        opened.get_or_insert_with(Instant::now);
                    }
                    messages.push(message);
                }
                Ok(Output::Event(_)) => {}
                Err(error) => panic!("the client's str0m failed: {error}"),
            }
        };
        // What to say next, once the agent has done its part.
        if speaking.is_empty() {
            match step {
                // Triage's greeting said (or, were there none, a few seconds of the session).
                Step::Greeting
                    if count(&messages, "bidi_response_complete") >= 1
                        || opened.is_some_and(|at: Instant| at.elapsed() > Duration::from_secs(4)) =>
                {
                    speaking = request.clone();
                    step = Step::Request;
                }
                Step::Request
                    if heard(&messages, "balance")
                        && count(&messages, "handoff") >= 1
                        && count(&messages, "bidi_response_complete") >= 2 =>
                {
                    // A second of silence sent and lost, then the details.
                    speaking = silence(20 * burst as u64);
                    speaking.extend(&details);
                    lose = burst;
                    step = Step::Details;
                }
                _ => {}
            }
        }
        let wait = tokio::time::Instant::from_std(timeout.max(Instant::now()));
        tokio::select! {
            received = socket.recv_from(&mut buffer) => {
                let Ok((n, source)) = received else { continue };
                let Ok(contents) = buffer[..n].try_into() else { continue };
                let input = Input::Receive(Instant::now(), Receive { proto: Protocol::Udp, source, destination: me, contents });
                let _ = rtc.handle_input(input);
            }
            () = tokio::time::sleep_until(wait) => {
                let _ = rtc.handle_input(Input::Timeout(Instant::now()));
            }
            _ = ticker.tick(), if rtc.is_connected() => {
                let frame: Vec<u8> = if speaking.is_empty() {
                    quiet.clone()
                } else {
                    speaking.drain(..FRAME_BYTES.min(speaking.len())).collect()
                };
                let pcm: Vec<i16> = frame.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
                let mut padded = pcm;
                padded.resize(FRAME_BYTES / 2, 0);
                let packet = encoder.encode_vec(&padded, 1500).expect("encodes");
                let time = MediaTime::new(sent * 960, Frequency::FORTY_EIGHT_KHZ);
                sent += 1;
                rtc.writer(mid).expect("the writer").write(pt, Instant::now(), time, packet).expect("sends audio");
            }
        }
    }
    assert_eq!(lost, burst, "the burst was lost");
    let location = location.expect("a Location");
    let (status, _, body) = http(http_addr, "DELETE", &location, "").await;
    assert_eq!(status, 200, "DELETE: {body}");
}
