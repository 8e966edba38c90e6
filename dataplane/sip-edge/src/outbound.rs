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
//!
//! An Agent with answering-machine detection has its calls listened to first ([`listen`]):
//! who answered is reported ([`FromEdge::Detected`]) and told to the session as it opens
//! (its call's `answeredBy`); a machine is hung up on (`onMachine: hangUp`: `answered`
//! then `completed`, no session; counted `machine_hung_up`) or left a message (the
//! session opens once the beep ends). Every answered call reports when the callee first
//! heard the agent ([`FromEdge::Heard`]): the delay from the answer to the agent's first
//! audio, detection, the session's opening and the greeting together.

mod listen;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::outbound::{
    AnsweredBy, AnsweringMachine, CallState, FromEdge, HungUpBy, OnMachine, state_of_status,
};
use switchboard_sip::call::{CallEvent, EndReason, Incoming};
use switchboard_sip::media::amd::Verdict;
use switchboard_sip::media::format::Format;
use switchboard_sip::sdp::Negotiated;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::call::{Call, Command, MediaSettings, Relay};
pub use crate::dialling::Outbound;
use crate::gateway::{self, GatewayConfig};
use crate::metrics::OverInDetection;
use crate::ports::PortPair;

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
    /// The transport to it (TCP and TLS on a connection the edge opens, [`crate::connect`]).
    pub transport: switchboard_sip::call::Transport,
    /// The trunk's host as configured: the name a TLS trunk's certificate must be for.
    pub host: String,
    /// How a TLS trunk's certificate is verified.
    pub tls: Option<crate::connect::TrunkTls>,
    /// The trunk it goes through (its Request-URI, From, credentials); with no trunk
    /// ([`Outbound::direct`]) the stand-in that names the caller-id.
    pub trunk: switchboard_sip::trunk::outbound::OutboundTrunk,
    /// The Agent's answering-machine detection, if it has it.
    pub answering_machine: Option<AnsweringMachine>,
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
    let report = FromEdge::Progress { id: id.to_owned(), state, status, reason, session_id: None, hung_up_by: None };
    if reports.try_send(report).is_err() {
        tracing::warn!(call = id, state = state.as_str(), "a call's report to the gateway was dropped");
    }
}

