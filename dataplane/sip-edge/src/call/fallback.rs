//! A call to an Agent in outage mode whose fallback is a person: the gateway diverted the
//! session (`bidi_session_fallback`, close 4513) and names who takes the Agent's callers.
//! The edge answers the call; with an outage recording for the Agent (its own or the
//! default, [`crate::announce`]) the caller hears it once first, and a caller who hangs up
//! during it is not put through (no call to the person is placed); without one the caller
//! is put through at once. The edge puts the caller through to that person with the same
//! REFER an agent's `transfer_to_person` uses ([`crate::transfer`]): a person's E.164
//! number is dialled through the caller's side. Whatever the transfer's end, the edge's
//! leg then ends (there is no agent to come back to): after a transfer the caller is with
//! the person; after a failed one the caller hears the call end. The outcome is logged
//! (`outage fallback ended`, with the transfer's outcome and why); the gateway counts the
//! diverted session (`switchboard_gateway_outage_fallbacks_total`).

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::protocol::FallbackPerson;
use switchboard_sip::call::refer::TransferProgress;
use switchboard_sip::call::{Admission, CallEvent};
use switchboard_sip::sdp::Negotiated;

use super::{Call, Command};
use crate::announce::{Purpose, Recording};
use crate::gateway::Fallback;
use crate::transfer::{outcome, target_uri};

/// How long the person's phone may ring (the Agent's own `transferTimeoutSeconds` is not in
/// the fallback: the edge's default).
pub(crate) const RING_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the caller's ACK may take after the edge answers (RFC 3261's 64*T1).
const ACK_TIMEOUT: Duration = Duration::from_secs(32);

/// How the fallback went, for the log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Diverted {
    /// The transfer ended: its outcome (`transferred`, `busy`, ...) and why.
    Transfer(&'static str, String),
    /// The caller hung up first.
    CallerLeft,
    /// The answer was never acknowledged.
    NoAck,
    /// The edge is shutting down.
    Shutdown,
}

impl Diverted {
    /// Its outcome, the metrics' and the log's label.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Self::Transfer(outcome, _) => outcome,
            Self::CallerLeft => "caller_left",
            Self::NoAck => "no_ack",
            Self::Shutdown => "shutdown",
        }
    }

    /// Why it ended so, for the log.
    fn why(&self) -> &str {
        match self {
            Self::Transfer(_, why) => why,
            Self::CallerLeft => "the caller hung up first",
            Self::NoAck => "the caller's side never acknowledged the answer",
            Self::Shutdown => "the edge is shutting down",
        }
    }
}

impl Call {
    /// Answers the call, plays the Agent's outage recording when there is one, and puts
    /// the caller through to `person`, then hangs the edge's leg up.
    pub(super) async fn divert(&mut self, agent: &str, fallback: &Fallback, person: &FallbackPerson) {
        let recording = self.settings.announcements.for_agent(Purpose::Outage, &fallback.agent);
        tracing::info!(
            call = %self.call_id, agent, cause = fallback.cause, person = person.name,
            announcement = recording.as_ref().map(|r| r.file.as_str()),
            "the agent is in outage mode: putting the caller through to its fallback person"
        );
        self.admit(Admission::Accept).await;
        self.metrics.diverted();
        let diverted = self.put_through(person, recording).await;
        let (outcome, why) = (diverted.outcome(), diverted.why());
        tracing::info!(
            call = %self.call_id, agent, person = person.name, outcome, why, "outage fallback ended"
        );
        self.metrics.fallback(outcome);
        if diverted != Diverted::CallerLeft {
            let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
        }
    }

    /// Waits for the ACK, plays `recording` to its end (if any: a caller who hangs up
    /// during it is not put through), sends the REFER and waits for its end.
    async fn put_through(&mut self, person: &FallbackPerson, recording: Option<Arc<Recording>>) -> Diverted {
        let media = match self.acknowledged().await {
            Ok(media) => media,
            Err(diverted) => return diverted,
        };
        if let Some(recording) = recording
            && let Err(diverted) = self.play_once(media, recording).await
        {
            return diverted;
        }
        self.refer(person).await
    }

    /// Waits for the ACK of the call's answer: the media it settled.
    pub(super) async fn acknowledged(&mut self) -> Result<Negotiated, Diverted> {
        let shutdown = self.shutdown.clone();
        let established = tokio::time::timeout(ACK_TIMEOUT, async {
            loop {
                match self.events.recv().await {
                    Some(CallEvent::Established(media)) => return Ok(media),
                    Some(CallEvent::Ended(_)) | None => return Err(Diverted::CallerLeft),
                    Some(_) => {}
                }
            }
        });
        tokio::select! {
            established = established => established.unwrap_or(Err(Diverted::NoAck)),
            () = shutdown.cancelled() => Err(Diverted::Shutdown),
        }
    }

    /// Sends the REFER to `person` and waits for its end.
    pub(super) async fn refer(&mut self, person: &FallbackPerson) -> Diverted {
        let shutdown = self.shutdown.clone();
        let target = target_uri(&person.address, self.incoming.source);
        let transfer = Command::Transfer { call_id: self.call_id.clone(), target, timeout: RING_TIMEOUT };
        let _ = self.commands.send(transfer).await;
        loop {
            let event = tokio::select! {
                event = self.events.recv() => event,
                () = shutdown.cancelled() => return Diverted::Shutdown,
            };
            match event {
                Some(CallEvent::Transfer(TransferProgress::Ended(end))) => {
                    let (outcome, why) = outcome(&end);
                    return Diverted::Transfer(outcome.as_str(), why);
                }
                Some(CallEvent::Ended(_)) | None => return Diverted::CallerLeft,
                Some(_) => {}
            }
        }
    }
}
