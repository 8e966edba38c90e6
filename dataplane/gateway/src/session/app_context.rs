//! A new session's context from the host app's backend (`session_start.app_context`): the
//! token checked ([`crate::auth::AppContextKeys`]: signature, issuer, audience, lifetime,
//! and — where the gateway binds tokens to their client — that it names the client's
//! credential), its id spent once, then what the Agent takes of it as the session's memory.
//!
//! The id is spent once across every replica when the gateway shares a store (Redis,
//! [`crate::resume::Store::take_once`]), once on this replica otherwise. A shared store
//! that does not answer refuses the token (`store_unavailable`, 1013: try again) rather
//! than risk a token opening a session on each replica.

use std::time::{SystemTime, UNIX_EPOCH};

use switchboard_core::protocol::ServerMessage;

use super::{Client, Close};
use crate::Gateway;
use crate::auth::{Admission, AppContextError, Checked};

/// Where a token's spent id is kept in a shared store.
const SPENT: &str = "switchboard:app-context:jti:";

/// The session memory a new session at `target` starts with from the app backend's
/// context `token`, presented by the client `admission` admitted: what the Agent takes of
/// it (`spec.appContext`), the caller only where it trusts the app for identity. Counted
/// by what became of the caller.
pub(super) async fn memory(
    gateway: &Gateway,
    admission: &Admission,
    target: &crate::directory::Target,
    session_id: &str,
    token: &str,
) -> Result<std::collections::BTreeMap<String, serde_json::Value>, AppContextError> {
    let checked = gateway.auth.app_context(token, admission.subject())?;
    spend(gateway, &checked).await?;
    let route = &target.route;
    let taken = {
        let directory = gateway.directory.borrow();
        checked.claims.taken(
            &route.app_context,
            &route.identity_keys,
            directory.table().identity_keys(&route.namespace),
        )
    };
    let agent = format!("{}/{}", route.namespace, route.name);
    let caller = match (taken.caller, taken.caller_left_out) {
        (true, _) => "verified",
        (false, true) => "not_trusted",
        (false, false) => "none",
    };
    gateway.metrics.app_context.with_label_values(&[&agent, caller]).inc();
    tracing::info!(
        %session_id, %agent, caller, taken = ?taken.memory.keys().collect::<Vec<_>>(), left_out = ?taken.left_out,
        "session context from the app's backend"
    );
    Ok(taken.memory)
}

/// Spends the id of a `checked` token: in the shared store while the token lives (every
/// replica sees it), else in this process.
async fn spend(gateway: &Gateway, checked: &Checked) -> Result<(), AppContextError> {
    if !gateway.store.is_shared() {
        return gateway.auth.take_app_context_here(checked);
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let key = format!("{SPENT}{}", checked.jti);
    match gateway.store.take_once(&key, checked.remember_for(now)).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(AppContextError::Replayed),
        Err(error) => {
            tracing::warn!("app context refused: its id cannot be checked: {error}");
            Err(AppContextError::Unavailable(error.to_string()))
        }
    }
}

/// Refuses a session whose `session_start.app_context` is not taken.
pub(super) async fn refuse(gateway: &Gateway, client: &mut Client, error: AppContextError) -> Close {
    let code = error.code();
    let reason = code.metric_label();
    let message = ServerMessage::error(code, error.to_string(), false);
    super::refuse(gateway, client, reason, message, error.close_code()).await
}
