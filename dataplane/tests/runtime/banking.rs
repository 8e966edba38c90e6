//! The Example Bank conversation in text mode, end to end through local mode: real
//! WebSocket client, the real Bedrock SDK against the simulator, the demo HTTP tool
//! server, handoffs, memory and resume performed by the gateway's own code in-process.

use switchboard_core::HandoffKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole, close_code};
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client, replies};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_check_balance_and_handoffs() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), None).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    assert!(
        matches!(&hello[0], ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage"),
        "the default agent answers: {hello:?}"
    );
    assert!(replies(&hello)[0].contains("Example Bank"), "triage greets with its persona's greeting");

    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    let handoff = to_idv.iter().find_map(|m| match m {
        ServerMessage::Handoff { from, to, kind, context } => Some((from.clone(), to.clone(), *kind, context.clone())),
        _ => None,
    });
    let (from, to, kind, context) = handoff.expect("triage hands off");
    assert_eq!((from.as_str(), to.as_str(), kind), ("triage", "idv", HandoffKind::Transfer));
    assert_eq!(context.return_to.as_deref(), Some("triage"));
    assert_eq!(context.last_user_message.as_deref(), Some("I'd like to check my balance"));
    let ask = client.turn().await;
    assert!(replies(&ask).iter().any(|r| r.contains("eight-digit account number")), "idv asks for details: {ask:?}");

    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(verified.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "perform_idv_check")));
    let memory = verified.iter().find_map(|m| match m {
        ServerMessage::MemoryUpdate { key, value } if key == "verifiedUser" => Some(value.clone()),
        _ => None,
    });
    let memory = memory.expect("the verified user is remembered");
    assert_eq!(memory["accountNumber"], "12345678");
    assert_eq!(memory["name"], "Ada Lovelace");
    assert!(
        verified.iter().any(
            |m| matches!(m, ServerMessage::WorkflowTransition { to, by, .. } if to == "choose" && by == "condition")
        )
    );
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");

    client.say("My balance please").await;
    let to_banking =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let context = to_banking.iter().find_map(|m| match m {
        ServerMessage::Handoff { to, context, .. } if to == "banking" => Some(context.clone()),
        _ => None,
    });
    let context = context.expect("idv transfers to banking");
    assert_eq!(context.return_to.as_deref(), Some("triage"), "the original return target is kept (tail call)");
    assert_eq!(context.verified_user.as_ref().map(|u| u["accountNumber"].clone()), Some("12345678".into()));
    assert_eq!(context.memory.get("verifiedUser").map(|u| u["name"].clone()), Some("Ada Lovelace".into()));
    let balance = client.turn().await;
    let result = balance.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "check_balance" => Some(result.clone()),
        _ => None,
    });
    assert_eq!(result.expect("check_balance ran")["balance"], 1234.56);
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");

    // The same question again within the tool's cacheTtlSeconds is served from the cache.
    client.say("What is my balance now?").await;
    let again = client.turn().await;
    assert!(
        again
            .iter()
            .any(|m| matches!(m, ServerMessage::ToolComplete { name, cached: true, .. } if name == "check_balance")),
        "{again:?}"
    );

    // Done: banking returns the customer to triage, the agent that started the chain.
    client.say("That's all, thanks").await;
    let back =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    let context = back.iter().find_map(|m| match m {
        ServerMessage::Handoff { from, to, kind: HandoffKind::Return, context }
            if from == "banking" && to == "triage" =>
        {
            Some(context.clone())
        }
        _ => None,
    });
    let context = context.expect("banking returns to triage");
    assert_eq!(context.status, Some(switchboard_core::ReturnStatus::Completed));
    assert!(context.summary.as_deref().is_some_and(|s| s.contains("That's all")), "{context:?}");
    let welcome = client.turn().await;
    assert!(replies(&welcome).iter().any(|r| r.starts_with("Welcome back")), "{welcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_sent_during_a_handoff_reach_the_next_agent() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), None).await;
    // Both lines are sent at once: the second waits in triage's queue while it hands off.
    client.say("I'd like to check my balance").await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let got = client.until(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")).await;
    assert!(got.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")));
    assert!(got.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "perform_idv_check")));
}

/// Local mode resumes like a cluster's gateway: a client that drops after its identity
/// check reconnects with its token and the last number it received, and its verified
/// caller still gets the balance; a token of no session is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reconnects_resumes_its_session_with_its_memory() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), None).await;
    client.verify_at_idv().await;
    let at = client.seen.iter().rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).expect("a start");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = client.seen[at].clone()
    else {
        panic!("local mode's bidi_connection_start carries a resume token and its number: {:?}", client.seen[at]);
    };
    let last_seq = seq + (client.seen.len() - at - 1) as u64;
    drop(client);

    let resume = |token: &str| {
        ClientMessage::SessionStart(SessionStart {
            resume_token: Some(token.to_owned()),
            last_seq: Some(last_seq),
            ..Default::default()
        })
    };
    let mut stranger = Client::connect(&running.url("")).await;
    stranger.send(&resume("0123456789abcdef")).await;
    assert_eq!(stranger.closed().await.0, close_code::RESUME_REFUSED, "{:?}", stranger.seen);

    let mut back = Client::connect(&running.url("")).await;
    back.send(&resume(&token)).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    back.say("My balance please").await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = back.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
}

/// Typed inputs are acknowledged by id: the user's line that takes each up carries the
/// input's id — the runtime's own for a client straight at it, the client's own through
/// the gateway (which gives the runtime ids of its own) — so two identical lines, the
/// second queued behind the first, are told apart; a line without an id gets none back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_echo_of_a_typed_input_carries_its_id() {
    let running = common::banking(ServerConfig::default()).await;
    let typed = |id: Option<&str>| ClientMessage::BidiTextInput { text: "Hello".into(), id: id.map(str::to_owned) };
    let echoes = |seen: &[ServerMessage]| -> Vec<Option<String>> {
        seen.iter()
            .filter_map(|m| match m {
                ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text, input_id, .. } => {
                    assert_eq!(text, "Hello");
                    Some(input_id.clone())
                }
                _ => None,
            })
            .collect()
    };
    for (mut client, through) in [
        (running.runtime_client("").await, "the runtime"),
        (Client::start(&running.url(""), None).await, "the gateway"),
    ] {
        client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
        client.send(&typed(Some("a"))).await;
        client.send(&typed(Some("a-2"))).await;
        client.send(&typed(None)).await;
        for _ in 0..3 {
            client.turn().await;
        }
        assert_eq!(echoes(&client.seen), [Some("a".to_owned()), Some("a-2".to_owned()), None], "through {through}");
    }
}
