//! How the edge dials out, for the SIP task and every call's task: the outbound trunk that
//! placed calls and a person's number go through ([`Outbound`]), and how a transfer reaches
//! a person ([`Dialling`]: REFER first, or dial and bridge at once).

use std::time::Duration;

use switchboard_sip::call::Transport;
use switchboard_sip::trunk::outbound::OutboundTrunk;

use crate::connect::{TrunkTls, TrunkTlsError};

pub use switchboard_sip::call::bridge::Method as TransferMethod;

/// Where and how the edge places calls.
#[derive(Clone, Debug)]
pub struct Outbound {
    /// The outbound trunk.
    pub trunk: OutboundTrunk,
    /// How a TLS trunk's certificate is verified (`None` for UDP and TCP).
    pub tls: Option<TrunkTls>,
    /// How long a call may ring before it is cancelled (`no_answer`).
    pub ring_timeout: Duration,
    /// No trunk (local mode without `--sip-outbound-trunk`): a SIP URI is called at its own
    /// host and port, a number is refused (`failed`: no trunk routes it); `trunk` then only
    /// names the caller-id.
    pub direct: bool,
}

/// Why an outbound trunk's settings are refused.
#[derive(Debug, thiserror::Error)]
pub enum OutboundSettingsError {
    /// A CA file for a trunk that does not use TLS.
    #[error("a CA file is for a TLS trunk (sips: or ;transport=tls), and {0} is not one")]
    CaWithoutTls(String),
    /// The TLS settings do not load.
    #[error("outbound trunk {uri}: {source}")]
    Tls {
        /// The trunk.
        uri: String,
        /// Why.
        #[source]
        source: TrunkTlsError,
    },
}

impl Outbound {
    /// Calls through `trunk`, a TLS one verified against the CA file `ca` (only it) or the
    /// system's roots; ringing at most `ring_timeout`.
    pub fn new(
        trunk: OutboundTrunk,
        ca: Option<&std::path::Path>,
        ring_timeout: Duration,
    ) -> Result<Self, OutboundSettingsError> {
        let tls = match (trunk.transport, ca) {
            (Transport::Tls, Some(ca)) => Some(TrunkTls::from_ca_file(ca)),
            (Transport::Tls, None) => Some(TrunkTls::system()),
            (_, Some(_)) => return Err(OutboundSettingsError::CaWithoutTls(trunk.uri())),
            (_, None) => None,
        };
        let tls = tls.transpose().map_err(|source| OutboundSettingsError::Tls { uri: trunk.uri(), source })?;
        Ok(Self { trunk, tls, ring_timeout, direct: false })
    }
}

/// How the edge transfers calls, for each call's task.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dialling {
    /// REFER first, or dial at once.
    pub method: TransferMethod,
    /// The outbound trunk a person's number is dialled through, when the edge has one.
    pub outbound: Option<Outbound>,
}
