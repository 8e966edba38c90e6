//! How the edge dials out, for the SIP task and every call's task: the outbound trunks
//! placed calls go through, each by name, and the default one that a call naming none and a
//! person's number go through ([`Outbound`]), and how a transfer reaches a person
//! ([`Dialling`]: REFER first, or dial and bridge at once).

use std::time::Duration;

use switchboard_sip::call::Transport;
use switchboard_sip::trunk::outbound::OutboundTrunk;

use crate::connect::{TrunkTls, TrunkTlsError};

pub use switchboard_sip::call::bridge::Method as TransferMethod;

/// One outbound trunk by name.
#[derive(Clone, Debug)]
pub struct Route {
    /// Its name ([`switchboard_core::outbound::is_trunk_name`]); `default` for the single
    /// trunk of `--outbound-trunk URI`.
    pub name: String,
    /// The trunk.
    pub trunk: OutboundTrunk,
    /// How a TLS trunk's certificate is verified (`None` for UDP and TCP).
    pub tls: Option<TrunkTls>,
}

/// Where and how the edge places calls.
#[derive(Clone, Debug)]
pub struct Outbound {
    /// The default trunk (a call naming none, a person's number).
    pub trunk: OutboundTrunk,
    /// How the default trunk's certificate is verified, when it is TLS.
    pub tls: Option<TrunkTls>,
    /// Every trunk by name, the default first.
    pub routes: Vec<Route>,
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
    /// A trunk's name is not one.
    #[error("outbound trunk name {0:?}: use 1-40 lower-case letters, digits and '-'")]
    Name(String),
    /// Two trunks of one name.
    #[error("outbound trunk {0:?} is named twice")]
    Twice(String),
    /// No trunk of the name given as the default.
    #[error("the default outbound trunk {0:?} is not one of the trunks: {1}")]
    NoDefault(String, String),
    /// No trunk at all.
    #[error("no outbound trunk")]
    None,
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

impl Route {
    /// The trunk `name`, a TLS one verified against the CA file `ca` (only it) or the
    /// system's roots.
    pub fn new(name: &str, trunk: OutboundTrunk, ca: Option<&std::path::Path>) -> Result<Self, OutboundSettingsError> {
        if !switchboard_core::outbound::is_trunk_name(name) {
            return Err(OutboundSettingsError::Name(name.to_owned()));
        }
        let tls = match (trunk.transport, ca) {
            (Transport::Tls, Some(ca)) => Some(TrunkTls::from_ca_file(ca)),
            (Transport::Tls, None) => Some(TrunkTls::system()),
            (_, Some(_)) => return Err(OutboundSettingsError::CaWithoutTls(trunk.uri())),
            (_, None) => None,
        };
        let tls = tls.transpose().map_err(|source| OutboundSettingsError::Tls { uri: trunk.uri(), source })?;
        Ok(Self { name: name.to_owned(), trunk, tls })
    }
}

impl Outbound {
    /// Calls through `trunk` alone (named `default`), a TLS one verified against the CA
    /// file `ca` (only it) or the system's roots; ringing at most `ring_timeout`.
    pub fn new(
        trunk: OutboundTrunk,
        ca: Option<&std::path::Path>,
        ring_timeout: Duration,
    ) -> Result<Self, OutboundSettingsError> {
        let route = Route::new(switchboard_core::outbound::DEFAULT_TRUNK, trunk, ca)?;
        Self::routes(vec![route], None, ring_timeout)
    }

    /// Calls through `routes`, `default` (by name) the default, else the first.
    pub fn routes(
        mut routes: Vec<Route>,
        default: Option<&str>,
        ring_timeout: Duration,
    ) -> Result<Self, OutboundSettingsError> {
        for (i, route) in routes.iter().enumerate() {
            if routes[..i].iter().any(|r| r.name == route.name) {
                return Err(OutboundSettingsError::Twice(route.name.clone()));
            }
        }
        if let Some(name) = default {
            let Some(at) = routes.iter().position(|r| r.name == name) else {
                let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
                return Err(OutboundSettingsError::NoDefault(name.to_owned(), names.join(", ")));
            };
            let chosen = routes.remove(at);
            routes.insert(0, chosen);
        }
        let first = routes.first().ok_or(OutboundSettingsError::None)?;
        let (trunk, tls) = (first.trunk.clone(), first.tls.clone());
        Ok(Self { trunk, tls, routes, ring_timeout, direct: false })
    }

    /// The trunk named `name` (`None`: the default).
    pub fn route(&self, name: Option<&str>) -> Option<&Route> {
        match name {
            None => self.routes.first(),
            Some(name) => self.routes.iter().find(|r| r.name == name),
        }
    }

    /// The trunks' names, the default first.
    pub fn names(&self) -> Vec<String> {
        self.routes.iter().map(|r| r.name.clone()).collect()
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
