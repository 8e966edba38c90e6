//! Inbound calls: a phone reaches a voice agent by name or by the number it claims (over
//! UDP or TCP), hears its reply and is recorded; hostile datagrams do not disturb a call;
//! calls no agent may answer are refused with the gateway's reason; the agent's side ending
//! hangs the phone up. The edge's own metrics count each of these as it happened.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::phone::Phone;
use crate::stack::{Stack, TRIAGE_NUMBER, edge_metrics, sample, sessions, stack, wait_for, wait_for_edge_sample};

/// Sends what a broken or hostile peer might to the edge's SIP port and every port of its
/// RTP range: random bytes, a request with no headers, an oversized datagram, RTP from an
/// address not in any dialogue (loud, were it played), and a BYE for no dialogue. Returns
/// the answers that came back to the sending socket.
fn garbage(stack: &Stack) -> Vec<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let port = socket.local_addr().expect("addr").port();
    // Bytes from a fixed xorshift sequence: the same garbage every run.
    let mut state = 0x2545_f491_u32;
    let mut byte = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state.to_le_bytes()[0]
    };
    let mut junk: Vec<Vec<u8>> = (0..8).map(|i| (0..(37 * i + 5)).map(|_| byte()).collect()).collect();
    junk.push(b"INVITE sip:triage@127.0.0.1 SIP/2.0\r\n\r\n".to_vec());
    junk.push(vec![b'A'; 20_000]);
    // RTP version 2, payload type 0 (PCMU), 160 bytes of the loudest μ-law code.
    let mut rtp = vec![0x80, 0x00, 0x00, 0x01, 0, 0, 0, 160, 0xde, 0xad, 0xbe, 0xef];
    rtp.extend([0x00; 160]);
    for _ in 0..5 {
        junk.push(rtp.clone());
    }
    for datagram in &junk {
        let _ = socket.send_to(datagram, stack.sip);
        for p in stack.rtp.0..=stack.rtp.1 {
            let _ = socket.send_to(datagram, ("127.0.0.1", p));
        }
    }
    let bye = format!(
        "BYE sip:triage@{sip} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{port};branch=z9hG4bKjunk1\r\n\
         From: <sip:junk@127.0.0.1>;tag=j1\r\nTo: <sip:triage@127.0.0.1>;tag=nobody\r\nCall-ID: junk-call\r\n\
         CSeq: 2 BYE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
        sip = stack.sip
    );
    socket.send_to(bye.as_bytes(), stack.sip).expect("send");
    socket.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    let mut answers = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok((n, _)) = socket.recv_from(&mut buf) {
        answers.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        socket.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    }
    answers
}

