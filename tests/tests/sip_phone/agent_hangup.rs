//! Hang-ups the edge sends: the agent ending the conversation (its `endSession` tool) hangs
//! the phone up once its goodbye has been heard whole, and a phone whose RTP stops is hung
//! up after the edge's media timeout. Each phone receives the edge's BYE (baresip's SIP
//! trace), and the conversation record says who hung up (`hung_up_by`: `agent`,
//! `media_timeout`; the caller's own BYE is [`crate::calls`]'s).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::phone::Phone;
use crate::stack::{sessions, stack_edited, the_session, wait_for};

/// What the agent says after its end tool: 77 characters, about 4.6 s of the simulator's
/// speech (60 ms a character).
const GOODBYE: &str = "Thank you for calling Example Bank. Goodbye for now, and have a lovely day.";

/// The simulator's script: the caller's tone (phrase 1) says they are done; the agent calls
/// its end tool, then says goodbye. The simulator speaks with no pacing (`pace: 0`): the
/// whole goodbye reaches the edge at once, just before the session's close, so a BYE sent
/// at the close would cut it off.
fn goodbye_script(dir: &Path) -> PathBuf {
    let script = format!(
        "sonic:\n  phrases:\n    1: \"That is all, thank you\"\n  speech: {{ pace: 0 }}\n\
         rules:\n\
         \x20 - name: finish\n\
         \x20   when: {{ userText: \"(?i)that is all\" }}\n\
         \x20   reply: {{ toolUse: {{ name: end_call, input: {{}} }} }}\n\
         \x20 - name: goodbye\n\
         \x20   when: {{ toolResult: {{ name: end_call, status: success }} }}\n\
         \x20   reply: {{ text: \"{GOODBYE}\" }}\n\
         default: {{ text: \"Sorry, I did not catch that.\" }}\n"
    );
    std::fs::create_dir_all(dir).expect("a folder");
    let path = dir.join("goodbye-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

/// triage (the test's copy) with the built-in end tool, used at its workflow's goodbye step
/// (the agent moves there to call it).
fn with_end_tool(triage: String) -> String {
    let tool = "\n  tools:\n    - name: end_call\n      description: End the call once the caller has nothing else.\n      \
                builtin:\n        kind: endSession\n  handoffs:\n";
    let edited = triage.replacen("\n  handoffs:\n", tool, 1);
    assert_ne!(edited, triage, "triage's Agent has handoffs to put the tool before");
    let goodbye = "      instruction: Thank the customer and say goodbye.\n";
    let step = edited.replacen(goodbye, &format!("{goodbye}      tools: [end_call]\n"), 1);
    assert_ne!(step, edited, "triage's workflow has its goodbye step");
    step
}

/// Whether the phone's SIP trace (baresip `-s`) shows a BYE it received from the edge at
/// `edge` (a request block's first lines: `UDP <from> -> <to>`, then `BYE sip:...`).
fn received_bye(log: &str, edge: std::net::SocketAddr) -> bool {
    let from = format!("UDP {edge} -> ");
    let lines: Vec<&str> = log.lines().map(str::trim).collect();
    lines.windows(2).any(|pair| pair[0].starts_with(&from) && pair[1].starts_with("BYE sip:"))
}

/// The one session's row in the record (`sessions list --json`), once it has ended.
fn ended_session(stack: &crate::stack::Stack) -> serde_json::Value {
    let mut row = serde_json::Value::Null;
    wait_for(
        "the record has the session's end",
        Duration::from_secs(30),
        || {
            let list: serde_json::Value = serde_json::from_str(&sessions(stack, &["list", "--json"])).expect("JSON");
            row = list.as_array().and_then(|l| l.first()).cloned().unwrap_or_default();
            row["outcome"] == "ended"
        },
        || sessions(stack, &["list", "--json"]),
    );
    row
}

#[test]
fn the_agent_ending_the_conversation_hangs_the_phone_up_after_its_goodbye() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-goodbye-script-{}", std::process::id()));
    let script = goodbye_script(&dir);
    let script_arg = script.to_string_lossy().into_owned();
    let stack = stack_edited("agent-bye", &[], "", &["--sim-script", &script_arg], with_end_tool);
    // The phone would talk (silence after its tone) for 40 s: only the edge's BYE ends
    // the call sooner.
    let phone = Phone::dial_traced(&stack, "caller", "triage", 40, 70);
    let context = || {
        format!(
            "{}\n--- local ---\n{}\n--- baresip ---\n{}",
            stack.edge.log_text(),
            stack.local.log_text(),
            phone.log()
        )
    };
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    wait_for("the phone is hung up", Duration::from_secs(30), || phone.log().contains("terminated"), context);
    let lasted = answered.elapsed();
    phone.wait_over(Duration::from_secs(5));
    let log = phone.log();
    // The edge's BYE reached the phone (addressed to its Contact), before its WAV ended.
    assert!(received_bye(&log, stack.sip), "the phone received the edge's BYE: {}", context());
    assert!(lasted < Duration::from_secs(30), "hung up {lasted:?} after the answer, well before the phone's 40 s");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the session ended (1000"#), "the session's end ended the call: {}", context());
    // The goodbye was heard whole: about 4.6 s of the agent's voice (at least 3 s of voiced
    // 250 ms windows: baresip starved of CPU records less than it plays), though it all
    // reached the edge at once before the close (a BYE at the close: none of it heard).
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(
        voiced >= 12,
        "the phone heard the whole goodbye: {voiced} voiced windows of 250 ms: {windows:?}\n{}",
        context()
    );
    // The edge played out all it still held before its BYE (`left_ms=0`).
    let played = edge.lines().find(|l| l.contains("played the agent's last words out before hanging up"));
    eprintln!("hung up {lasted:?} after the answer; {voiced} voiced windows heard; the edge: {played:?}");
    assert!(
        played.is_some_and(|l| l.split_whitespace().any(|field| field == "left_ms=0")),
        "{played:?}: {}",
        context()
    );

    // The record: the agent ended the conversation (its end tool), and hung up.
    let row = ended_session(&stack);
    assert_eq!(row["hung_up_by"], "agent", "{row}");
    assert_eq!(row["close_code"], 1000, "{row}");
    let shown = the_session(&stack);
    assert!(shown.contains("end_call"), "the end tool's call is in the record: {shown}");
    assert!(shown.contains("hung up by agent"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_phone_whose_rtp_stops_is_hung_up_after_the_media_timeout() {
    let stack = stack_edited("rtp-timeout", &["--media-timeout-seconds", "3"], "", &[], |triage| triage);
    let phone = Phone::dial_traced(&stack, "caller", "triage", 40, 70);
    let context = || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log());
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    // The call goes on past the timeout while the phone sends.
    std::thread::sleep(Duration::from_secs(4));
    assert!(!stack.edge.log_text().contains("call ended"), "a phone that sends is not timed out: {}", context());
    // The phone goes quiet: its process frozen, it sends no RTP (nor anything else). Its
    // last packet went at most a little before: the edge hangs up about 3 s from here.
    phone.freeze(true);
    let frozen = Instant::now();
    wait_for(
        "the edge ends the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call ended"),
        || stack.edge.log_text(),
    );
    let took = frozen.elapsed();
    eprintln!("the edge hung up {took:?} after the phone was frozen (media timeout 3 s)");
    phone.freeze(false);
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="no RTP from the phone for the media timeout""#), "{}", context());
    assert!(
        took >= Duration::from_millis(2_500) && took < Duration::from_secs(12),
        "hung up {took:?} after the phone's RTP stopped (media timeout 3 s)"
    );
    // The edge's BYE waited in the thawed phone's socket (or came again): the phone's call
    // ends with it, long before its WAV would.
    wait_for("the phone is hung up", Duration::from_secs(20), || phone.log().contains("terminated"), context);
    assert!(received_bye(&phone.log(), stack.sip), "the phone received the edge's BYE: {}", context());

    let row = ended_session(&stack);
    assert_eq!(row["hung_up_by"], "media_timeout", "{row}");
    assert!(the_session(&stack).contains("hung up by media_timeout"), "{}", the_session(&stack));
}
