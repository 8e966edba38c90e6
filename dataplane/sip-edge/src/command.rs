//! What a call's task asks of the SIP task (which alone owns the signalling endpoint): hold
//! the INVITE in the queue, answer it, hang up, transfer (REFER, or dialling the person). The
//! call, the transfer and outbound calls send these; a person's leg placed for a transfer
//! ([`PersonLeg`]) comes back to the caller's task.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_sip::call::{Admission, CallEvent, ClientAuth};
use tokio::sync::{mpsc, oneshot};

use crate::ports::PortPair;

/// What a call's task asks of the SIP task.
#[derive(Debug)]
pub(crate) enum Command {
    /// The answer to the call's INVITE.
    Admit {
        /// The call.
        call_id: String,
        /// Accept, or the refusal.
        admission: Admission,
    },
    /// The call's session waits in the gateway's capacity queue: send `182 Queued` with
    /// `reason` (the hold message), repeated until the call is answered.
    Queued {
        /// The call.
        call_id: String,
        /// What the caller is told.
        reason: String,
    },
    /// The call's session waits in the capacity queue and the caller hears the hold
    /// announcement: send `183 Session Progress` with the SDP answer (early media) and
    /// `reason`, repeated until the call is answered.
    EarlyMedia {
        /// The call.
        call_id: String,
        /// What the caller is told (the hold message).
        reason: String,
    },
    /// The session ended: send BYE.
    HangUp {
        /// The call.
        call_id: String,
    },
    /// Dial a person for a transfer (dial and bridge): a new outbound leg whose events go to
    /// the caller's task (the call's `bridge`).
    Dial(DialRequest),
    /// The agent puts the caller through to a person: send REFER (see [`crate::transfer`]).
    Transfer {
        /// The call.
        call_id: String,
        /// The SIP URI of the person.
        target: String,
        /// How long it may ring.
        timeout: Duration,
    },
}

/// What the SIP task needs to place a person's leg.
#[derive(Debug)]
pub(crate) struct DialRequest {
    pub call_id: String,
    pub uri: String,
    pub peer: SocketAddr,
    /// The From user (the outbound trunk's caller-id; `switchboard` without one).
    pub caller_id: Option<String>,
    pub auth: Option<ClientAuth>,
    pub ring_timeout: Duration,
    /// The transport to `peer`: a person's number goes over the outbound trunk's.
    pub transport: switchboard_sip::call::Transport,
    /// The host `peer` was resolved from (the name a TLS trunk's certificate is for).
    pub host: String,
    /// How a TLS trunk's certificate is verified.
    pub tls: Option<crate::connect::TrunkTls>,
    pub reply: oneshot::Sender<Result<PersonLeg, String>>,
}

/// A person's leg placed for a transfer: its ports, its events, and where it was sent.
#[derive(Debug)]
pub(crate) struct PersonLeg {
    pub call_id: String,
    /// Shared with a warm transfer's brief, which relays the leg's media to the session.
    pub ports: std::sync::Arc<PortPair>,
    pub events: Option<mpsc::Receiver<CallEvent>>,
    pub peer: SocketAddr,
}

impl PersonLeg {
    /// The leg's next event; pending when its events are over.
    pub(crate) async fn next_event(&mut self) -> CallEvent {
        next_event(&mut self.events).await
    }
}

/// A leg's next event from `events`; pending once they are over.
pub(crate) async fn next_event(events: &mut Option<mpsc::Receiver<CallEvent>>) -> CallEvent {
    let Some(receiver) = events.as_mut() else { return std::future::pending().await };
    match receiver.recv().await {
        Some(event) => event,
        None => {
            // The SIP task let the leg go (it ended): told once.
            *events = None;
            CallEvent::Ended(switchboard_sip::call::EndReason::LocalHangUp)
        }
    }
}
