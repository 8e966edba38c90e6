//! Sessions: I/O independence (determinism), serialized execution, state persistence,
//! memory restore and cleanup, missing configuration, the context-window guard.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::context::{estimate_tokens, is_turn_start, message_len};
use switchboard_core::model::Role;
use switchboard_core::{AgentCore, ConfigError, Effect, Input};

use crate::common::{self, model_calls, says};

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-zA-Z ,.!?]{1,40}", 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The core does no I/O: the same inputs give the same effects, every time.
    #[test]
    fn io_independence(turns in texts()) {
        let now = Instant::now();
        let run = || {
            let (mut session, mut all) = common::start("triage", BTreeMap::new());
            for text in &turns {
                all.extend(session.handle(Input::user_text(text.clone()), now));
                all.extend(says(&mut session, &format!("echo {text}"), now));
            }
            all
        };
        prop_assert_eq!(run(), run());
    }

    /// Two inputs never race: while a turn runs, further input is queued, and exactly one
    /// model call is outstanding at a time.
    #[test]
    fn serialized_execution(turns in texts()) {
        let now = Instant::now();
        let (mut session, _) = common::start("triage", BTreeMap::new());
        let mut outstanding = 0usize;
        for text in &turns {
            outstanding += model_calls(&session.handle(Input::user_text(text.clone()), now)).len();
            prop_assert!(outstanding <= 1);
        }
        prop_assert_eq!(session.queued(), turns.len() - 1);
        for _ in 0..turns.len() {
            prop_assert_eq!(outstanding, 1);
            outstanding -= 1;
            outstanding += model_calls(&says(&mut session, "ok", now)).len();
        }
        prop_assert_eq!(outstanding, 0);
        prop_assert!(!session.is_busy());
        let users = session.messages().iter().filter(|m| m.role == Role::User).count();
        prop_assert_eq!(users, turns.len(), "every input became its own turn");
    }

    /// Memory handed over at start persists across turns and is injected into every prompt.
    #[test]
    fn memory_restore_and_persistence(account in "[0-9]{8}", turns in texts()) {
        let now = Instant::now();
        let (mut session, _) = common::start("banking", common::verified_memory(&account));
        for text in &turns {
            let effects = session.handle(Input::user_text(text.clone()), now);
            let request = model_calls(&effects)[0];
            prop_assert!(request.system.contains(&account), "memory is in the prompt");
            prop_assert!(request.system.contains("Ada Lovelace"));
            says(&mut session, "fine", now);
            prop_assert_eq!(session.memory().get("verifiedUser").map(|v| v["accountNumber"].clone()), Some(account.clone().into()));
        }
    }

    /// Ending a session clears its memory, and the session accepts nothing more.
    #[test]
    fn memory_cleanup(account in "[0-9]{8}", text in "[a-z ]{1,20}") {
        let now = Instant::now();
        let (mut session, _) = common::start("banking", common::verified_memory(&account));
        let effects = session.handle(Input::End, now);
        prop_assert!(effects.iter().any(|e| matches!(e, Effect::Close { .. })), "the session closes");
        prop_assert!(session.memory().is_empty());
        prop_assert!(session.is_over());
        let after = session.handle(Input::user_text(text), now);
        prop_assert!(model_calls(&after).is_empty());
    }

    /// Specs missing what the core needs are refused with a specific error.
    #[test]
    fn missing_configuration_errors(which in 0usize..4, name in "[a-z]{3,10}") {
        let mut spec = common::spec("idv");
        let expected = match which {
            0 => { spec.workflow.spec.entry = format!("missing_{name}"); "entry" }
            1 => { spec.workflow.spec.nodes[1].tools.push(format!("tool_{name}")); "node tool" }
            2 => { spec.handoffs.clear(); "handoff target" }
            _ => { spec.tools[0].http = None; "target" }
        };
        let error = AgentCore::new(spec).expect_err("refused");
        let ok = match (which, &error) {
            (0, ConfigError::MissingEntry { .. }) => true,
            (1, ConfigError::UnknownNodeTool { tool, .. }) => tool == &format!("tool_{name}"),
            (2, ConfigError::UnknownHandoffTarget { .. }) => true,
            (3, ConfigError::ToolTarget { .. }) => true,
            _ => false,
        };
        prop_assert!(ok, "{expected}: {error}");
    }

    /// Near the context budget older turns are compacted: the conversation sent stays
    /// under the budget, starts with a user turn, and the summary reaches the prompt.
    #[test]
    fn context_guard_keeps_requests_under_budget(sizes in prop::collection::vec(200usize..1500, 8..30)) {
        let now = Instant::now();
        let mut spec = common::spec("triage");
        spec.model.context_tokens = Some(1024);
        let core = std::sync::Arc::new(AgentCore::new(spec).expect("runnable"));
        let (mut session, _) = switchboard_core::Session::start(core, common::init(BTreeMap::new()));
        let mut compacted = false;
        for (i, size) in sizes.iter().enumerate() {
            let text = format!("turn {i} {}", "w".repeat(*size));
            let effects = session.handle(Input::user_text(text), now);
            let request = model_calls(&effects)[0];
            prop_assert!(is_turn_start(&request.messages[0]));
            let total = request.system.len() + request.messages.iter().map(message_len).sum::<usize>();
            prop_assert!(estimate_tokens(total) <= 1024 + estimate_tokens(*size) + 64, "under budget (plus the turn in progress)");
            compacted |= request.system.contains("Summary of the earlier conversation");
            says(&mut session, &"r".repeat(size / 2), now);
        }
        prop_assert!(compacted, "a long conversation was compacted");
    }
}

/// The user's final lines and the errors refusing typed inputs, as `(text or code, input_id)`.
fn acknowledgements(effects: &[Effect]) -> Vec<(String, Option<String>)> {
    use switchboard_core::protocol::{ServerMessage, TranscriptRole};
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(ServerMessage::BidiTranscriptStream {
                role: TranscriptRole::User, text, input_id, ..
            }) => Some((text.clone(), input_id.clone())),
            Effect::Send(ServerMessage::BidiError { code, input_id, .. }) => Some((code.to_string(), input_id.clone())),
            _ => None,
        })
        .collect()
}

/// Typed inputs are acknowledged by id: two identical ones, one queued behind the other,
/// are each taken up with their own id, and one refused for a full queue says which.
#[test]
fn typed_inputs_are_taken_up_and_refused_by_their_id() {
    let now = Instant::now();
    let (mut session, _) = common::start("triage", BTreeMap::new());
    let typed = |text: &str, id: &str| Input::UserText { text: text.into(), id: Some(id.into()) };
    let first = session.handle(typed("hello", "a"), now);
    assert_eq!(acknowledgements(&first), [("hello".to_owned(), Some("a".to_owned()))]);
    assert!(session.handle(typed("hello", "b"), now).is_empty(), "queued behind the turn under way");
    for n in 1..switchboard_core::MAX_QUEUED_INPUTS {
        session.handle(Input::user_text(format!("more {n}")), now);
    }
    let refused = session.handle(typed("one too many", "c"), now);
    assert_eq!(acknowledgements(&refused), [("busy".to_owned(), Some("c".to_owned()))]);
    let next = says(&mut session, "Hi!", now);
    assert_eq!(acknowledgements(&next), [("hello".to_owned(), Some("b".to_owned()))], "the queued one, its id");
    let after = says(&mut session, "Hi again!", now);
    assert_eq!(acknowledgements(&after), [("more 1".to_owned(), None)], "no id, none back");
}
