//! Fillers and dead air (issue 26): idv's identity check answers only after 3.5 s (a real
//! HTTP tool server that takes its time); 1.5 s into the wait the caller hears idv say a
//! short line, in its own voice, instead of silence — then the check's answer as usual.
//! The instruction behind the line is never shown as the caller's words. A model that
//! takes 2.5 s to answer is dead air, counted.

use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_sim::sonic::voice_frequency;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::common::*;

/// How long the slow tool server takes to answer.
const TOOL_TAKES: Duration = Duration::from_millis(3500);
const FILLER: &str = "Bear with me a moment";

/// An HTTP tool server on loopback that answers every request after [`TOOL_TAKES`]: the
/// details did not match.
async fn slow_tool_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Headers, then as much body as Content-Length says.
                loop {
                    let Ok(n) = socket.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| {
                                l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok())
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                tokio::time::sleep(TOOL_TAKES).await;
                let body = r#"{"verified": false}"#;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_gets_a_spoken_filler_instead_of_silence() {
    let tools = slow_tool_server().await;
    let running = banking_edited(&script("", ""), |copy| {
        let idv = copy.join("idv.yaml");
        let text = std::fs::read_to_string(&idv).expect("reads idv.yaml");
        let text = text.replace(
            "url: http://banking-tools:8080/idv\n        timeoutMs: 3000",
            "url: http://slow-tools:8080/idv\n        timeoutMs: 8000",
        );
        assert!(text.contains("slow-tools"), "idv's tool moved to the slow server");
        std::fs::write(&idv, text).expect("writes idv.yaml");
        let local = copy.join("tools/local.yaml");
        let text = std::fs::read_to_string(&local).expect("reads local.yaml");
        let text = text.replace("hostAliases: {}", &format!("hostAliases: {{ slow-tools: \"{tools}\" }}"));
        std::fs::write(&local, text).expect("writes local.yaml");
    })
    .await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.say(BALANCE_REQUEST, 700);
    call.until(|m| is_final_reply(m, "To verify your identity")).await;

    call.say(IDV_DETAILS, 900);
    let wait = call.until(|m| is_final_reply(m, "couldn't verify")).await;
    let at = |pred: &dyn Fn(&ServerMessage) -> bool| {
        wait.iter().position(pred).unwrap_or_else(|| panic!("not found in {:#?}", summary(&wait)))
    };
    let started = at(&|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "perform_idv_check"));
    let filler = at(&|m| is_final_reply(m, FILLER));
    let done = at(&|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "perform_idv_check"));
    assert!(started < filler && filler < done, "the filler came while the tool ran: {:#?}", summary(&wait));
    let spoken = &wait[started..filler];
    assert!(audio_bytes(spoken) > 0, "the filler was spoken");
    let (heard, max) = (audio_pitch(spoken), voice_frequency(Some("matthew")));
    assert!((heard - max).abs() < 3.0, "in idv's voice: {heard:.1} Hz, not {max:.1} Hz");
    assert_eq!(
        finals(&wait, TranscriptRole::User),
        ["My name is Ada Lovelace, account 12345678, sort code 12-34-56"],
        "the instruction is not the caller's: {:#?}",
        summary(&wait)
    );
    let fillers = finals(&call.seen, TranscriptRole::Assistant).iter().filter(|t| t.contains(FILLER)).count();
    assert_eq!(fillers, 1, "one filler for one wait");
    call.hang_up().await;

    let stats = running.sim.sonic_stats();
    let rules: Vec<_> = stats.replies.iter().filter_map(|r| r.rule.as_deref()).collect();
    assert_eq!(rules.iter().filter(|r| **r == "say-now").count(), 1, "{rules:?}");
    let metrics = metrics(running.addr).await;
    assert!(metrics.contains(r#"switchboard_voice_fillers_total{agent="idv"} 1"#), "{metrics}");
    // Triage answered at once (the simulator's 50 ms): no dead air there.
    assert_eq!(metric_sum(&metrics, "switchboard_voice_silences_total", &[("agent", "triage")]), 0.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_of_more_than_two_seconds_for_the_agents_voice_is_counted_as_dead_air() {
    let slow = script("", "").replace("responseDelayMs: 50", "responseDelayMs: 2500");
    assert_ne!(slow, script("", ""), "the model takes 2.5 s to start answering");
    let running = banking(&slow).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.say(HOURS, 600);
    let answer = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&answer) > 0);
    call.hang_up().await;
    let metrics = metrics(running.addr).await;
    // One wait; the answer's audio then flows without a gap.
    assert_eq!(metric_sum(&metrics, "switchboard_voice_silences_total", &[("agent", "triage")]), 1.0, "{metrics}");
}
