//! WebSocket limits and sends with a deadline.

use std::future::Future;
use std::time::Duration;

/// The WebSocket read buffer of a connection (client, gateway and runtime side).
/// tungstenite's default (128 KiB) is zero-filled before every socket read — a 128 KiB
/// memset per frame — and stays resident per connection; messages are small and still grow
/// it as needed. Measured (`benches/gateway.rs`): 262 KiB of gateway memory per idle
/// session with the default.
pub const WS_READ_BUFFER: usize = 8 * 1024;

/// How long a peer may leave a message unread before it counts as gone (a client that
/// stopped reading, a runtime that hangs).
pub const SLOW_PEER: Duration = Duration::from_secs(5);

/// Whether a WebSocket read failed because a message or frame exceeded the size limit,
/// by the error's type (tungstenite's capacity error, which axum wraps).
pub fn oversized(error: &axum::Error) -> bool {
    use std::error::Error as _;
    use tokio_tungstenite::tungstenite::error::{CapacityError, Error};
    matches!(
        error.source().and_then(|e| e.downcast_ref::<Error>()),
        Some(Error::Capacity(CapacityError::MessageTooLong { .. }))
    )
}

/// `send` (a send into a socket or a channel), given `deadline` to complete; `Err` when
/// it did not. Most sends complete at once (there is room): only one that waits gets a
/// timer, as one per frame would cost more than the send.
pub async fn within<F: Future>(deadline: Duration, send: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    let mut send = std::pin::pin!(send);
    match futures_util::poll!(send.as_mut()) {
        std::task::Poll::Ready(sent) => Ok(sent),
        std::task::Poll::Pending => tokio::time::timeout(deadline, send).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_send_that_completes_at_once_needs_no_timer_and_one_that_waits_gets_the_deadline() {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u8>(1);
        assert_eq!(within(SLOW_PEER, tx.send(1)).await.map(|sent| sent.is_ok()).ok(), Some(true));
        // The channel is full and nobody reads: the deadline passes (paused time).
        assert!(within(SLOW_PEER, tx.send(2)).await.is_err());
        assert_eq!(rx.recv().await, Some(1));
    }
}
