//! Calls the edge places (`POST /v1/calls` at the gateway): where they go (the outbound
//! trunk, [`Outbound`]), the task of each placed call, and the report of each step to the
//! gateway. The SIP task places the INVITE ([`switchboard_sip::endpoint::Endpoint::place`],
//! with the trunk's digest credentials for its challenges); the call's task reports
//! `dialing`, `ringing` on 180/183, and once the callee answers opens the session for the
//! agent with the call's ticket ([`gateway::open_call`]), reports `answered` with the
//! session's id and relays media exactly as for an inbound call
//! ([`Call::relay`](crate::call::Call)); then `completed`. A refusal is `busy` (486, 600,
//! 603), `no_answer` (no final answer within the ring timeout: the INVITE is cancelled) or
//! `failed` with the SIP status and reason; a session the gateway will not open hangs the
//! answered call up and is `failed`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use switchboard_core::outbound::{CallState, FromEdge, state_of_status};
use switchboard_sip::call::{CallEvent, EndReason, Incoming};
use switchboard_sip::sdp::Negotiated;
use switchboard_sip::trunk::outbound::OutboundTrunk;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::call::{Call, Command, MediaSettings, law};
use crate::gateway::{self, GatewayConfig};
use crate::ports::PortPair;

/// Where and how the edge places calls.
#[derive(Clone, Debug)]
pub struct Outbound {
    /// The outbound trunk.
    pub trunk: OutboundTrunk,
    /// How long a call may ring before it is cancelled (`no_answer`).
    pub ring_timeout: Duration,
}

/// A call the gateway asked for, its trunk's address resolved.
#[derive(Debug)]
pub(crate) struct Placement {
    /// The gateway's id of the call.
    pub id: String,
    /// Whom to call (E.164 or a SIP URI).
    pub to: String,
    /// The agent (`namespace/name`).
    pub agent: String,
    /// The ticket the session is opened with.
    pub ticket: String,
    /// The trunk's address now.
    pub peer: SocketAddr,
}

/// Sends a report to the gateway; one that cannot be queued is dropped (the gateway fails
/// calls whose edge it loses).
pub(crate) fn report(
    reports: &mpsc::Sender<FromEdge>,
    id: &str,
    state: CallState,
    status: Option<u16>,
    reason: Option<String>,
) {
    let report = FromEdge::Progress { id: id.to_owned(), state, status, reason, session_id: None };
    if reports.try_send(report).is_err() {
        tracing::warn!(call = id, state = state.as_str(), "a call's report to the gateway was dropped");
    }
}

/// The state, SIP status and reason a placed call that ended before it was answered ends in.
pub(crate) fn outcome(reason: &EndReason) -> (CallState, Option<u16>, String) {
    match reason {
        EndReason::Rejected { status, reason } => (state_of_status(*status), Some(*status), reason.clone()),
        EndReason::NoAnswer => (CallState::NoAnswer, None, "no answer within the ring timeout".to_owned()),
        EndReason::MediaRefused(why) => (CallState::Failed, None, format!("the callee's media: {why}")),
        EndReason::Cancelled => (CallState::Failed, None, "cancelled by the edge".to_owned()),
        other => (CallState::Failed, None, format!("{other:?}")),
    }
}

/// One placed call's task (see the module docs).
pub(crate) struct PlacedCall {
    pub placement: Placement,
    pub call_id: String,
    pub ports: PortPair,
    pub gateway: Arc<GatewayConfig>,
    pub settings: Arc<MediaSettings>,
    pub events: mpsc::Receiver<CallEvent>,
    pub commands: mpsc::Sender<Command>,
    pub reports: mpsc::Sender<FromEdge>,
    pub shutdown: CancellationToken,
    /// The edge's metrics.
    pub metrics: crate::metrics::Metrics,
    pub dialling: Arc<crate::bridge::Dialling>,
}

