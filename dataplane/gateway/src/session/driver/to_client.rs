//! Sends to the client, with a deadline ([`SLOW_CLIENT`]): a client whose socket failed is
//! `Gone`, one that does not read in time is `Slow` (the machine parks or ends its session);
//! and [`ClientSide`], where the relay stands with the client's socket.

use switchboard_serve::frames;
use tokio_tungstenite::tungstenite::Message;

use super::super::{Client, SLOW_CLIENT};
use super::SendFailure;
use crate::auth::{Admission, Refusal};

/// Writes what is queued for the client: `Err` when its socket failed or it does not read.
pub(super) async fn flush(client: &mut Client) -> Result<(), SendFailure> {
    sent(switchboard_serve::ws::within(SLOW_CLIENT, client.flush()).await)
}

/// Sends a message to the client (after what is queued).
pub(super) async fn send(client: &mut Client, message: Message) -> Result<(), SendFailure> {
    sent(switchboard_serve::ws::within(SLOW_CLIENT, client.send(message)).await)
}

fn sent(result: Result<Result<(), frames::Error>, tokio::time::error::Elapsed>) -> Result<(), SendFailure> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(SendFailure::Gone),
        Err(_) => Err(SendFailure::Slow),
    }
}

/// Where the relay stands with the client's socket, and the credential's admission (its
/// session slot and message budget) while the client is served.
pub(super) struct ClientSide {
    /// The socket was closed (moved elsewhere) or failed: no more sends.
    done: bool,
    /// Messages for the client wait in its socket's buffer, to be written together with
    /// those of the runtime's frames already read (`more_for_client`). Not the same as the
    /// socket having bytes queued: the socket's own answers (pongs, a close echo) go out
    /// with its reads, and the relay does not wait on a client that reads nothing for them.
    queued: bool,
    admission: Option<Admission>,
}

impl ClientSide {
    /// A client served under `admission`.
    pub(super) fn new(admission: Admission) -> Self {
        Self { done: false, queued: false, admission: Some(admission) }
    }

    /// Whether nothing more is sent to the client.
    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// Whether messages wait in the socket's buffer.
    pub(super) fn queued(&self) -> bool {
        self.queued
    }

    /// Queues `message` for the client; `false` when its socket failed.
    pub(super) fn feed(&mut self, client: &mut Client, message: Message) -> bool {
        if client.feed(message).is_ok() {
            self.queued = true;
            true
        } else {
            self.done = true;
            false
        }
    }

    /// Writes what is queued (see [`flush`]).
    pub(super) async fn flush(&mut self, client: &mut Client) -> Result<(), SendFailure> {
        self.queued = false;
        let flushed = flush(client).await;
        if flushed.is_err() {
            self.done = true;
        }
        flushed
    }

    /// Sends a message now, unless the client is done (see [`send`]).
    pub(super) async fn send(&mut self, client: &mut Client, message: Message) -> Result<(), SendFailure> {
        if self.done {
            return Ok(());
        }
        let sent = send(client, message).await;
        if sent.is_err() {
            self.done = true;
        }
        sent
    }

    /// The client's message budget for a frame (`counted`: a message, not a control frame).
    pub(super) fn allow(&self, counted: bool) -> Result<(), Refusal> {
        match &self.admission {
            Some(admission) if counted => admission.allow_message(),
            _ => Ok(()),
        }
    }

    /// The client is about to be closed: its key's session slot is given back first, so a
    /// client that reconnects at once gets in; nothing more is sent.
    pub(super) fn closing(&mut self) {
        self.admission = None;
        self.done = true;
    }

    /// Gives the key's session slot back (the session leaves this task).
    pub(super) fn release(&mut self) {
        self.admission = None;
    }
}
