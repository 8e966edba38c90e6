//! A phone call's silence handling across a resume: triage (the test's copy) re-prompts a
//! caller quiet for 4 s once, then ends the call (it listens first, as the stack's triage
//! does). The caller says nothing; the connection between the edge and the gateway is cut
//! (a TCP relay, as in [`crate::resume`]) 2.5 s into the call — a second and a half before
//! the re-prompt would be due — and the edge resumes the call's session at once. The resumed session's quiet counts afresh: the phone hears
//! nothing for the quiet period after the resume, then the one re-prompt, then the goodbye,
//! and the agent hangs up; the record holds one session, ended as idle, with one re-prompt.
//! The phone's audio (silence, 50 packets a second) keeps the caller there for the runtime,
//! which takes a caller whose audio stopped coming for away, not silent.

use std::time::{Duration, Instant};

use crate::phone::{Options, Phone};
use crate::relay::TcpRelay;
use crate::stack::{sessions, stack_through, wait_for};

/// triage's quiet period before its re-prompt.
const QUIET_S: f64 = 4.0;

/// triage's Persona re-prompting once after [`QUIET_S`].
fn quiet_after_four_seconds(triage: String) -> String {
    let silence = "  speakFirst: false\n  turnTaking:\n    silence:\n      afterSeconds: 4\n      maxPrompts: 1\n";
    let edited = triage.replacen("  speakFirst: false\n", silence, 1);
    assert_ne!(edited, triage, "the stack's triage listens first");
    edited
}

/// The 250 ms windows the phone heard as voiced.
fn voiced(windows: &[f64]) -> Vec<usize> {
    windows.iter().enumerate().filter(|(_, rms)| **rms > 0.02).map(|(i, _)| i).collect()
}

#[test]
fn a_silent_phone_callers_quiet_counts_afresh_after_its_session_resumes() {
    let mut relay = None;
    let stack = stack_through("silence-resume", &[], "", &[], quiet_after_four_seconds, |url| {
        let port: u16 = url
            .strip_prefix("ws://127.0.0.1:")
            .and_then(|rest| rest.split('/').next()?.parse().ok())
            .unwrap_or_else(|| panic!("local mode's session URL is ws://127.0.0.1:<port>/...: {url}"));
        let through = TcpRelay::to(port);
        let url = url.replacen(&format!(":{port}/"), &format!(":{}/", through.port), 1);
        relay = Some(through);
        url
    });
    let relay = relay.expect("the relay");
    // A caller who says nothing for 40 s (the agent hangs up long before).
    let options = Options { silent: true, ..Options::default() };
    let dial = format!("/dial sip:triage@{};transport=udp", stack.sip);
    let (phone, _) =
        Phone::start_with(&stack.dir, &stack.tools, "caller", "caller", 40, 90, "udp", "", "", Some(&dial), options);
    let context = || format!("--- edge ---\n{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log());
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    // 2.5 s of quiet, then the cut.
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(answered.elapsed()));
    relay.cut();
    let cut_at = answered.elapsed().as_secs_f64();
    wait_for(
        "the edge resumes the call's session",
        Duration::from_secs(15),
        || stack.edge.log_text().contains("the call's session is resumed"),
        context,
    );
    phone.wait_over(Duration::from_secs(60));
    let log = phone.log();
    assert!(log.contains("Call established"), "{}", context());

    // One session, resumed, ended by the agent as idle after one re-prompt.
    let shown = std::cell::RefCell::new(String::new());
    wait_for(
        "the record has the session's idle end",
        Duration::from_secs(30),
        || {
            let list: serde_json::Value =
                serde_json::from_str(&sessions(&stack, &["list", "--json"])).unwrap_or_default();
            let Some(rows) = list.as_array().filter(|rows| !rows.is_empty()) else { return false };
            assert_eq!(rows.len(), 1, "one session for the call, resumed: {rows:?}");
            let text = sessions(&stack, &["show", rows[0]["id"].as_str().unwrap_or_default()]);
            let ended = text.contains("idle:");
            *shown.borrow_mut() = text;
            ended
        },
        || shown.borrow().clone(),
    );
    let shown = shown.into_inner();
    assert_eq!(shown.matches("Are you still there?").count(), 1, "one re-prompt: {shown}");
    assert_eq!(relay.accepted(), 2, "the session resumed on a second connection: {}", context());

    // What the phone heard: nothing for a quiet period after the resume (the re-prompt was
    // due a second and a half after the cut by the clock before it), then the re-prompt and
    // the goodbye.
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let after_cut: Vec<usize> = voiced(&windows).into_iter().filter(|i| *i as f64 / 4.0 > cut_at).collect();
    let first = *after_cut.first().unwrap_or_else(|| panic!("the re-prompt was heard: {windows:?}")) as f64 / 4.0;
    eprintln!("cut {cut_at:.1} s into the call; the re-prompt heard {:.1} s after it", first - cut_at);
    assert!(
        first >= cut_at + QUIET_S - 0.5,
        "the re-prompt came {:.1} s after the cut: the quiet counted afresh from the resume ({QUIET_S} s)\n{windows:?}",
        first - cut_at
    );
}
