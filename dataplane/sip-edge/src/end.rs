//! Why a call's relay stopped ([`End`]): the call's task ends with it, the bridge to a
//! person returns it, and the metrics count calls by it.

use switchboard_core::outbound::HungUpBy;
use switchboard_sip::call::EndReason;

/// How a bridge ends when the caller's leg hangs up ([`End::Bridged`]).
pub(crate) const BRIDGE_CALLER_HUNG_UP: &str = "the caller hung up";
/// How a bridge ends when the person's leg hangs up ([`End::Bridged`]).
pub(crate) const BRIDGE_PERSON_HUNG_UP: &str = "the person hung up";

/// Why the relay stopped.
#[derive(Debug)]
pub(crate) enum End {
    Caller(EndReason),
    Session(String),
    MediaTimeout,
    Shutdown,
    /// The session ended with the caller put through to a person the edge dialled; the
    /// bridge between them ended so.
    Bridged(&'static str),
    /// The Agent went into outage mode; the caller heard the outage announcement and goes
    /// to the Agent's fallback: its person, if it names one.
    Outage(Option<switchboard_core::protocol::FallbackPerson>),
}

impl End {
    /// Who ended the call: the phone side's BYE, the agent (its session, outage mode), the
    /// person a bridge reached, or the edge (media timeout, failure, shutdown).
    pub(crate) fn hung_up_by(&self) -> HungUpBy {
        match self {
            Self::Caller(EndReason::RemoteHangUp) | Self::Bridged(BRIDGE_CALLER_HUNG_UP) => HungUpBy::Callee,
            Self::Bridged(BRIDGE_PERSON_HUNG_UP) => HungUpBy::Person,
            Self::Session(_) | Self::Outage(_) => HungUpBy::Agent,
            Self::Caller(_) | Self::MediaTimeout | Self::Shutdown | Self::Bridged(_) => HungUpBy::Edge,
        }
    }

    /// Who ended the call and why, for the log.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Caller(reason) => format!("the phone side: {reason:?}"),
            Self::Session(why) => format!("the session ended ({why})"),
            Self::MediaTimeout => "no RTP from the phone for the media timeout".to_owned(),
            Self::Shutdown => "the edge is shutting down".to_owned(),
            Self::Bridged(how) => format!("bridged to the person the edge dialled; then {how}"),
            Self::Outage(_) => "outage mode: the outage announcement played, then the Agent's fallback".to_owned(),
        }
    }
}
