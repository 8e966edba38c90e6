//! SRTP (SDES, RFC 4568) with SIP over TLS: a baresip with its `srtp` module and
//! `mediaenc=srtp-mand` (it offers only RTP/SAVP with `a=crypto`) calls the edge over TLS,
//! hears the agent and is heard (the simulator hears its tone as "phrase 1"), while forged
//! SRTCP sent to the call's media ports is dropped and counted; the edge's metrics count the
//! packets it protected and unprotected; no key reaches the edge's log or the record. The
//! same phone over plain UDP is refused 488 with the reason (keys only travel over TLS); with
//! `--srtp required`, so is a phone over TLS that offers no key.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::phone::{Options, Phone};
use crate::stack::{Stack, sample, the_session, wait_for, wait_for_edge_sample};
use crate::tls::{certificates, certs_dir, tls_stack_with};

/// A phone over `transport` (`tls` dials the TLS address, trusting the test CA) with
/// baresip's `srtp` module and `mediaenc` (`srtp-mand`; empty: none), its SIP trace on.
fn srtp_phone(stack: &Stack, name: &str, to: (&str, SocketAddr), certs: &Path, mediaenc: &str, silence: u32) -> Phone {
    let (transport, at) = to;
    let dial = format!("/dial sip:triage@{at};transport={transport}");
    let config = format!("sip_cafile {}\n", certs.join("ca.crt").display());
    let account = if mediaenc.is_empty() { String::new() } else { format!(";mediaenc={mediaenc}") };
    let options = Options { trace: true, srtp: true, ..Options::default() };
    let phone = Phone::start_with(
        &stack.dir,
        &stack.tools,
        name,
        "caller",
        silence,
        silence + 25,
        transport,
        &account,
        &config,
        Some(&dial),
        options,
    );
    phone.0
}

/// Forged SRTCP (a sender report with a made-up index and tag) to every port of the
/// edge's RTP range from this host: what someone who can reach the media ports, but holds
/// no key, can send.
fn forge_srtcp(stack: &Stack, count: u32) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    for n in 0..count {
        let mut packet = vec![0x81, 0xc8, 0x00, 0x0b, 0xca, 0xfe, 0xba, 0xbe];
        packet.extend([0xab; 16]);
        packet.extend((0x8000_0000u32 | (n + 1)).to_be_bytes());
        packet.extend([0x5a; 10]);
        for port in stack.rtp.0..=stack.rtp.1 {
            let _ = socket.send_to(&packet, ("127.0.0.1", port));
        }
    }
}

/// The 488's reason phrase a phone got, from its SIP trace.
fn refusal(phone: &Phone) -> String {
    phone.wait_over(Duration::from_secs(30));
    let log = phone.log();
    log.lines()
        .find_map(|l| l.trim().strip_prefix("SIP/2.0 488 "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("the phone got a 488:\n{log}"))
}

#[test]
fn a_phone_with_mandatory_srtp_over_tls_hears_the_agent_is_heard_and_forged_packets_are_counted() {
    let certs = certs_dir("srtp");
    certificates(&certs);
    let (stack, tls) = tls_stack_with("srtp", &certs, &[]);

    // Over plain UDP the same phone is refused: its keys would travel in the clear.
    let plain = srtp_phone(&stack, "plain", ("udp", stack.sip), &certs, "srtp-mand", 2);
    let reason = refusal(&plain);
    assert_eq!(
        reason,
        "RTP/SAVP is offered: SRTP keys are exchanged only over TLS and this call came over UDP",
        "{}",
        plain.log()
    );

    let phone = srtp_phone(&stack, "caller", ("tls", tls), &certs, "srtp-mand", 8);
    let context = || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log());
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    forge_srtcp(&stack, 30);
    phone.wait_over(Duration::from_secs(45));
    let lasted = answered.elapsed().as_secs_f64();
    let log = phone.log();
    assert!(log.contains("Call established"), "{}", context());
    assert!((9.0..45.0).contains(&lasted), "the call lasted as long as the phone's 10 s WAV: {lasted:.1} s");
    // The edge answered RTP/SAVP with one a=crypto line of its own.
    assert!(log.contains("RTP/SAVP 0 101") && log.contains("a=crypto:"), "the answer settled SRTP:\n{log}");
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    let loudest = windows.iter().copied().fold(0.0, f64::max);
    assert!(voiced >= 4, "the phone heard the agent through SRTP: {windows:?}");
    assert!(loudest < 0.9, "nothing forged was played: loudest {loudest:.3}");
    let record = the_session(&stack);
    let heard: Vec<&str> = record.lines().filter(|l| l.contains(" user ")).collect();
    assert!(heard.len() == 1 && heard[0].contains("phrase 1"), "the agent heard the caller's tone: {record}");

    // Counted: what the edge protected and unprotected, and the forged packets dropped.
    let counted = wait_for_edge_sample(
        &stack,
        r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="phone_hung_up"}"#,
        1.0,
    );
    let srtp = |outcome: &str| {
        sample(&counted, &format!("switchboard_sip_srtp_packets_total{{outcome=\"{outcome}\"}}")).unwrap_or_default()
    };
    assert!(srtp("protected") >= 200.0, "the agent's side, 50 packets a second, protected: {counted}");
    assert!(srtp("unprotected") >= 100.0, "the phone's packets unprotected: {counted}");
    assert!(srtp("auth_failed") >= 30.0, "the forged SRTCP failed authentication: {counted}");
    let edge = stack.edge.log_text();
    assert!(edge.contains("srtp=true"), "the call's media line says SRTP:\n{edge}");
    for text in [&edge, &record] {
        assert!(!text.contains("inline:"), "no key in the edge's log or the record:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&certs);
}

#[test]
fn with_srtp_required_a_call_without_a_key_or_over_udp_is_refused_with_the_reason() {
    let certs = certs_dir("srtp-required");
    certificates(&certs);
    let (stack, tls) = tls_stack_with("srtp-required", &certs, &["--srtp", "required"]);
    let over_udp = srtp_phone(&stack, "udp", ("udp", stack.sip), &certs, "srtp-mand", 2);
    assert_eq!(
        refusal(&over_udp),
        "SRTP is required and its keys are exchanged only over TLS; this call came over UDP (call sips: or ;transport=tls)"
    );
    let no_key = srtp_phone(&stack, "nokey", ("tls", tls), &certs, "", 2);
    assert_eq!(refusal(&no_key), "SRTP is required: the offer has no a=crypto line");
    let edge = stack.edge.log_text();
    assert!(!edge.contains("call answered"), "no call was answered:\n{edge}");
    let _ = std::fs::remove_dir_all(&certs);
}