#[test]
fn a_phone_call_reaches_a_voice_agent_hears_its_reply_survives_garbage_and_is_recorded() {
    let stack = stack("call");
    let phone = Phone::dial(&stack, "caller", "triage", 12, 30);
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    let answered = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let sent_at = answered.elapsed().as_secs_f64();
    let answers = garbage(&stack);
    assert!(
        answers.iter().any(|a| a.starts_with("SIP/2.0 481")),
        "a BYE for no dialogue is answered 481 while the call goes on: {answers:?}"
    );
    phone.wait_over(Duration::from_secs(45));
    // How long the call lasted, by the clock from the edge's answer to the phone's hang-up
    // (not by the recording's length: baresip starved of CPU records less than it plays).
    let lasted = answered.elapsed().as_secs_f64();
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}");
    assert!((11.0..45.0).contains(&lasted), "the call lasted as long as the phone's 12 s WAV: {lasted:.1} s\n{log}");
    // The agent's reply: at least a second of it heard well above silence, after the
    // garbage was sent (so the call survived it).
    let after = ((sent_at + 0.5) * 4.0) as usize;
    let voiced = windows.iter().skip(after).filter(|rms| **rms > 0.02).count();
    let loudest = windows.iter().copied().fold(0.0, f64::max);
    assert!(
        voiced >= 4 && loudest > 0.05,
        "the phone heard the agent after the garbage: {voiced} voiced windows, loudest {loudest:.3}: {windows:?}"
    );
    assert!(loudest < 0.9, "no loud garbage RTP was played: loudest {loudest:.3} (the agent's voice is about 0.1-0.3)");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the phone side: RemoteHangUp""#), "the caller's BYE ended the call:\n{edge}");
    // The garbage reached the call's media ports (15 datagrams to each) and was ignored there.
    let ignored: u64 = edge
        .lines()
        .find_map(|l| l.split_once(" ignored=").and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| panic!("the edge logs what it relayed:\n{edge}"));
    assert!(ignored >= 15, "the garbage on the media ports was ignored, not played: ignored={ignored}\n{edge}");

    // The edge's metrics: one inbound call answered, ended by the phone's BYE, none under
    // way now; the phone's RTP counted with its jitter; the garbage's unreadable datagrams
    // dropped unanswered.
    let counted = wait_for_edge_sample(
        &stack,
        r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="phone_hung_up"}"#,
        1.0,
    );
    let series = |name: &str| sample(&counted, name);
    assert_eq!(
        series(r#"switchboard_sip_calls_total{direction="inbound",outcome="answered"}"#),
        Some(1.0),
        "{counted}"
    );
    assert_eq!(series(r#"switchboard_sip_calls_active{direction="inbound"}"#), Some(0.0), "{counted}");
    let received = series("switchboard_sip_rtp_packets_received_total").unwrap_or_default();
    let lost = series("switchboard_sip_rtp_packets_lost_total").expect("the losses counted");
    // 50 packets a second for the 12 s the phone played (a busy machine's baresip sends
    // fewer, never none); on loopback next to none are lost.
    assert!(received >= 100.0 && lost * 20.0 <= received, "received {received}, lost {lost}: {counted}");
    let jitters = series("switchboard_sip_rtp_jitter_seconds_count").unwrap_or_default();
    assert!(jitters >= 1.0, "the call's jitter observed at least at its end: {counted}");
    let unreadable = series(r#"switchboard_sip_messages_dropped_total{reason="unreadable"}"#).unwrap_or_default();
    assert!(unreadable >= 1.0, "the random datagrams were dropped as unreadable: {counted}");
    assert_eq!(series(r#"switchboard_sip_calls_total{direction="inbound",outcome="refused"}"#), None, "{counted}");

    // The record: one session with the voice agent, ended (close 1000) when the phone hung
    // up, in which the agent heard the caller's tone as "phrase 1" once (the garbage RTP was
    // not heard as a second utterance).
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for one call: {list:?}");
    let session = &list[0];
    assert_eq!(session["first_agent"], "default/triage", "{session}");
    assert_eq!(session["outcome"], "ended", "{session}");
    assert_eq!(session["close_code"], 1000, "{session}");
    assert_eq!(session["hung_up_by"], "caller", "the record says the caller hung up: {session}");
    let (started, ended) = (session["started_at"].as_f64().expect("start"), session["ended_at"].as_f64().expect("end"));
    let seconds = (ended - started) / 1000.0;
    assert!((seconds - lasted).abs() < 5.0, "the session ended with the call: {seconds} s vs {lasted:.1} s");
    let id = session["id"].as_str().expect("an id");
    let shown = sessions(&stack, &["show", id]);
    let user_lines: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
    assert_eq!(user_lines.len(), 1, "one utterance heard: {shown}");
    assert!(user_lines[0].contains("phrase 1"), "the agent heard the caller's tone: {shown}");
}

#[test]
fn a_call_to_a_claimed_number_reaches_the_agent_that_claims_it() {
    let stack = stack("number");
    let phone = Phone::dial(&stack, "caller", TRIAGE_NUMBER, 6, 30);
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    assert!(windows.iter().filter(|rms| **rms > 0.02).count() >= 4, "the phone heard the agent: {windows:?}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let agents: Vec<&str> = list.as_array().expect("a list").iter().filter_map(|s| s["first_agent"].as_str()).collect();
    assert_eq!(agents, ["default/triage"], "the number's call is a session with triage");
}

#[test]
fn a_call_over_tcp_is_answered_heard_and_hung_up() {
    let stack = stack("tcp");
    let phone = Phone::dial_over(&stack, "caller", "triage", 8, 30, "tcp");
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the phone heard the agent over TCP signalling: {windows:?}");
    let edge = stack.edge.log_text();
    assert!(
        edge.contains(r#"end="the phone side: RemoteHangUp""#),
        "the caller's BYE over TCP ended the call:\n{edge}"
    );
}

#[test]
fn calls_to_an_unknown_a_hidden_or_a_text_only_agent_are_refused_with_the_reason() {
    let stack = stack("refused");
    for (user, answer) in [
        ("nobody", "404 no agent nobody"),
        ("+15550000000", "404 no agent +15550000000: no agent answers +15550000000"),
        ("disputes", "488 agent disputes is text-only and takes no calls"),
        ("idv", "403 agent idv is not open to the SIP edge"),
    ] {
        let phone = Phone::dial(&stack, user, user, 1, 20);
        phone.wait_over(Duration::from_secs(20));
        let log = phone.log();
        assert!(
            log.contains(answer),
            "a call to {user} is answered {answer:?}:\n{log}\n--- edge ---\n{}",
            stack.edge.log_text()
        );
        assert!(!log.contains("Call established"), "{log}");
    }
    let list = sessions(&stack, &["list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&list).expect("JSON");
    let agents: Vec<&str> = list.as_array().expect("a list").iter().filter_map(|s| s["first_agent"].as_str()).collect();
    assert!(
        !agents.iter().any(|a| a.ends_with("/triage") || a.ends_with("/idv")),
        "no voice session opened: {agents:?}"
    );
    // The edge counted each refusal by its reason, and answered nothing.
    let counted =
        wait_for_edge_sample(&stack, r#"switchboard_sip_calls_total{direction="inbound",outcome="refused"}"#, 4.0);
    for (reason, calls) in [("not_found", 2.0), ("not_acceptable", 1.0), ("not_exposed", 1.0)] {
        let series = format!("switchboard_sip_calls_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(sample(&counted, &series), Some(calls), "{series}: {counted}");
    }
    assert_eq!(sample(&counted, r#"switchboard_sip_calls_total{direction="inbound",outcome="answered"}"#), None);

    // A flood from one address: past its burst, the flood guard drops the OPTIONS
    // unanswered, and counts each one it dropped.
    let flood = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let port = flood.local_addr().expect("addr").port();
    const SENT: usize = 150;
    for n in 0..SENT {
        let options = format!(
            "OPTIONS sip:triage@{sip} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{port};branch=z9hG4bKflood{n}\r\n\
             From: <sip:flood@127.0.0.1>;tag=f{n}\r\nTo: <sip:triage@127.0.0.1>\r\nCall-ID: flood-{n}\r\n\
             CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
            sip = stack.sip
        );
        flood.send_to(options.as_bytes(), stack.sip).expect("send");
    }
    flood.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    let mut answered = 0;
    let mut buf = [0u8; 4096];
    while let Ok((n, _)) = flood.recv_from(&mut buf) {
        assert!(buf[..n].starts_with(b"SIP/2.0 200"), "{}", String::from_utf8_lossy(&buf[..n]));
        answered += 1;
    }
    let counted = edge_metrics(&stack);
    let limited =
        sample(&counted, r#"switchboard_sip_messages_dropped_total{reason="rate_limited"}"#).unwrap_or_default();
    assert!(
        answered < SENT && limited >= 1.0 && answered + limited as usize <= SENT,
        "{answered} of {SENT} OPTIONS answered, {limited} counted as rate-limited: {counted}"
    );
}

#[test]
fn the_agents_side_ending_hangs_the_phone_up() {
    let stack = stack("bye");
    let phone = Phone::dial(&stack, "caller", "triage", 40, 60);
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    std::thread::sleep(Duration::from_secs(2));
    // Local mode stops: its gateway drains (5 s) and closes the session (1001: going away);
    // the edge tries to resume the session for its 5 s, finds no gateway, sends BYE, and the
    // phone hangs up long before its WAV ends.
    stack.local.terminate().expect("SIGTERM");
    let stopped = Instant::now();
    wait_for(
        "the phone is hung up",
        Duration::from_secs(30),
        || phone.log().contains("terminated"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(25), "hung up {took:?} after the session's end began");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the session ended (1001"#), "the session's close ended the call:\n{edge}");
    assert!(edge.contains("the call's session could not be resumed"), "the resume was tried first:\n{edge}");
}
