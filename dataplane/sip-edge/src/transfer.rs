//! A call's transfers to a person: the agent's `transfer_request` (from the gateway)
//! becomes a REFER to the caller's side (the SIP task sends it:
//! [`switchboard_sip::call::InboundCall::transfer`]), and the REFER's end becomes the
//! `transfer_result` the session takes — `transferred` (the session then ends and the
//! edge hangs up its leg), or why not, as [`TransferOutcome`]:
//!
//! | what happened | outcome |
//! |---|---|
//! | the person's phone answered (sipfrag 2xx) | `transferred` |
//! | 486, 600 | `busy` |
//! | 408, 480, 487, or no final answer in the timeout | `no_answer` |
//! | 603 | `declined` |
//! | 404, 410, 484, 485, 5xx, 604 | `unreachable` |
//! | the REFER refused (405, 501, 403, ...): the edge dials the person (the call's `bridge`) | the person's answer, by this table |
//! | the REFER not sendable | `rejected` |
//! | anything else | `failed` |
//!
//! A person's E.164 number is dialled through the caller's side: `sip:<number>@<the
//! caller's host>;user=phone` (the trunk the call came from routes it).
//!
//! Where the caller's side refuses the REFER as something it does not take (405, 501, 403,
//! 420, 488, 489), or the edge is told to dial (`--transfer-method dial`), the edge dials
//! the person itself and bridges the legs (the call's `bridge`); the person's answer is then
//! the outcome by the same table (their phone answering 200 is `transferred`, 486 `busy`,
//! no answer within the timeout `no_answer`, ...).
//!
//! A warm transfer (`transfer_request.warm`) always dials: the caller is held while the
//! person's phone rings, `transferred` is reported when the person answers (the agent then
//! briefs them: [`crate::call::warm`]), and a person who hangs up during the brief is a
//! second report, `failed`, with the caller back with the agent.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, TransferOutcome};
use switchboard_sip::call::CallEvent;
use switchboard_sip::call::bridge::{Method, Step, Transfer};
use switchboard_sip::call::refer::{TransferEnd, TransferProgress};

use crate::command::PersonLeg;

/// The transfer under way in one call, if any.
#[derive(Debug)]
pub(crate) struct Transfers {
    current: Option<Current>,
    /// Where each transfer's outcome is counted.
    metrics: crate::metrics::Metrics,
}

/// One transfer: the tool call, the person, and how it goes.
#[derive(Debug)]
pub(crate) struct Current {
    tool_use_id: String,
    person: String,
    /// Where the person is (E.164 or a SIP URI).
    pub address: String,
    /// How long the person's phone may ring.
    pub timeout: Duration,
    machine: Transfer,
    /// The person's leg, once dialled (dial and bridge).
    pub leg: Option<PersonLeg>,
}

/// The SIP URI the REFER names for a person's `address` (an E.164 number goes to the
/// caller's side, `caller`).
pub(crate) fn target_uri(address: &str, caller: SocketAddr) -> String {
    if address.starts_with('+') { format!("sip:{address}@{caller};user=phone") } else { address.to_owned() }
}

/// The outcome of a transfer's end, with what happened in words.
pub(crate) fn outcome(end: &TransferEnd) -> (TransferOutcome, String) {
    match end {
        TransferEnd::Target { status, reason } => {
            (TransferOutcome::of_sip_status(*status), format!("the person's phone answered {status} {reason}"))
        }
        TransferEnd::Refused { status, reason } => {
            let outcome = match status {
                403 | 405 | 420 | 488 | 489 | 501 => TransferOutcome::Rejected,
                other => TransferOutcome::of_sip_status(*other),
            };
            (outcome, format!("the caller's side answered the REFER {status} {reason}"))
        }
        TransferEnd::TimedOut => (TransferOutcome::NoAnswer, "no final answer within the timeout".to_owned()),
        TransferEnd::Abandoned(why) | TransferEnd::NotStarted(why) => {
            let outcome = if matches!(end, TransferEnd::NotStarted(_)) {
                TransferOutcome::Rejected
            } else {
                TransferOutcome::Failed
            };
            (outcome, why.clone())
        }
    }
}

fn result(tool_use_id: String, outcome: TransferOutcome, message: String) -> String {
    serde_json::to_string(&ClientMessage::TransferResult { tool_use_id, outcome, message }).unwrap_or_default()
}

impl Transfers {
    /// No transfer under way yet; outcomes counted in `metrics`.
    pub(crate) fn new(metrics: crate::metrics::Metrics) -> Self {
        Self { current: None, metrics }
    }

