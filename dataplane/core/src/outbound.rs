//! Outbound calls between the gateway and the SIP edge: the one type of each message on the
//! edge's dispatch connection (`GET /v1/calls/edge`, a WebSocket the edge opens to the
//! gateway with its credential) and the states a call goes through.
//!
//! An edge names its outbound trunks as its dispatch connection opens ([`FromEdge::Trunks`],
//! the default first). The gateway takes `POST /v1/calls` (with a trunk's name, or none: the
//! edge's default), picks a connected edge that has that trunk and sends it
//! [`ToEdge::Place`] with a one-time `ticket`. The edge places the call through the trunk and reports
//! each step as [`FromEdge::Progress`]; once the callee answers it opens an ordinary session
//! at `/v1/session` for the agent, presenting the ticket in the [`TICKET_HEADER`] header of
//! its WebSocket request. The gateway takes the ticket once and seeds the session's memory
//! with the call ([`MEMORY_KEY`]: its id, whom it called and the variables the API request
//! gave): context only the gateway vouches for, which no client of `/v1/session` can set.
//! An Agent with answering-machine detection has it in the [`ToEdge::Place`]; the edge
//! reports who answered ([`FromEdge::Detected`]) and when the callee first heard the agent
//! ([`FromEdge::Heard`]), and opens the session saying who answered
//! ([`ANSWERED_BY_HEADER`]): the session's call then has `answeredBy`, so the model knows
//! whether it talks to a person or leaves its message on a machine.

use serde::{Deserialize, Serialize};
pub use switchboard_crds::agent::{AnsweringMachine, OnMachine};

/// Where callers place calls (`POST`) and read one (`GET /v1/calls/{id}`).
pub const CALLS_PATH: &str = "/v1/calls";
/// The SIP edge's dispatch connection (WebSocket).
pub const EDGE_PATH: &str = "/v1/calls/edge";
/// The header of the edge's `/v1/session` request that carries a call's ticket.
pub const TICKET_HEADER: &str = "x-switchboard-call";
/// The header of the edge's `/v1/session` request (beside [`TICKET_HEADER`]) that says who
/// answered, when the Agent has answering-machine detection: [`AnsweredBy::as_str`].
pub const ANSWERED_BY_HEADER: &str = "x-switchboard-answered-by";
/// The memory key under which an answered call's session finds its call.
pub const MEMORY_KEY: &str = "outboundCall";

/// Whether `memory` holds an outbound call its edge found a machine answered (the call's
/// `answeredBy`, [`ANSWERED_BY_HEADER`]).
pub fn answered_by_machine(memory: &crate::memory::Memory) -> bool {
    let by = memory.get(MEMORY_KEY).and_then(|call| call.get("answeredBy")).and_then(serde_json::Value::as_str);
    by == Some(AnsweredBy::Machine.as_str())
}

/// The name an outbound trunk has when it is given none (the single trunk of
/// `--outbound-trunk URI`).
pub const DEFAULT_TRUNK: &str = "default";

/// Whether `name` is an outbound trunk's name: 1-40 lower-case letters, digits and `-`, not
/// starting or ending with `-` (the chart names a volume after it).
pub fn is_trunk_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Where an outbound call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Taken by the gateway, not yet with an edge.
    Queued,
    /// The edge sent the INVITE.
    Dialing,
    /// The callee's phone rings (180/183).
    Ringing,
    /// The callee answered: the session with the agent is open.
    Answered,
    /// Answered, and over (either side hung up).
    Completed,
    /// The callee was busy or declined (486, 600, 603).
    Busy,
    /// Nobody answered within the ring timeout.
    NoAnswer,
    /// It could not be placed or was refused on the way (the SIP status says why).
    Failed,
}

impl CallState {
    /// Whether the call is over.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Busy | Self::NoAnswer | Self::Failed)
    }

    /// The state's name (the metric's `outcome` label for final ones).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dialing => "dialing",
            Self::Ringing => "ringing",
            Self::Answered => "answered",
            Self::Completed => "completed",
            Self::Busy => "busy",
            Self::NoAnswer => "no_answer",
            Self::Failed => "failed",
        }
    }

    fn rank(self) -> u8 {
        match self {
            Self::Queued => 0,
            Self::Dialing => 1,
            Self::Ringing => 2,
            Self::Answered => 3,
            _ => 4,
        }
    }

    /// The state after a report of `next`: forward only, a final state is kept, and once
    /// answered a call can only complete (or fail); `None` when the report is out of order
    /// (ignored).
    pub fn advance(self, next: Self) -> Option<Self> {
        if self.is_final() || next.rank() < self.rank() || next == self {
            return None;
        }
        if self == Self::Answered && matches!(next, Self::Busy | Self::NoAnswer) {
            return None;
        }
        if next == Self::Completed && self != Self::Answered {
            return None;
        }
        Some(next)
    }
}

