//! Why a call's relay stopped ([`End`]): the call's task ends with it, the bridge to a
//! person returns it, and the metrics count calls by it.

use switchboard_sip::call::EndReason;

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
