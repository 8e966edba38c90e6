//! Sends with a deadline, for WebSocket peers that may stop reading.

use std::future::Future;
use std::time::Duration;

/// How long a peer may leave a message unread before it counts as gone (a client that
/// stopped reading, a runtime that hangs).
pub const SLOW_PEER: Duration = Duration::from_secs(5);

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
