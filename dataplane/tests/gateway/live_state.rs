//! State reaches a live voice stream at once (issue 42): through the real gateway, one real
//! runtime process per agent and the simulator, a caller verified by voice changes idv's
//! session memory (`verifiedUser`) and moves its workflow on — and idv's live Nova Sonic
//! stream is told so the moment it happens, as text it takes in without answering (a
//! non-interactive USER text content), while the identity check's result is still on its
//! way: not only through that tool result, and without a new stream.

use switchboard_core::NOTICE_PREFIX;
use switchboard_core::protocol::ServerMessage;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::fleet::Fleet;
use crate::voice_common::{self as common, Call, Encoding, is_final_reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_caller_and_the_next_step_reach_the_live_stream_before_the_tool_result() {
    let script = Script::parse(&common::script("", "")).expect("the voice script");
    let fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::BALANCE_REQUEST, 700);
    call.until(|m| is_final_reply(m, "To verify your identity")).await;
    let before = fleet.sim.sonic_stats();
    assert!(before.notices.is_empty(), "nothing changed under a live stream yet: {:?}", before.notices);
    let idv_stream = before.streams - 1;

    call.say(common::IDV_DETAILS, 900);
    let verified = call.until(|m| is_final_reply(m, "you're verified")).await;
    assert!(verified.iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")));
    assert!(
        verified.iter().any(|m| matches!(m, ServerMessage::WorkflowTransition { to, .. } if to == "choose")),
        "{:?}",
        common::summary(&verified)
    );
    let stats = fleet.sim.sonic_stats();
    assert_eq!(stats.validation_errors, 0, "the service takes the notice as valid input");
    assert_eq!(stats.streams, before.streams, "told on the live stream: no new stream was opened");
    // (The identity check's call itself moved the workflow to the step that allows it:
    // told too, before.)
    let notices: Vec<_> =
        stats.notices.iter().filter(|n| n.stream == idv_stream && n.text.contains("verifiedUser")).collect();
    assert_eq!(notices.len(), 1, "one notice for the verified caller: {:?}", stats.notices);
    let notice = notices[0];
    assert!(notice.text.starts_with(NOTICE_PREFIX), "{notice:?}");
    assert!(notice.text.contains("verifiedUser") && notice.text.contains("Ada Lovelace"), "{notice:?}");
    assert!(notice.text.contains("The workflow is now at step \"choose\""), "{notice:?}");
    assert_eq!(
        notice.awaiting_tools,
        ["perform_idv_check"],
        "the stream was told while the identity check's result was still awaited: {notice:?}"
    );
    // The notice is taken in, never answered: no reply was planned for it, and it was not
    // taken for the caller's words.
    let replies_after = &stats.replies[notice.replies_before..];
    assert!(replies_after.iter().all(|r| r.heard.as_deref() != Some(notice.text.as_str())), "{replies_after:?}");
    assert!(!stats.typed.iter().any(|t| t.starts_with(NOTICE_PREFIX)), "not sent as interactive text");
    let user_finals = common::finals(&verified, switchboard_core::protocol::TranscriptRole::User);
    assert!(!user_finals.iter().any(|t| t.starts_with(NOTICE_PREFIX)), "{user_finals:?}");
}
