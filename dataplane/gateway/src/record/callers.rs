//! The caller across sessions, restored: when the gateway opens a runtime session for a
//! verified caller — the Agent a verifying Agent hands the caller to, a move to another
//! pod, a resumed or continued session — it reads what the store keeps of that caller
//! ([`super::store::callers`]) and adds it to the memory the signed `session_start`
//! carries: the caller's memory keys (`callerPreferences`, `callerOpenTasks`, ...) and
//! `callerHistory`, the record's summaries of its latest past sessions. The runtime
//! renders memory into the prompt (`{memory}`), so the persona uses them from its first
//! reply. A key the session already holds keeps the session's value (it is newer). The
//! caller's id goes to the session's record log ([`super::SessionLog::verified`]), so a
//! session resumed or continued after its verification keeps the caller's keys too.
//!
//! The runtime session in which the caller is verified does not get them: the gateway
//! adds memory only when it opens a session. Reading the store waits at most
//! [`RESTORE_WAIT`]; a store that does not answer in time opens the session without them
//! (logged): a conversation is never held up for its history.

use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_core::assertion::IDENTITY_KEY;

use super::Recorder;
use super::store::callers::{self, CallerState};
use crate::upstream::Opening;

/// The longest the store is waited for.
pub const RESTORE_WAIT: Duration = Duration::from_secs(1);

/// Adds what the store keeps of the verified caller of `opening` (if any) to its memory;
/// the caller's id in the store, when there is a verified caller.
pub async fn restore(recorder: &Recorder, opening: &mut Opening<'_>) -> Option<String> {
    let memory = match opening.carried.handoff.as_mut() {
        Some(handoff) => &mut handoff.memory,
        None => &mut opening.carried.memory,
    };
    let caller = memory.get(IDENTITY_KEY).filter(|caller| !caller.is_null())?;
    let id = callers::caller_id(opening.namespace, caller);
    match tokio::time::timeout(RESTORE_WAIT, recorder.store.caller(&id, opening.session_id)).await {
        Ok(Ok(Some(state))) => merge(memory, state),
        Ok(Ok(None)) => {}
        Ok(Err(error)) => {
            tracing::warn!(session_id = %opening.session_id, "the caller's state is not restored: {error}");
        }
        Err(_) => {
            tracing::warn!(
                session_id = %opening.session_id,
                "the caller's state is not restored: the store did not answer within {} ms",
                RESTORE_WAIT.as_millis()
            );
        }
    }
    Some(id)
}

/// Adds `state` to `memory`, keeping the keys `memory` already holds.
fn merge(memory: &mut BTreeMap<String, serde_json::Value>, state: CallerState) {
    for (key, value) in state.into_memory() {
        memory.entry(key).or_insert(value);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::record::store::callers::PastSession;

    #[test]
    fn the_session_keeps_its_own_newer_values_and_gains_the_rest() {
        let mut memory: BTreeMap<String, serde_json::Value> =
            [("callerPreferences".to_owned(), json!({"verbosity": "detailed"}))].into();
        let state = CallerState {
            memory: [
                ("callerPreferences".to_owned(), json!({"verbosity": "brief"})),
                ("callerOpenTasks".to_owned(), json!(["card replacement"])),
            ]
            .into(),
            history: vec![PastSession { started_at: 5, summary: "Asked for a balance.".into() }],
        };
        merge(&mut memory, state);
        assert_eq!(memory["callerPreferences"], json!({"verbosity": "detailed"}));
        assert_eq!(memory["callerOpenTasks"], json!(["card replacement"]));
        assert_eq!(memory["callerHistory"], json!([{"started_at": 5, "summary": "Asked for a balance."}]));
    }
}
