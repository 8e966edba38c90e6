//! Scoped credentials through the gateway: an API key may start sessions only at the
//! Agents its `agents=` lists, and resume them only in those namespaces — while a
//! session it started still follows its Agents' handoffs and resumes wherever it was
//! handed. Real runtime processes; the client talks to the gateway only.

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_gateway::auth::Auth;

use crate::client::Client;
use crate::fleet::Fleet;

fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn resume(seen: &[ServerMessage]) -> ClientMessage {
    let at = seen.iter().rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).expect("a start");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = &seen[at] else {
        panic!("a token and a number: {:?}", seen[at]);
    };
    ClientMessage::SessionStart(SessionStart {
        resume_token: Some(token.clone()),
        last_seq: Some(seq + (seen.len() - at - 1) as u64),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_key_starts_only_at_its_agents_and_its_sessions_still_follow_handoffs() {
    let keys = format!(
        "front {} agents=bank/triage\nshop {} sessions=5 agents=shop/*,*/till\n",
        digest("front-key"),
        digest("shop-key")
    );
    let fleet = Fleet::with_auth(&[], Auth::new(Some(&keys), vec![]).expect("keys")).await;

    // The shop's key reaches no Agent of the bank: not the default, not one named.
    for agent in [None, Some("bank/triage"), Some("triage")] {
        let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "shop-key")]).await;
        client
            .send(&ClientMessage::SessionStart(SessionStart { agent: agent.map(Into::into), ..Default::default() }))
            .await;
        let (code, _) = client.closed().await;
        assert_eq!(code, close_code::NOT_EXPOSED, "{agent:?}: {:?}", client.seen);
        let message = client
            .seen
            .iter()
            .find_map(|m| match m {
                ServerMessage::BidiError { code, message, .. } if code == "agent_not_allowed" => Some(message.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{agent:?}: agent_not_allowed, {:?}", client.seen));
        assert!(message.contains("may not reach bank/triage") && message.contains("shop/*, */till"), "{message}");
        assert!(
            !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })),
            "no runtime session was opened"
        );
    }

    // The front desk's key starts at triage, is handed to idv (not in its list: handoffs
    // are the Agents' business) and resumes there after a dropped socket.
    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "front-key")]).await;
    client.send(&ClientMessage::SessionStart(SessionStart::default())).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    let back_again = resume(&client.seen);
    drop(client);
    let mut back = Client::connect_with(&fleet.url, &[("x-api-key", "front-key")]).await;
    back.send(&back_again).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    back.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = back.turn().await;
    assert!(
        crate::client::replies(&verified).iter().any(|r| r.contains("you're verified")),
        "the session goes on at idv: {verified:?}"
    );
    let metrics = fleet.gateway.metrics.render();
    assert!(
        metrics.contains("switchboard_gateway_sessions_refused_total{reason=\"agent_not_allowed\"} 3"),
        "each refusal counted"
    );
}
