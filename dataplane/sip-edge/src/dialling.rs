//! How the edge dials out, for the SIP task and every call's task: the outbound trunk that
//! placed calls and a person's number go through ([`Outbound`]), and how a transfer reaches
//! a person ([`Dialling`]: REFER first, or dial and bridge at once).

use std::time::Duration;

use switchboard_sip::trunk::outbound::OutboundTrunk;

pub use switchboard_sip::call::bridge::Method as TransferMethod;

/// Where and how the edge places calls.
#[derive(Clone, Debug)]
pub struct Outbound {
    /// The outbound trunk.
    pub trunk: OutboundTrunk,
    /// How long a call may ring before it is cancelled (`no_answer`).
    pub ring_timeout: Duration,
    /// No trunk (local mode without `--sip-outbound-trunk`): a SIP URI is called at its own
    /// host and port, a number is refused (`failed`: no trunk routes it); `trunk` then only
    /// names the caller-id.
    pub direct: bool,
}

/// How the edge transfers calls, for each call's task.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dialling {
    /// REFER first, or dial at once.
    pub method: TransferMethod,
    /// The outbound trunk a person's number is dialled through, when the edge has one.
    pub outbound: Option<Outbound>,
}
