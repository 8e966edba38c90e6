//! What a call's task asks of the SIP task (which alone owns the signalling endpoint): hold
//! the INVITE in the queue, answer it, hang up, transfer (REFER, or dialling the person). The call, the transfer and outbound calls send these.

use std::time::Duration;

use switchboard_sip::call::Admission;

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
    /// The session ended: send BYE.
    HangUp {
        /// The call.
        call_id: String,
    },
    /// Dial a person for a transfer (dial and bridge): a new outbound leg whose events go to
    /// the caller's task ([`crate::bridge`]).
    Dial(crate::bridge::DialRequest),
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
