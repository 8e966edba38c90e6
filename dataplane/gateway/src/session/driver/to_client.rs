//! Sends to the client, with a deadline ([`SLOW_CLIENT`]): a client whose socket failed is
//! `Gone`, one that does not read in time is `Slow` (the machine parks or ends its session).

use switchboard_serve::frames;
use tokio_tungstenite::tungstenite::Message;

use super::super::{Client, SLOW_CLIENT};
use super::SendFailure;

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