/// The state a refusal with this SIP status stands for: busy (486 Busy Here, 600 Busy
/// Everywhere, 603 Decline), no answer (408 Request Timeout, 480 Temporarily Unavailable,
/// 487 after the ring timeout's CANCEL), else failed.
pub fn state_of_status(status: u16) -> CallState {
    match status {
        486 | 600 | 603 => CallState::Busy,
        408 | 480 => CallState::NoAnswer,
        _ => CallState::Failed,
    }
}

/// From the gateway to an edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToEdge {
    /// Place a call.
    Place {
        /// The call's id.
        id: String,
        /// Whom to call: an E.164 number or a SIP URI (validated by the gateway).
        to: String,
        /// The agent that talks when the callee answers.
        agent: String,
        /// The one-time ticket the edge presents when it opens the session.
        ticket: String,
        /// The outbound trunk by name ([`FromEdge::Trunks`]); absent: the edge's default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trunk: Option<String>,
        /// The Agent's answering-machine detection (`spec.telephony.answeringMachine`);
        /// absent: none, the agent talks as soon as the call is answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answering_machine: Option<AnsweringMachine>,
    },
}

/// Who answered an outbound call, as answering-machine detection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// A person: the agent talks at once.
    Human,
    /// An answering machine or voicemail.
    Machine,
    /// Detection could not tell in time: the agent talks, as to a person.
    Unknown,
}

impl AnsweredBy {
    /// Its name (the `answered_by` of a call's status; the metric's label).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Machine => "machine",
            Self::Unknown => "unknown",
        }
    }

    /// The one named `text` ([`AnsweredBy::as_str`]'s words), if any.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Human, Self::Machine, Self::Unknown].into_iter().find(|by| by.as_str() == text)
    }
}

/// Who ended a call: an answered outbound call's (its status and callbacks say `callee`,
/// `agent`, `person` or `edge`), and any phone call's session in the conversation record
/// (`crate::phone::close_text`), where an inbound call's caller is `caller`, and the edge's
/// own reasons are told apart (`media_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HungUpBy {
    /// The callee's phone sent BYE (an outbound call).
    Callee,
    /// The caller's phone sent BYE (an inbound call; the record's only).
    Caller,
    /// The agent ended the conversation (its session ended: its `endSession` tool, or its
    /// side closing), or the Agent's `onMachine: hangUp` hung up on an answering machine.
    Agent,
    /// The session ended with the caller put through to a person (the record's only).
    Transfer,
    /// The person a transfer bridged the callee to hung up.
    Person,
    /// The edge: no RTP from the phone for its media timeout (the record's only: an
    /// outbound call's status says `edge`).
    MediaTimeout,
    /// The edge: no RTP for its media timeout (an outbound call's status), a failure, or
    /// the edge shutting down.
    Edge,
}

impl HungUpBy {
    /// Its name (a call's `hung_up_by`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Callee => "callee",
            Self::Caller => "caller",
            Self::Agent => "agent",
            Self::Transfer => "transfer",
            Self::Person => "person",
            Self::MediaTimeout => "media_timeout",
            Self::Edge => "edge",
        }
    }

    /// The one [`HungUpBy::as_str`] names.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Callee, Self::Caller, Self::Agent, Self::Transfer, Self::Person, Self::MediaTimeout, Self::Edge]
            .into_iter()
            .find(|by| by.as_str() == name)
    }
}