/// Reports an answered call over: `completed`, why, and who hung up.
fn completed(reports: &mpsc::Sender<FromEdge>, id: &str, reason: String, hung_up_by: HungUpBy) {
    let report = FromEdge::Progress {
        id: id.to_owned(),
        state: CallState::Completed,
        status: None,
        reason: Some(reason),
        session_id: None,
        hung_up_by: Some(hung_up_by),
    };
    send(reports, id, report);
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
    pub dialling: Arc<crate::dialling::Dialling>,
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

    async fn answered(mut self, media: Negotiated) {
        let answered_at = Instant::now();
        let id = self.placement.id.clone();
        let session_format = Format::of(media.codec);
        let mut relay = Relay::new(Arc::clone(&self.settings), session_format, self.placement.peer.ip());
        relay.media(media);
        let answered_by = match self.placement.answering_machine.clone() {
            Some(amd) => match self.detect(&amd, &mut relay, session_format).await {
                Some(by) => Some(by),
                None => return,
            },
            None => None,
        };
        let (agent, ticket) = (&self.placement.agent, &self.placement.ticket);
        let opened = tokio::select! {
            opened = gateway::open_call(&self.gateway, agent, session_format, ticket, answered_by) => opened,
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
        answered(&self.reports, &id, Some(session_id.clone()));
        let incoming = Incoming {
            call_id: self.call_id.clone(),
            dialled: Some(self.placement.agent.clone()),
            caller: None,
            caller_asserted: false,
            caller_private: false,
            display_name: None,
            source: self.placement.peer,
            media: None,
        };
        let live = self.metrics.answered(crate::metrics::Direction::Outbound);
        let mut call = Call {
            metrics: self.metrics,
            call_id: self.call_id,
            incoming,
            ports: self.ports,
            gateway: self.gateway,
            settings: self.settings,
            events: self.events,
            commands: self.commands,
            shutdown: self.shutdown,
            dialling: self.dialling,
            direction: crate::metrics::Direction::Outbound,
        };
        let (heard_tx, heard_rx) = tokio::sync::oneshot::channel::<Instant>();
        let reports = self.reports.clone();
        let heard = async {
            if let Ok(at) = heard_rx.await {
                let after_ms = millis(at.saturating_duration_since(answered_at));
                tracing::info!(call = %id, after_ms, "the callee first heard the agent");
                send(&reports, &id, FromEdge::Heard { id: id.clone(), after_ms });
            }
        };
        let (end, ()) = tokio::join!(call.relay_from(session, relay, Some(heard_tx)), heard);
        live.ended(&end);
        let ended = end.describe();
        tracing::info!(call = %id, session = %session_id, end = %ended, "outbound call ended");
        completed(&self.reports, &id, ended, end.hung_up_by());
    }

    /// Answering-machine detection (see [`listen`]): reports who answered, and returns it
    /// for the session; `None` when the call is over (hung up on a machine, the callee gone,
    /// the edge shutting down).
    async fn detect(
        &mut self,
        amd: &AnsweringMachine,
        relay: &mut Relay,
        session_format: Format,
    ) -> Option<AnsweredBy> {
        let id = self.placement.id.clone();
        let leave_message = amd.on_machine == OnMachine::LeaveMessage;
        let listening = listen::Listening {
            relay,
            ports: &self.ports,
            events: &mut self.events,
            session_format,
            shutdown: &self.shutdown,
        };
        let metrics = self.metrics.clone();
        let over = |counted: OverInDetection, why: String, by: HungUpBy| {
            metrics.over_in_detection(counted);
            answered(&self.reports, &id, None);
            completed(&self.reports, &id, why, by);
        };
        match listening.run(listen::config(amd), leave_message).await {
            listen::Listened::Decided { verdict, after, message } => {
                let answered_by = listen::answered_by(verdict);
                let after_ms = millis(after);
                tracing::info!(call = %id, answered_by = answered_by.as_str(), after_ms, "answering-machine detection");
                send(&self.reports, &id, FromEdge::Detected { id: id.clone(), answered_by, after_ms });
                if let Some((start, at)) = message {
                    tracing::info!(call = %id, ?start, after_ms = millis(at), "the message to the machine starts");
                }
                if verdict == Verdict::Machine && !leave_message {
                    self.hang_up().await;
                    over(
                        OverInDetection::MachineHungUp,
                        "answered by a machine: hung up (onMachine: hangUp)".to_owned(),
                        HungUpBy::Agent,
                    );
                    return None;
                }
                Some(answered_by)
            }
            listen::Listened::Ended(reason) => {
                over(
                    OverInDetection::CalleeLeft,
                    format!("the phone side, during answering-machine detection: {reason:?}"),
                    if matches!(reason, EndReason::RemoteHangUp) { HungUpBy::Callee } else { HungUpBy::Edge },
                );
                None
            }
            listen::Listened::MediaTimeout => {
                self.hang_up().await;
                over(
                    OverInDetection::CalleeLeft,
                    "no RTP from the callee during answering-machine detection".to_owned(),
                    HungUpBy::Edge,
                );
                None
            }
            listen::Listened::Shutdown => {
                self.hang_up().await;
                self.metrics.outbound(CallState::Failed);
                report(&self.reports, &id, CallState::Failed, None, Some("the edge is shutting down".into()));
                None
            }
        }
    }
}

/// Milliseconds of `duration`, saturated.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Queues a report for the gateway; one that cannot be queued is dropped.
fn send(reports: &mpsc::Sender<FromEdge>, id: &str, report: FromEdge) {
    if reports.try_send(report).is_err() {
        tracing::warn!(call = id, "a call's report to the gateway was dropped");
    }
}

/// Reports the call answered (with its session, once open).
fn answered(reports: &mpsc::Sender<FromEdge>, id: &str, session_id: Option<String>) {
    let answered = FromEdge::Progress {
        id: id.to_owned(),
        state: CallState::Answered,
        status: Some(200),
        reason: None,
        session_id,
        hung_up_by: None,
    };
    send(reports, id, answered);
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
