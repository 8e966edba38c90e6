//! Admitting a session that was under way: the parked session a resume token names (taken
//! out of the resume store) and the ended session a `continue_from` names (claimed from the
//! conversation record's state), each only for the credential that held it and within its
//! scope.

use std::sync::PoisonError;
use std::time::Duration;

use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};

use super::machine::Close;
use super::{Client, continuation, driver, refuse, refuse_as};
use crate::Gateway;
use crate::auth::Admission;
use crate::directory::Reach;
use crate::resume::{self, Parked, Taken};

/// The ended session `from` to continue, from the conversation record's state for it, with
/// the Agent it was with: only for the credential that held it and with `token`, the newest
/// resume token its client received, which this uses up (a refusal says the same whether
/// the session is unknown, expired, another's or the token wrong or used), within its
/// scope. Who the caller was does not come back ([`continuation::forget_identity`]).
pub(super) async fn continued(
    gateway: &Gateway,
    from: &str,
    token: &str,
    identity: &str,
    admission: &Admission,
    client: &mut Client,
) -> Result<(Parked, crate::directory::Target), Close> {
    let unknown = || {
        ServerMessage::error(
            ErrorCode::ResumeRefused,
            format!(
                "session {from} cannot be continued: it is unknown, its state has expired, it is not this credential's, \
                 or session_start.continue_token is not the newest resume_token that session's client received \
                 (each works once); start a new session"
            ),
            false,
        )
    };
    let Some(record) = &gateway.record else {
        let message = ServerMessage::error(
            ErrorCode::ResumeRefused,
            "this gateway keeps no conversation record, so sessions cannot be continued; start a new session",
            false,
        );
        return Err(refuse(gateway, client, "continue_refused", message, close_code::RESUME_REFUSED).await);
    };
    // No token, no continuing (and nothing asked of the store).
    if token.is_empty() || (identity.is_empty() && !gateway.auth.continues_without_credential()) {
        return Err(refuse(gateway, client, "continue_refused", unknown(), close_code::RESUME_REFUSED).await);
    }
    let since = crate::record::now_us() / 1000 - i64::try_from(record.state_ttl().as_millis()).unwrap_or(i64::MAX);
    let saved = match record.store.claim_state(from, &resume::store_key(identity, token), since).await {
        Ok(Some(saved)) if saved.credential == identity => saved,
        Ok(_) => {
            return Err(refuse(gateway, client, "continue_refused", unknown(), close_code::RESUME_REFUSED).await);
        }
        Err(error) => {
            tracing::warn!("continue: {error}");
            let message =
                ServerMessage::error(ErrorCode::StoreUnavailable, format!("{error}; try again shortly"), false);
            return Err(refuse(gateway, client, "store_unavailable", message, close_code::TRY_AGAIN_LATER).await);
        }
    };
    let mut parked: Parked = match resume::open_text(&gateway.key, &resume::continue_key(from, identity), &saved.sealed)
    {
        Ok(parked) => parked,
        Err(error) => {
            tracing::warn!(session_id = %from, "continue refused: {error}");
            gateway.metrics.refused.with_label_values(&["session_tampered"]).inc();
            return Err(refuse(gateway, client, "continue_refused", unknown(), close_code::RESUME_REFUSED).await);
        }
    };
    continuation::restore(&mut parked.kept, saved.summary.as_deref(), continuation::CONTINUE_TURNS);
    let forgotten = {
        let directory = gateway.directory.borrow();
        let namespace = parked.namespace.clone();
        continuation::forget_identity(&mut parked, directory.table().identity_keys(&namespace))
    };
    if !forgotten.is_empty() {
        tracing::info!(session_id = %from, keys = ?forgotten, "continued: the caller is verified again");
    }
    if let Err(refusal) = allowed(admission, &parked) {
        return Err(refuse_as(gateway, client, refusal).await);
    }
    let Some(target) = gateway.directory.borrow().lookup(&parked.namespace, &parked.agent, parked.reach) else {
        let message = format!("the agent {}/{} this session was with no longer exists", parked.namespace, parked.agent);
        let message = ServerMessage::error(ErrorCode::UnknownAgent, message, false);
        return Err(refuse(gateway, client, "unknown_agent", message, close_code::UNKNOWN_AGENT).await);
    };
    Ok((parked, target))
}

/// Whether the credential may resume or continue `parked`: a session of a namespace its
/// scope reaches, and a test session only if it may still test.
pub(super) fn allowed(admission: &Admission, parked: &Parked) -> Result<(), crate::auth::Refusal> {
    admission.allow_namespace(&parked.namespace)?;
    if parked.reach == Reach::Candidates {
        admission.allow_candidates()?;
    }
    Ok(())
}

/// Takes the session parked under `key` out of the store. A session still attached here
/// whose client is back on a new socket is detached (the old socket is dead); one still
/// held or finishing its turn is waited for.
pub(super) async fn take_parked(gateway: &Gateway, key: &str, client: &mut Client) -> Result<Parked, Close> {
    // A token that rotated since (a handoff) names the session by its newest key.
    let key = match gateway.store.resolve(key).await {
        Ok(key) => key,
        Err(error) => return Err(store_failed(gateway, client, error).await),
    };
    if let Some(attached) = gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        attached.cancel();
    }
    let config = &gateway.config;
    // Long enough for the holder to park it, or — should the holder have died — for its
    // hold's lease to lapse.
    let wait = (config.park_grace + Duration::from_secs(5)).max(driver::keeper::lease(config) + Duration::from_secs(2));
    match gateway.store.take(&key, wait).await {
        Ok(Taken::Parked(parked)) => Ok(*parked),
        Ok(Taken::Held) => {
            let message =
                "the session is still attached to another connection of yours; close it, or resume again shortly";
            let message = ServerMessage::error(ErrorCode::SessionAttached, message, false);
            Err(refuse(gateway, client, "session_attached", message, close_code::TRY_AGAIN_LATER).await)
        }
        Ok(Taken::Unknown) => {
            let message = format!(
                "the resume token is unknown or expired (a session waits {} s for its client, and each \
                 bidi_connection_start brings a new token); start a new session without resume_token",
                config.resume_window.as_secs()
            );
            let message = ServerMessage::error(ErrorCode::ResumeRefused, message, false);
            Err(refuse(gateway, client, "resume_refused", message, close_code::RESUME_REFUSED).await)
        }
        Err(error) => Err(store_failed(gateway, client, error).await),
    }
}

/// Refuses a resume the store failed: a tampered entry for good, an unavailable store
/// for now.
async fn store_failed(gateway: &Gateway, client: &mut Client, error: resume::StoreError) -> Close {
    if let resume::StoreError::Tampered = error {
        tracing::warn!("resume refused: {error}");
        gateway.metrics.refused.with_label_values(&["session_tampered"]).inc();
        let message = format!("{error}; start a new session without resume_token");
        let message = ServerMessage::error(ErrorCode::ResumeRefused, message, false);
        return refuse(gateway, client, "resume_refused", message, close_code::RESUME_REFUSED).await;
    }
    tracing::warn!("resume: {error}");
    let message = ServerMessage::error(ErrorCode::StoreUnavailable, format!("{error}; try again shortly"), false);
    refuse(gateway, client, "store_unavailable", message, close_code::TRY_AGAIN_LATER).await
}
