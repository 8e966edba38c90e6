//! Display content (issue 42): the Example Bank's banking agent shows the caller's recent
//! transactions as a card (its `show_card` built-in) while it says the newest, through the
//! real gateway and runtime processes; the card reaches the WebSocket client whole, and the
//! record keeps it.

use switchboard_core::protocol::ServerMessage;

use crate::client::{Client, replies};
use crate::fleet::Fleet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bank_shows_recent_transactions_as_a_card_on_the_websocket_client() {
    let fleet = Fleet::start(&[]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.verify_at_idv().await;
    client.say("Show me my recent transactions").await;
    let seen = client.until(|m| matches!(m, ServerMessage::DisplayCard { .. })).await;
    let Some(ServerMessage::DisplayCard { tool_use_id, card }) = seen.last().cloned() else {
        unreachable!("until returns the match last")
    };
    assert_eq!(card.title, "Recent transactions");
    let fields: Vec<(&str, &str)> = card.fields.iter().map(|f| (f.label.as_str(), f.value.as_str())).collect();
    assert_eq!(fields, [("Streamly subscription", "-49.99"), ("Corner Cafe", "-3.4")]);
    let link = card.link.as_ref().expect("a link");
    assert_eq!((link.label.as_str(), link.url.as_str()), ("All transactions", "https://bank.example/transactions"));
    // The agent said the newest while the card went up, and goes on once it is shown.
    assert!(replies(&seen).iter().any(|r| r.contains("Streamly subscription")), "{:?}", replies(&seen));
    let turn = client.turn().await;
    assert!(
        turn.iter().any(|m| matches!(m, ServerMessage::ToolComplete { tool_use_id: id, .. } if *id == tool_use_id)),
        "{turn:?}"
    );
    assert!(replies(&turn).iter().any(|r| r.starts_with("I've put them on your screen")), "{:?}", replies(&turn));
}
