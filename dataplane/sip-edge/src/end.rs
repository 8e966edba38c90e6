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

    /// Who ended the call, as the conversation record keeps it for the call's session
    /// (the edge's `close` says it, [`switchboard_core::phone::close_text`]): an inbound
    /// call's phone is the `caller`, an outbound call's the `callee`; the edge's media
    /// timeout is told apart from its other reasons (`media_timeout`).
    pub(crate) fn recorded(&self, direction: crate::metrics::Direction) -> HungUpBy {
        match (self.hung_up_by(), self) {
            (_, Self::MediaTimeout) => HungUpBy::MediaTimeout,
            (HungUpBy::Callee, _) if direction == crate::metrics::Direction::Inbound => HungUpBy::Caller,
            (by, _) => by,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Direction::{Inbound, Outbound};

    #[test]
    fn the_record_names_an_inbound_calls_phone_the_caller_and_a_media_timeout_as_such() {
        let bye = End::Caller(EndReason::RemoteHangUp);
        assert_eq!((bye.recorded(Inbound), bye.recorded(Outbound)), (HungUpBy::Caller, HungUpBy::Callee));
        let session = End::Session("1000 the conversation is finished".into());
        assert_eq!(session.recorded(Inbound), HungUpBy::Agent);
        assert_eq!(End::MediaTimeout.recorded(Inbound), HungUpBy::MediaTimeout);
        assert_eq!(End::MediaTimeout.recorded(Outbound), HungUpBy::MediaTimeout);
        assert_eq!(End::MediaTimeout.hung_up_by(), HungUpBy::Edge, "an outbound call's status keeps `edge`");
        assert_eq!(End::Shutdown.recorded(Inbound), HungUpBy::Edge);
    }
}
