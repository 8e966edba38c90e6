//! The bundled banking script drives a whole conversation across the Example Bank agents
//! through the real SDK: triage -> idv -> banking, with tool calls and results.

use serde_json::json;
use switchboard_models::{
    CollectedReply, ContentBlock, Message, ModelRequest, Role, StopReason, TextModel, ToolResult, ToolResultStatus,
    collect_reply,
};
use switchboard_sim::banking_script;
use switchboard_sim::script::Timing;

use crate::common::{MODEL, model, start, tool};

fn agent_request(system: &str, tools: &[&str], messages: &[Message]) -> ModelRequest {
    let mut request = ModelRequest::new(MODEL, messages.to_vec());
    request.system = system.to_owned();
    request.tools = tools.iter().map(|t| tool(t)).collect();
    request
}

async fn turn(model: &dyn TextModel, request: &ModelRequest) -> CollectedReply {
    collect_reply(model.stream(request)).await.expect("the turn succeeds")
}

fn assistant(reply: &CollectedReply) -> Message {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(ContentBlock::Text(reply.text.clone()));
    }
    content.extend(reply.tool_uses.iter().cloned().map(ContentBlock::ToolUse));
    Message { role: Role::Assistant, content }
}

fn result(reply: &CollectedReply, content: serde_json::Value) -> Message {
    let call = &reply.tool_uses[0];
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: call.id.clone(),
            content,
            status: ToolResultStatus::Success,
        })],
    }
}

#[tokio::test]
async fn banking_conversation_end_to_end() {
    let mut script = banking_script().expect("bundled script parses");
    script.timing = Timing::instant();
    let sim = start(script).await;
    let model = model(&sim).await;
    let model = model.as_ref();

    // Triage hands account questions to identity verification.
    let triage = "You are Ava, the first point of contact. What we know so far: nothing";
    let mut history = vec![Message::user_text("Hi, I'd like to check my balance")];
    let reply = turn(model, &agent_request(triage, &["transfer_to_idv"], &history)).await;
    assert_eq!(reply.tool_uses.first().map(|t| t.name.as_str()), Some("transfer_to_idv"), "{reply:?}");

    // IDV asks for details, then checks them.
    let idv = "You are Max from security. What we know so far: nothing";
    let idv_tools = ["perform_idv_check", "transfer_to_banking", "transfer_to_disputes"];
    let reply = turn(model, &agent_request(idv, &idv_tools, &history)).await;
    assert!(reply.tool_uses.is_empty() && reply.text.contains("full name"), "{reply:?}");
    history.push(assistant(&reply));
    history.push(Message::user_text("My name is Ada Lovelace, account number 12345678, sort code 12-34-56"));
    let reply = turn(model, &agent_request(idv, &idv_tools, &history)).await;
    let call = reply.tool_uses.first().expect("an identity check");
    assert_eq!(call.name, "perform_idv_check");
    assert_eq!(call.input, json!({ "name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56" }));
    history.push(assistant(&reply));
    history.push(result(
        &reply,
        json!({ "verified": true, "user": { "name": "Ada Lovelace", "accountNumber": "12345678" } }),
    ));
    let reply = turn(model, &agent_request(idv, &idv_tools, &history)).await;
    assert!(reply.text.contains("verified"), "{reply:?}");
    history.push(assistant(&reply));

    // Verified: the memory in the system prompt carries the account number.
    let idv_verified = "You are Max from security. What we know so far: verifiedUser={\"accountNumber\":\"12345678\"}";
    history.push(Message::user_text("My balance please"));
    let reply = turn(model, &agent_request(idv_verified, &idv_tools, &history)).await;
    assert_eq!(reply.tool_uses.first().map(|t| t.name.as_str()), Some("transfer_to_banking"), "{reply:?}");

    // Banking checks the balance and reads the result back. The scripted model names no
    // account: the runtime fills in the verified caller's (the tools' `bind`).
    let banking = "You are the banking assistant. What we know so far: verifiedUser={\"accountNumber\":\"12345678\"}";
    let banking_tools = ["check_balance", "get_transactions", "transfer_to_disputes"];
    let reply = turn(model, &agent_request(banking, &banking_tools, &history)).await;
    let call = reply.tool_uses.first().expect("a balance check");
    assert_eq!((call.name.as_str(), &call.input), ("check_balance", &json!({})));
    history.push(assistant(&reply));
    history.push(result(&reply, json!({ "balance": 1234.56, "currency": "GBP" })));
    let reply = turn(model, &agent_request(banking, &banking_tools, &history)).await;
    assert!(reply.text.starts_with("Your balance is 1234.56 GBP."), "{reply:?}");
    assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));
    history.push(assistant(&reply));

    // A disputed payment goes to the disputes agent.
    history.push(Message::user_text("I want to dispute a payment"));
    let reply = turn(model, &agent_request(banking, &banking_tools, &history)).await;
    assert_eq!(reply.tool_uses.first().map(|t| t.name.as_str()), Some("transfer_to_disputes"), "{reply:?}");

    // Disputes looks up the payments and names the latest one.
    let disputes = "You handle disputed payments. What we know so far: verifiedUser={\"accountNumber\":\"12345678\"}";
    let disputes_tools = ["get_transactions", "open_dispute"];
    let reply = turn(model, &agent_request(disputes, &disputes_tools, &history)).await;
    let call = reply.tool_uses.first().expect("a transactions lookup");
    assert_eq!((call.name.as_str(), &call.input), ("get_transactions", &json!({ "limit": 5 })));
    history.push(assistant(&reply));
    let payments = json!({ "transactions": [{ "id": "TX42", "description": "Coffee Hut", "amount": -3.2 }] });
    history.push(result(&reply, payments));
    let reply = turn(model, &agent_request(disputes, &disputes_tools, &history)).await;
    assert!(reply.text.contains("Coffee Hut for -3.2, reference TX42"), "{reply:?}");
    sim.shutdown().await;
}