    /// The agent's `transfer_request`: the first steps (a REFER, or dialling the person by
    /// `method`; a `warm` one holds the caller and dials), or at once the `transfer_result`
    /// refusing it (another transfer under way).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        call_id: &str,
        tool_use_id: String,
        person: String,
        address: String,
        method: Method,
        warm: bool,
        timeout_seconds: u32,
    ) -> Result<Vec<Step>, String> {
        if self.current.is_some() {
            let message = "another transfer of this call is under way".to_owned();
            self.metrics.transfer(TransferOutcome::Rejected);
            return Err(result(tool_use_id, TransferOutcome::Rejected, message));
        }
        tracing::info!(call = %call_id, person, ?method, warm, "transferring the caller");
        let (machine, steps) = if warm { Transfer::warm() } else { Transfer::start(method) };
        let timeout = Duration::from_secs(u64::from(timeout_seconds.clamp(1, 600)));
        self.current = Some(Current { tool_use_id, person, address, timeout, machine, leg: None });
        Ok(steps)
    }

    /// The transfer under way.
    pub(crate) fn current(&mut self) -> Option<&mut Current> {
        self.current.as_mut()
    }

    /// The REFER's progress: the next steps.
    pub(crate) fn progress(&mut self, call_id: &str, progress: TransferProgress) -> Vec<Step> {
        tracing::debug!(call = %call_id, ?progress, "transfer progress");
        self.current.as_mut().map(|c| c.machine.refer(progress)).unwrap_or_default()
    }

    /// The person's leg could not be placed.
    pub(crate) fn dial_failed(&mut self, end: TransferEnd) -> Vec<Step> {
        self.current.as_mut().map(|c| c.machine.dial_failed(end)).unwrap_or_default()
    }

    /// The person's leg's next event; pending while there is none.
    pub(crate) async fn person_event(&mut self) -> CallEvent {
        match self.current.as_mut().and_then(|c| c.leg.as_mut()) {
            Some(leg) => leg.next_event().await,
            None => std::future::pending().await,
        }
    }

    /// What happened on the person's leg: the next steps.
    pub(crate) fn person(&mut self, event: &CallEvent) -> Vec<Step> {
        self.current.as_mut().map(|c| c.machine.person(event)).unwrap_or_default()
    }

    /// The agent's session ended: the next steps.
    pub(crate) fn session_ended(&mut self) -> Vec<Step> {
        self.current.as_mut().map(|c| c.machine.session_ended()).unwrap_or_default()
    }

    /// The caller's leg ended: the next steps.
    pub(crate) fn caller_ended(&mut self) -> Vec<Step> {
        self.current.as_mut().map(|c| c.machine.caller_ended()).unwrap_or_default()
    }

    /// The `transfer_result` of the transfer's end, for the session.
    pub(crate) fn report(&mut self, call_id: &str, end: &TransferEnd) -> Option<String> {
        let current = self.current.as_ref()?;
        let (outcome, message) = outcome(end);
        tracing::info!(call = %call_id, person = current.person, outcome = outcome.as_str(), message, "transfer ended");
        self.metrics.transfer(outcome);
        Some(result(current.tool_use_id.clone(), outcome, message))
    }

    /// Forgets a transfer that is over (a new one may start); the person's leg, if any, is
    /// handed back (the bridge takes it).
    pub(crate) fn settle(&mut self) -> Option<PersonLeg> {
        if self.current.as_ref().is_some_and(|c| c.machine.is_over()) {
            return self.current.take().and_then(|c| c.leg);
        }
        None
    }

    /// The person's leg, taken for the bridge.
    pub(crate) fn take_leg(&mut self) -> Option<PersonLeg> {
        self.current.as_mut().and_then(|c| c.leg.take())
    }

    /// The person's leg's sockets and address, when one is placed (a warm transfer's brief
    /// relays its media).
    pub(crate) fn leg_media(&self) -> Option<(std::sync::Arc<crate::ports::PortPair>, SocketAddr)> {
        let leg = self.current.as_ref()?.leg.as_ref()?;
        Some((std::sync::Arc::clone(&leg.ports), leg.peer))
    }

    /// The person's leg's Call-ID, when one is placed.
    pub(crate) fn leg_id(&self) -> Option<String> {
        self.current.as_ref().and_then(|c| c.leg.as_ref()).map(|l| l.call_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_go_to_the_callers_side_and_uris_as_they_are() {
        let caller: SocketAddr = "198.51.100.7:5060".parse().expect("addr");
        assert_eq!(target_uri("+442079460001", caller), "sip:+442079460001@198.51.100.7:5060;user=phone");
        assert_eq!(target_uri("sip:advisor@pbx", caller), "sip:advisor@pbx");
    }

    #[test]
    fn each_end_has_its_outcome() {
        let target = |status| TransferEnd::Target { status, reason: "R".into() };
        let refused = |status| TransferEnd::Refused { status, reason: "R".into() };
        let cases = [
            (target(200), TransferOutcome::Transferred),
            (target(486), TransferOutcome::Busy),
            (target(600), TransferOutcome::Busy),
            (target(480), TransferOutcome::NoAnswer),
            (target(603), TransferOutcome::Declined),
            (target(404), TransferOutcome::Unreachable),
            (target(503), TransferOutcome::Unreachable),
            (target(415), TransferOutcome::Failed),
            (refused(405), TransferOutcome::Rejected),
            (refused(501), TransferOutcome::Rejected),
            (refused(486), TransferOutcome::Busy),
            (TransferEnd::TimedOut, TransferOutcome::NoAnswer),
            (TransferEnd::Abandoned("x".into()), TransferOutcome::Failed),
            (TransferEnd::NotStarted("x".into()), TransferOutcome::Rejected),
        ];
        for (end, expected) in cases {
            assert_eq!(outcome(&end).0, expected, "{end:?}");
        }
    }

    #[test]
    fn one_transfer_at_a_time_and_its_end_is_the_result() {
        let metrics = crate::metrics::Metrics::new().expect("metrics");
        let mut transfers = Transfers::new(metrics.clone());
        assert_eq!(transfers.progress("c", TransferProgress::Ended(TransferEnd::TimedOut)), [], "none under way");
        let steps = transfers.start("c", "t1".into(), "advisor".into(), "sip:a@b".into(), Method::Refer, false, 20);
        assert_eq!(steps.expect("a REFER"), [Step::Refer]);
        assert_eq!(transfers.current().map(|c| c.timeout), Some(Duration::from_secs(20)));
        let refused = transfers.start("c", "t2".into(), "advisor".into(), "sip:a@b".into(), Method::Refer, false, 20);
        let refused = refused.expect_err("busy");
        assert!(refused.contains(r#""outcome":"rejected""#) && refused.contains("t2"), "{refused}");
        assert_eq!(transfers.progress("c", TransferProgress::Accepted), []);
        let busy = TransferEnd::Target { status: 486, reason: "Busy Here".into() };
        assert_eq!(transfers.progress("c", TransferProgress::Ended(busy.clone())), [Step::Report(busy.clone())]);
        let done = transfers.report("c", &busy);
        let done: serde_json::Value = serde_json::from_str(&done.expect("a result")).expect("JSON");
        assert_eq!(done["type"], "transfer_result");
        assert_eq!((done["tool_use_id"].as_str(), done["outcome"].as_str()), (Some("t1"), Some("busy")));
        let counted = metrics.render();
        for outcome in ["busy", "rejected"] {
            let line = format!("switchboard_sip_transfers_total{{outcome=\"{outcome}\"}} 1");
            assert!(counted.contains(&line), "{line} in {counted}");
        }
        assert!(transfers.settle().is_none(), "no person's leg");
        assert!(transfers.current().is_none(), "over: a new one may start");
    }

    #[test]
    fn a_warm_transfer_holds_the_caller_and_dials_whatever_the_method() {
        let mut transfers = Transfers::new(crate::metrics::Metrics::new().expect("metrics"));
        let steps = transfers.start("c", "t1".into(), "advisor".into(), "sip:a@b".into(), Method::Refer, true, 20);
        assert_eq!(steps.expect("a warm transfer"), [Step::Hold, Step::Dial]);
        let busy = TransferEnd::Target { status: 486, reason: "Busy Here".into() };
        assert_eq!(transfers.dial_failed(busy.clone()), [Step::Unhold, Step::Report(busy)]);
    }

    #[test]
    fn a_refused_refer_or_the_dial_method_dials_the_person() {
        let mut transfers = Transfers::new(crate::metrics::Metrics::new().expect("metrics"));
        let steps = transfers.start("c", "t1".into(), "advisor".into(), "sip:a@b".into(), Method::Refer, false, 20);
        assert_eq!(steps.expect("a REFER"), [Step::Refer]);
        let refused = TransferEnd::Refused { status: 501, reason: "Not Implemented".into() };
        assert_eq!(transfers.progress("c", TransferProgress::Ended(refused)), [Step::Dial]);
        let mut transfers = Transfers::new(crate::metrics::Metrics::new().expect("metrics"));
        let steps =
            transfers.start("c", "t1".into(), "advisor".into(), "+442079460001".into(), Method::Dial, false, 20);
        assert_eq!(steps.expect("a dial"), [Step::Dial]);
        let unreachable = TransferEnd::Target { status: 404, reason: "no such host".into() };
        assert_eq!(transfers.dial_failed(unreachable.clone()), [Step::Report(unreachable.clone())]);
        let result = transfers.report("c", &unreachable).expect("a result");
        assert!(result.contains(r#""outcome":"unreachable""#), "{result}");
    }
}
