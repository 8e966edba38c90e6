//! How a session leaves its relay task: ended (the client is told, nothing waits for a
//! resume), parked for the client's return, or — a resumed session that could not be
//! opened — put back in the store as it was; and what the conversation record keeps of it
//! for continuing it later.

use std::sync::PoisonError;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use tokio_tungstenite::tungstenite::Message;

use super::State;
use crate::Gateway;
use crate::budget::Account;
use crate::resume::Parked;
use crate::session::machine::{Ending, Machine};
use crate::session::{Client, close_client};

/// The session leaves this task as the machine says.
pub(super) async fn finish(
    gateway: &Gateway,
    machine: &mut Machine,
    ending: Ending,
    parked: Option<(String, Parked)>,
    mut state: State,
    client: &mut Client,
) {
    if let Some(keeper) = state.keeper.take() {
        keeper.stop().await;
    }
    state.books.leave(gateway);
    if let Some(mut up) = state.upstream.take() {
        let _ = up.ws.close(None).await;
    }
    if let Some(log) = state.books.log() {
        let agent = machine.target().key();
        if !matches!(ending, Ending::ResumeFailed(_) | Ending::TakenOver) {
            // Kept for continuing the session later, by the same credential only, and only
            // with the newest resume token its client received (none yet: by nobody).
            let key = crate::resume::continue_key(machine.id(), state.books.credential());
            let token = machine.key().unwrap_or_default();
            match crate::resume::seal_text(&gateway.key, &key, &machine.continuation()) {
                Ok(sealed) => log.state(&agent, state.books.credential(), token, sealed),
                Err(error) => {
                    tracing::warn!(session_id = %machine.id(), "cannot keep the session for continuing: {error}")
                }
            }
        }
        match &ending {
            Ending::Close((code, reason)) => log.ended_by(&agent, "ended", Some((*code, reason)), machine.hung_up_by()),
            Ending::Detach => log.ended_by(&agent, "ended", None, machine.hung_up_by()),
            Ending::Park => log.ended(&agent, "parked", None),
            // Back in the store as it was: the client may try again.
            Ending::ResumeFailed(_) => {}
            // It lives on elsewhere, and is recorded there.
            Ending::TakenOver => {}
        }
    }
    let close = match ending {
        Ending::Close(close) => {
            detach(gateway, machine).await;
            Some(close)
        }
        Ending::Detach => {
            detach(gateway, machine).await;
            None
        }
        Ending::Park => {
            park(gateway, machine).await;
            None
        }
        // The machine closed the client and the runtime already.
        Ending::TakenOver => {
            detach(gateway, machine).await;
            None
        }
        Ending::ResumeFailed(message) => {
            // The client may try again with the same token.
            if let Some((key, parked)) = parked
                && let Err(error) = gateway
                    .store
                    .park(&key, &parked, gateway.config.resume_window, Some(parked_account(gateway, &parked)))
                    .await
            {
                tracing::warn!(session_id = %machine.id(), "cannot park the session again: {error}");
            }
            gateway.metrics.refused.with_label_values(&["no_runtime"]).inc();
            let message = ServerMessage::error(ErrorCode::NoRuntime, format!("{message}; resume again shortly"), false);
            let _ = client.send(Message::text(message.to_json())).await;
            Some((close_code::TRY_AGAIN_LATER, "no runtime".to_owned()))
        }
    };
    state.client.release();
    if let Some(close) = close
        && !state.client.done()
    {
        close_client(client, close).await;
    }
}

/// A parked session's count toward the memory budget.
fn parked_account(gateway: &Gateway, parked: &Parked) -> Account {
    let mut account = gateway.budget.account();
    account.set(parked.replay.bytes() + parked.kept.bytes());
    account
}

/// The session ended: nothing waits for a resume.
async fn detach(gateway: &Gateway, machine: &mut Machine) {
    let Some(key) = machine.take_key() else { return };
    gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
    if let Err(error) = gateway.store.unmark(&key).await {
        tracing::warn!(session_id = %machine.id(), "{error}");
    }
}

/// The client is gone: the session waits for it in the store for the resume window.
async fn park(gateway: &Gateway, machine: &mut Machine) {
    // Without a token the client cannot come back.
    let Some(key) = machine.take_key() else { return };
    gateway.attached.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
    let parked = machine.take_parked();
    let agent = machine.target().key();
    match gateway.store.park(&key, &parked, gateway.config.resume_window, Some(parked_account(gateway, &parked))).await
    {
        Ok(()) => {
            gateway.metrics.parked.with_label_values(&[&agent]).inc();
            tracing::info!(session_id = %machine.id(), %agent, "client gone: the session waits for it to resume");
        }
        Err(error) => {
            tracing::warn!(session_id = %machine.id(), "cannot park the session, it ends: {error}");
            let _ = gateway.store.unmark(&key).await;
        }
    }
}
