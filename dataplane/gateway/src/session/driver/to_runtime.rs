//! Sends to the runtime, with a deadline: a runtime that stops reading (its pod stuck, its
//! socket's buffers full) must not hold the relay, which would then neither read the client
//! nor ping it. A send that does not complete within [`SLOW_RUNTIME`] gives the runtime up
//! as lost — its connection is dropped mid-frame, never written to again — and the session
//! moves to another pod as after any lost runtime, the unsent message kept for it.

use std::time::Duration;

use tokio_tungstenite::tungstenite::Message;

use super::{Event, Gateway, Machine, RuntimeFrame, State, Upstream, feed};

/// How long a runtime may take to accept one message (the clients' deadline too).
const SLOW_RUNTIME: Duration = switchboard_serve::ws::SLOW_PEER;

/// How a send to the runtime went.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sent {
    Done,
    /// The connection failed (the read side sees it too).
    Failed,
    /// Not accepted within [`SLOW_RUNTIME`].
    Stuck,
}

/// Sends `message` on `up` within [`SLOW_RUNTIME`].
pub(super) async fn send(up: &mut Upstream, message: Message) -> Sent {
    match switchboard_serve::ws::within(SLOW_RUNTIME, up.ws.send(message)).await {
        Ok(Ok(())) => Sent::Done,
        Ok(Err(_)) => Sent::Failed,
        Err(_) => Sent::Stuck,
    }
}

/// The runtime took nothing for [`SLOW_RUNTIME`]: its connection is dropped and the
/// machine told it is lost (it moves the session to another pod).
pub(super) fn given_up(gateway: &Gateway, machine: &mut Machine, state: &mut State) {
    state.upstream = None;
    tracing::warn!(
        session_id = %machine.id(),
        agent = %machine.target().key(),
        "the runtime took no message for {} s: given up, the session moves to another pod",
        SLOW_RUNTIME.as_secs()
    );
    feed(gateway, machine, Event::Runtime(RuntimeFrame::Lost));
}
