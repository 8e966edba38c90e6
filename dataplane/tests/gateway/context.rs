//! A long session moves like a short one: the context the gateway signs for a runtime
//! (memory and the conversation) is never larger than what a runtime reads — a runtime
//! reads a signed `session_start` up to `MAX_START_BYTES` whatever its message limit, and
//! the gateway compacts a longer conversation (the oldest lines go) — so a session is not
//! refused at a handoff or a move.

use switchboard_core::protocol::ServerMessage;

use crate::client::{Client, replies};
use crate::fleet::Fleet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_long_conversation_is_handed_off_and_moved_whole() {
    let mut fleet = Fleet::start(&[("idv", 2)]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    // Two typed lines of 40 KB each (under the 64 KiB message limit): the conversation the
    // gateway keeps is over what a runtime takes as a message.
    for i in 0..2 {
        client.say(&format!("note {i}: {}", "lorem ipsum ".repeat(3_300))).await;
        client.turn().await;
    }
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    let greeting = client.turn().await;
    assert!(
        !greeting.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "handoff_failed")),
        "the handoff happened: {greeting:?}"
    );
    // The idv pod serving it is lost: the session moves to the other with its context.
    let serving = fleet.pods.iter().position(|p| p.agent == "idv" && fleet.gateway.balancer.live(p.addr) == 1);
    let serving = serving.expect("an idv pod serves the session");
    fleet.pods[serving].kill();
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(
        client
            .seen
            .iter()
            .any(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_lost")),
        "moved: {:?}",
        client.seen.iter().rev().take(5).collect::<Vec<_>>()
    );
    assert!(replies(&verified).iter().any(|r| r.contains("verified")), "the other pod goes on: {verified:?}");
}