/// From an edge to the gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromEdge {
    /// The edge's outbound trunks by name, its default first: sent as the dispatch
    /// connection opens. An edge that never sends it places calls only on its default.
    Trunks {
        /// The names ([`is_trunk_name`]).
        names: Vec<String>,
    },
    /// A call moved on.
    Progress {
        /// The call's id.
        id: String,
        /// Where it is now.
        state: CallState,
        /// The SIP status that moved it (180, 200, 486, 503...), when there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// What happened, in words (a refusal's reason phrase, why it failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The session the answered call opened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// Who ended an answered call (with `completed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hung_up_by: Option<HungUpBy>,
    },
    /// Answering-machine detection decided who answered (in whatever state the call is).
    Detected {
        /// The call's id.
        id: String,
        /// Who answered.
        answered_by: AnsweredBy,
        /// How long after the answer it was decided, in milliseconds.
        after_ms: u64,
    },
    /// The callee first heard the agent: the agent's first audio went out this long after
    /// the answer (the delay AMD, the session's opening and the greeting add together).
    Heard {
        /// The call's id.
        id: String,
        /// Milliseconds from the answer (200 OK) to the agent's first audio.
        after_ms: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::CallState::*;
    use super::*;

    #[test]
    fn a_call_only_moves_forward_and_stays_over() {
        assert_eq!(Queued.advance(Dialing), Some(Dialing));
        assert_eq!(Dialing.advance(Ringing), Some(Ringing));
        assert_eq!(Ringing.advance(Answered), Some(Answered));
        assert_eq!(Dialing.advance(Answered), Some(Answered), "answered without ringing");
        assert_eq!(Answered.advance(Completed), Some(Completed));
        assert_eq!(Ringing.advance(Dialing), None, "a late report is ignored");
        assert_eq!(Answered.advance(Busy), None);
        assert_eq!(Answered.advance(Failed), Some(Failed));
        assert_eq!(Ringing.advance(Completed), None, "only an answered call completes");
        for last in [Completed, Busy, NoAnswer, Failed] {
            for next in [Queued, Dialing, Ringing, Answered, Completed, Busy, NoAnswer, Failed] {
                assert_eq!(last.advance(next), None, "{last:?} then {next:?}");
            }
        }
    }

    #[test]
    fn refusals_read_as_busy_no_answer_or_failed() {
        assert_eq!(state_of_status(486), Busy);
        assert_eq!(state_of_status(603), Busy);
        assert_eq!(state_of_status(480), NoAnswer);
        assert_eq!(state_of_status(404), Failed);
        assert_eq!(state_of_status(503), Failed);
    }

    #[test]
    fn the_dispatch_messages_read_as_they_are_written() {
        let place = ToEdge::Place {
            id: "c1".into(),
            to: "+4420".into(),
            agent: "triage".into(),
            ticket: "t".into(),
            trunk: None,
            answering_machine: None,
        };
        let text = serde_json::to_string(&place).expect("json");
        assert_eq!(text, r#"{"type":"place","id":"c1","to":"+4420","agent":"triage","ticket":"t"}"#);
        let trunks: FromEdge = serde_json::from_str(r#"{"type":"trunks","names":["carrier","pbx"]}"#).expect("reads");
        assert_eq!(trunks, FromEdge::Trunks { names: vec!["carrier".into(), "pbx".into()] });
        assert!(is_trunk_name("carrier-2") && is_trunk_name(DEFAULT_TRUNK));
        for bad in ["", "Carrier", "-x", "x-", "a b", &"a".repeat(41)] {
            assert!(!is_trunk_name(bad), "{bad:?}");
        }
        let report: FromEdge =
            serde_json::from_str(r#"{"type":"progress","id":"c1","state":"no_answer"}"#).expect("reads");
        assert_eq!(
            report,
            FromEdge::Progress {
                id: "c1".into(),
                state: NoAnswer,
                status: None,
                reason: None,
                session_id: None,
                hung_up_by: None
            }
        );
        let ended: FromEdge =
            serde_json::from_str(r#"{"type":"progress","id":"c1","state":"completed","hung_up_by":"callee"}"#)
                .expect("reads");
        let FromEdge::Progress { hung_up_by: Some(HungUpBy::Callee), .. } = ended else { panic!("{ended:?}") };
        let place: ToEdge = serde_json::from_str(
            r#"{"type":"place","id":"c1","to":"+4420","agent":"a","ticket":"t","answering_machine":{"onMachine":"hangUp"}}"#,
        )
        .expect("reads");
        let ToEdge::Place { answering_machine: Some(amd), .. } = place else { panic!("{place:?}") };
        assert_eq!(amd.on_machine, OnMachine::HangUp);
        let detected = FromEdge::Detected { id: "c1".into(), answered_by: AnsweredBy::Machine, after_ms: 2820 };
        assert_eq!(
            serde_json::to_string(&detected).expect("json"),
            r#"{"type":"detected","id":"c1","answered_by":"machine","after_ms":2820}"#
        );
    }
}