impl PlacedCall {
    pub(crate) async fn run(mut self) {
        let id = self.placement.id.clone();
        report(&self.reports, &id, CallState::Dialing, None, None);
        let mut rang = false;
        let media = loop {
            tokio::select! {
                event = self.events.recv() => match event {
                    Some(CallEvent::Progress(status @ (180 | 183))) if !rang => {
                        rang = true;
                        report(&self.reports, &id, CallState::Ringing, Some(status), None);
                    }
                    Some(CallEvent::Established(media)) => break media,
                    Some(CallEvent::Ended(reason)) => {
                        let (state, status, why) = outcome(&reason);
                        tracing::info!(call = %id, state = state.as_str(), ?status, "outbound call not answered: {why}");
                        self.metrics.outbound(state);
                        return report(&self.reports, &id, state, status, Some(why));
                    }
                    Some(_) => {}
                    None => {
                        self.metrics.outbound(CallState::Failed);
                        return report(&self.reports, &id, CallState::Failed, None, Some("the SIP task ended".into()));
                    }
                },
                () = self.shutdown.cancelled() => {
                    self.hang_up().await;
                    self.metrics.outbound(CallState::Failed);
                    return report(&self.reports, &id, CallState::Failed, None, Some("the edge is shutting down".into()));
                }
            }
        };
        self.answered(media).await;
    }

    async fn hang_up(&self) {
        let _ = self.commands.send(Command::HangUp { call_id: self.call_id.clone() }).await;
    }

    async fn answered(self, media: Negotiated) {
        let id = self.placement.id.clone();
        let session_law = law(media.codec);
        let opened = tokio::select! {
            opened = gateway::open_call(&self.gateway, &self.placement.agent, session_law, &self.placement.ticket) => opened,
            () = self.shutdown.cancelled() => {
                self.hang_up().await;
                self.metrics.outbound(CallState::Failed);
                return report(&self.reports, &id, CallState::Failed, None, Some("the edge is shutting down".into()));
            }
        };
        let session = match opened {
            Ok(session) => session,
            Err(refused) => {
                tracing::warn!(call = %id, agent = %self.placement.agent, "answered, but no session: {refused}");
                self.hang_up().await;
                self.metrics.outbound(CallState::Failed);
                return report(&self.reports, &id, CallState::Failed, Some(200), Some(refused.to_string()));
            }
        };
        let session_id = session.id.clone();
        tracing::info!(call = %id, agent = %self.placement.agent, session = %session_id, "outbound call answered");
        let answered = FromEdge::Progress {
            id: id.clone(),
            state: CallState::Answered,
            status: Some(200),
            reason: None,
            session_id: Some(session_id.clone()),
        };
        if self.reports.try_send(answered).is_err() {
            tracing::warn!(call = %id, "the answered report to the gateway was dropped");
        }
        // The relay learns the media from the event that settled it, then takes the rest.
        let (events, receiver) = mpsc::channel(16);
        let _ = events.try_send(CallEvent::Established(media.clone()));
        let mut rest = self.events;
        tokio::spawn(async move {
            while let Some(event) = rest.recv().await {
                if events.send(event).await.is_err() {
                    break;
                }
            }
        });
        let incoming = Incoming {
            call_id: self.call_id.clone(),
            dialled: Some(self.placement.agent.clone()),
            caller: None,
            caller_asserted: false,
            caller_private: false,
            display_name: None,
            source: self.placement.peer,
            media: Some(media),
        };
        let live = self.metrics.answered(crate::metrics::Direction::Outbound);
        let mut call = Call {
            metrics: self.metrics,
            call_id: self.call_id,
            incoming,
            ports: self.ports,
            gateway: self.gateway,
            settings: self.settings,
            events: receiver,
            commands: self.commands,
            shutdown: self.shutdown,
            dialling: self.dialling,
        };
        let end = call.relay(session, session_law).await;
        live.ended(&end);
        let ended = end.describe();
        tracing::info!(call = %id, session = %session_id, end = %ended, "outbound call ended");
        report(&self.reports, &id, CallState::Completed, None, Some(ended));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn how_a_call_ends_before_an_answer_is_its_outcome() {
        let rejected = |status: u16, reason: &str| EndReason::Rejected { status, reason: reason.into() };
        assert_eq!(outcome(&rejected(486, "Busy Here")), (CallState::Busy, Some(486), "Busy Here".into()));
        assert_eq!(outcome(&rejected(603, "Decline")).0, CallState::Busy);
        assert_eq!(outcome(&rejected(404, "Not Found")), (CallState::Failed, Some(404), "Not Found".into()));
        assert_eq!(outcome(&rejected(407, "Proxy Authentication Required")).0, CallState::Failed);
        assert_eq!(outcome(&EndReason::NoAnswer).0, CallState::NoAnswer);
        assert_eq!(outcome(&EndReason::MediaRefused("no codec".into())).0, CallState::Failed);
    }
}
