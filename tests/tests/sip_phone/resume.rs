//! A call whose connection between the edge and the gateway drops mid-call goes on: the
//! network between them is a TCP relay the test cuts while the caller waits for its next
//! turn. The edge resumes the call's session through the gateway's URL (its resume token
//! and the number of the last message it received), the phone hears a gap and never a
//! hang-up, and the agent hears the caller's next phrase in the same session: one session
//! in the record with both of the caller's phrases, the agent heard after the second, and
//! the resume counted on the edge's `/metrics`. (A gateway that goes away for good — local
//! mode stopped — still hangs the phone up, once the resume has had its few seconds:
//! `calls::the_agents_side_ending_hangs_the_phone_up`.)

use std::time::{Duration, Instant};

use crate::phone::{Options, Phone};
use crate::relay::TcpRelay;
use crate::stack::{sample, sessions, stack_through, wait_for, wait_for_edge_sample};

/// The caller's second phrase: 600 Hz, which the simulator hears as "phrase 2".
const SECOND_HZ: u32 = 600;

#[test]
fn a_call_whose_gateway_connection_drops_resumes_its_session_and_goes_on() {
    let mut relay = None;
    let stack = stack_through(
        "resume",
        &[],
        "",
        &[],
        |triage| triage,
        |url| {
            let port: u16 = url
                .strip_prefix("ws://127.0.0.1:")
                .and_then(|rest| rest.split('/').next()?.parse().ok())
                .unwrap_or_else(|| panic!("local mode's session URL is ws://127.0.0.1:<port>/...: {url}"));
            let through = TcpRelay::to(port);
            let url = url.replacen(&format!(":{port}/"), &format!(":{}/", through.port), 1);
            relay = Some(through);
            url
        },
    );
    let relay = relay.expect("the relay");
    // Phrase 1 half a second in, 14 s of silence (the cut comes in it), phrase 2 for 2 s,
    // then 8 s to hear the agent's answer to it; the phone hangs up at the end of its WAV.
    let options = Options { then: Some((SECOND_HZ, 2)), after: Some(8), ..Options::default() };
    let dial = format!("/dial sip:triage@{};transport=udp", stack.sip);
    let (phone, _) =
        Phone::start_with(&stack.dir, &stack.tools, "caller", "caller", 14, 90, "udp", "", "", Some(&dial), options);
    let context = || format!("--- edge ---\n{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log());
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    // The agent answers phrase 1 within a few seconds; the connection is cut well before
    // phrase 2 (16 s in).
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(relay.accepted(), 1, "one connection to the gateway so far: {}", context());
    relay.cut();
    let cut_at = answered.elapsed().as_secs_f64();
    wait_for(
        "the edge resumes the call's session",
        Duration::from_secs(15),
        || stack.edge.log_text().contains("the call's session is resumed"),
        context,
    );
    assert!(!phone.log().contains("terminated"), "the phone was not hung up: {}", context());
    phone.wait_over(Duration::from_secs(60));
    let lasted = answered.elapsed().as_secs_f64();

    let edge = stack.edge.log_text();
    assert!(edge.contains("the connection to the gateway ended mid-call: resuming the session"), "{}", context());
    assert!(edge.contains(r#"end="the phone side: RemoteHangUp""#), "the caller's BYE ended the call: {}", context());
    assert_eq!(relay.accepted(), 2, "the session resumed on a second connection: {}", context());
    // baresip plays its whole WAV (about 26 s) before it hangs up.
    assert!(lasted > 20.0, "the call went on to the end of the phone's WAV: {lasted:.1} s\n{}", context());

    // One session, in which the agent heard both phrases, the second after the resume.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the call, resumed: {list:?}");
    let shown = sessions(&stack, &["show", list[0]["id"].as_str().expect("an id")]);
    let user: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
    assert_eq!(user.len(), 2, "both phrases heard in the one session: {shown}");
    assert!(user[0].contains("phrase 1") && user[1].contains("phrase 2"), "{shown}");

    // The phone heard the agent after its second phrase (16-18 s in), past the cut.
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let after = (18.0f64.max(cut_at + 1.0) * 4.0) as usize;
    let voiced = windows.iter().skip(after).filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the agent answered phrase 2 aloud: {voiced} voiced windows after {after}: {windows:?}");

    let counted = wait_for_edge_sample(&stack, r#"switchboard_sip_gateway_resumes_total{outcome="resumed"}"#, 1.0);
    assert_eq!(sample(&counted, r#"switchboard_sip_gateway_resumes_total{outcome="failed"}"#), None, "{counted}");
}
