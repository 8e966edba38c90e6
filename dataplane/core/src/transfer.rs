//! Putting a caller through to a person (`spec.telephony.people`): the built-in
//! [`TRANSFER_TO_PERSON_TOOL`] the model is offered, and what a call of it asks of the
//! client. The core cannot transfer a call itself — the client (the SIP edge) does, and
//! says how it went with `transfer_result` — so a call of this tool is planned here into a
//! [`ServerMessage::TransferRequest`] and waits, like a running tool, for that answer (or
//! for its deadline: the ring timeout plus [`REPORT_GRACE`]).

use std::time::Duration;

use switchboard_crds::agent::{TRANSFER_TO_PERSON_TOOL, Telephony, TransferMode};

use crate::model::ToolDefinition;
use crate::protocol::ServerMessage;
use crate::tools::{FailureKind, ToolFailure};

/// How long past the ring timeout the core waits for the client's `transfer_result`
/// before the transfer ends as unanswered (the client may be a WebSocket client that
/// cannot transfer and ignores the request).
pub const REPORT_GRACE: Duration = Duration::from_secs(15);

/// The tool offered to an Agent that lists people; `None` when it lists none.
pub fn tool(telephony: &Telephony) -> Option<ToolDefinition> {
    if telephony.people.is_empty() {
        return None;
    }
    let names: Vec<&str> = telephony.people.iter().map(|p| p.name.as_str()).collect();
    let list: Vec<String> = telephony
        .people
        .iter()
        .map(|p| {
            let warm = if p.transfer == TransferMode::Warm { " (warm: you brief them first)" } else { "" };
            if p.description.is_empty() {
                format!("{}{warm}", p.name)
            } else {
                format!("{}{warm}: {}", p.name, p.description)
            }
        })
        .collect();
    Some(ToolDefinition {
        name: TRANSFER_TO_PERSON_TOOL.to_owned(),
        description: format!(
            "Put the caller through to a person when they ask for one or you cannot help. Tell the caller first; \
             the call leaves you if the person answers (for a warm transfer, once you have told the person who \
             is calling and why). If it fails (busy, no answer, declined, unreachable) you get \
             an error saying which: tell the caller and offer what you can. People: {}",
            list.join("; ")
        ),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "person": { "type": "string", "enum": names, "description": "Who to put the caller through to." },
                "reason": { "type": "string", "description": "Why, in a few words (kept in the record)." }
            },
            "required": ["person"]
        }),
    })
}

/// A transfer the model asked for, checked against the Agent's people.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The person's name.
    pub person: String,
    /// What goes to the client.
    pub request: ServerMessage,
    /// How long the core waits for the client's answer.
    pub patience: Duration,
}

/// Plans call `tool_use_id` of the transfer tool with the model's `input`: the request for
/// the client, or why not (an unknown person: `invalid_input`, naming who can be asked for).
pub fn plan(telephony: &Telephony, tool_use_id: &str, input: &serde_json::Value) -> Result<Planned, ToolFailure> {
    let asked = input.get("person").and_then(serde_json::Value::as_str).unwrap_or_default();
    let Some(person) = telephony.person(asked) else {
        let names: Vec<&str> = telephony.people.iter().map(|p| p.name.as_str()).collect();
        return Err(ToolFailure::new(
            FailureKind::InvalidInput,
            format!(
                "there is no person called {asked:?} to put the caller through to; choose one of: {}",
                names.join(", ")
            ),
        ));
    };
    let reason: String =
        input.get("reason").and_then(serde_json::Value::as_str).unwrap_or_default().chars().take(500).collect();
    let timeout_seconds = telephony.transfer_timeout();
    Ok(Planned {
        person: person.name.clone(),
        request: ServerMessage::TransferRequest {
            tool_use_id: tool_use_id.to_owned(),
            person: person.name.clone(),
            address: person.address.clone(),
            reason,
            timeout_seconds,
            warm: person.transfer == TransferMode::Warm,
        },
        patience: Duration::from_secs(u64::from(timeout_seconds)) + REPORT_GRACE,
    })
}

#[cfg(test)]
mod tests {
    use switchboard_crds::agent::Person;

    use super::*;

    fn telephony() -> Telephony {
        Telephony {
            people: vec![
                Person {
                    name: "advisor".into(),
                    address: "+442079460001".into(),
                    description: "Accounts".into(),
                    transfer: Default::default(),
                },
                Person {
                    name: "fraud".into(),
                    address: "sip:fraud@pbx".into(),
                    description: String::new(),
                    transfer: Default::default(),
                },
            ],
            transfer_timeout_seconds: Some(20),
            ..Telephony::default()
        }
    }

    #[test]
    fn the_tool_names_the_people_and_only_exists_with_some() {
        assert_eq!(tool(&Telephony::default()), None);
        let tool = tool(&telephony()).expect("a tool");
        assert_eq!(tool.name, "transfer_to_person");
        assert_eq!(tool.input_schema["properties"]["person"]["enum"], serde_json::json!(["advisor", "fraud"]));
        assert!(tool.description.contains("advisor: Accounts") && tool.description.contains("fraud"));
    }

    #[test]
    fn a_known_person_is_a_request_and_an_unknown_one_a_clear_error() {
        let planned =
            plan(&telephony(), "t1", &serde_json::json!({"person": "advisor", "reason": "asked"})).expect("planned");
        assert_eq!(planned.patience, Duration::from_secs(35));
        assert_eq!(
            planned.request,
            ServerMessage::TransferRequest {
                tool_use_id: "t1".into(),
                person: "advisor".into(),
                address: "+442079460001".into(),
                reason: "asked".into(),
                timeout_seconds: 20,
                warm: false,
            }
        );
        let refused = plan(&telephony(), "t2", &serde_json::json!({"person": "boss"})).expect_err("unknown");
        assert_eq!(refused.kind, FailureKind::InvalidInput);
        assert!(refused.message.contains("advisor, fraud"), "{refused}");
    }
}
