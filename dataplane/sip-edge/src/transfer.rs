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
//! | the REFER refused (405, 501, 403, ...) or not sendable | `rejected` |
//! | anything else | `failed` |
//!
//! A person's E.164 number is dialled through the caller's side: `sip:<number>@<the
//! caller's host>;user=phone` (the trunk the call came from routes it).

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, TransferOutcome};
use switchboard_sip::call::refer::{TransferEnd, TransferProgress};

use crate::command::Command;

/// The transfer under way in one call, if any.
#[derive(Debug)]
pub(crate) struct Transfers {
    /// The tool call and the person.
    current: Option<(String, String)>,
    /// Where each transfer's outcome is counted.
    metrics: crate::metrics::Metrics,
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

    /// The agent's `transfer_request`: the command for the SIP task, or at once the
    /// `transfer_result` refusing it (another transfer under way).
    pub(crate) fn start(
        &mut self,
        call_id: &str,
        tool_use_id: String,
        person: String,
        address: &str,
        caller: SocketAddr,
        timeout_seconds: u32,
    ) -> Result<Command, String> {
        if self.current.is_some() {
            let message = "another transfer of this call is under way".to_owned();
            self.metrics.transfer(TransferOutcome::Rejected);
            return Err(result(tool_use_id, TransferOutcome::Rejected, message));
        }
        let target = target_uri(address, caller);
        tracing::info!(call = %call_id, person, "transferring the caller (REFER)");
        self.current = Some((tool_use_id, person));
        let timeout = Duration::from_secs(u64::from(timeout_seconds.clamp(1, 600)));
        Ok(Command::Transfer { call_id: call_id.to_owned(), target, timeout })
    }

    /// The REFER's progress: at its end, the `transfer_result` for the session.
    pub(crate) fn progress(&mut self, call_id: &str, progress: TransferProgress) -> Option<String> {
        let TransferProgress::Ended(end) = progress else {
            tracing::debug!(call = %call_id, ?progress, "transfer progress");
            return None;
        };
        let (tool_use_id, person) = self.current.take()?;
        let (outcome, message) = outcome(&end);
        tracing::info!(call = %call_id, person, outcome = outcome.as_str(), message, "transfer ended");
        self.metrics.transfer(outcome);
        Some(result(tool_use_id, outcome, message))
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
        let caller: SocketAddr = "127.0.0.1:5080".parse().expect("addr");
        let metrics = crate::metrics::Metrics::new().expect("metrics");
        let mut transfers = Transfers::new(metrics.clone());
        assert_eq!(transfers.progress("c", TransferProgress::Ended(TransferEnd::TimedOut)), None, "none under way");
        let command = transfers.start("c", "t1".into(), "advisor".into(), "sip:a@b", caller, 20).expect("a REFER");
        assert!(
            matches!(command, Command::Transfer { ref target, timeout, .. } if target == "sip:a@b" && timeout == Duration::from_secs(20))
        );
        let refused = transfers.start("c", "t2".into(), "advisor".into(), "sip:a@b", caller, 20).expect_err("busy");
        assert!(refused.contains(r#""outcome":"rejected""#) && refused.contains("t2"), "{refused}");
        assert_eq!(transfers.progress("c", TransferProgress::Accepted), None);
        let done = transfers
            .progress("c", TransferProgress::Ended(TransferEnd::Target { status: 486, reason: "Busy Here".into() }));
        let done: serde_json::Value = serde_json::from_str(&done.expect("a result")).expect("JSON");
        assert_eq!(done["type"], "transfer_result");
        assert_eq!((done["tool_use_id"].as_str(), done["outcome"].as_str()), (Some("t1"), Some("busy")));
        let counted = metrics.render();
        for outcome in ["busy", "rejected"] {
            let line = format!("switchboard_sip_transfers_total{{outcome=\"{outcome}\"}} 1");
            assert!(counted.contains(&line), "{line} in {counted}");
        }
    }
}
