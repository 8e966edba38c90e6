//! Random event sequences against a model of the relay task and its runtimes. Whatever
//! happens — inputs, replies, lost and draining pods, handoffs, failed opens, a client that
//! leaves — three things hold:
//!
//! - **one runtime at a time**: a runtime session is opened only when none is open;
//! - **no message delivered twice, none lost**: every runtime reply reaches the client
//!   exactly once — a client that leaves resumes with the number of the last message it
//!   got, and gets what it missed (the replay buffer is large enough here) — and the
//!   numbers of kept messages only grow;
//! - **no lost typed input, none twice**: every typed input is taken up by a runtime (once)
//!   or waits in the session and in the inbox of the runtime open now. The inputs are all
//!   the same text, some with the client's id and some without: they are told apart by the
//!   ids the gateway gives them, and the client gets each echo once, with its own id.

use std::collections::{HashSet, VecDeque};

use proptest::prelude::*;
use serde_json::json;
use switchboard_core::protocol::{ClientMessage, ServerKind, ServerMessage, close_code, decode_client};
use tokio_tungstenite::tungstenite::Message as UpMessage;

use super::{Drive, addr, complete, handoff, limits, refused, say, wire};
use crate::resume::Frame;
use crate::session::kept::client_id;
use crate::session::machine::{ClientFrame, Cx, Effect, Ending, Event, Machine, Phase, Recorded, RuntimeFrame};

#[derive(Clone, Debug)]
enum Step {
    /// The client types the same text again, with an id of its own or without.
    Type(bool),
    Audio,
    /// The runtime takes up the oldest input it has.
    TakeUp,
    /// The runtime refuses the newest input it has (`busy`: too many waiting).
    Refuse,
    Reply,
    Complete,
    Lost,
    Drain,
    HandOff,
    DirectoryChanged,
    ClientGone,
    Ping,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => any::<bool>().prop_map(Step::Type),
        2 => Just(Step::Audio),
        4 => Just(Step::TakeUp),
        1 => Just(Step::Refuse),
        4 => Just(Step::Reply),
        3 => Just(Step::Complete),
        1 => Just(Step::Lost),
        1 => Just(Step::Drain),
        1 => Just(Step::HandOff),
        1 => Just(Step::DirectoryChanged),
        1 => Just(Step::ClientGone),
        1 => Just(Step::Ping),
    ]
}

/// The task and the runtimes as the machine sees them.
#[derive(Default)]
struct World {
    /// The pod of the runtime session open now.
    open: Option<u8>,
    /// Typed inputs the open runtime received and has not taken up, oldest first: their
    /// ids and texts.
    inbox: VecDeque<(String, String)>,
    /// The gateway's ids of the typed inputs the client sent (the session's count, and
    /// the client's id after a colon when it gave one).
    typed: Vec<String>,
    /// Typed inputs (by the gateway's id) a runtime took up.
    taken: HashSet<String>,
    /// Typed inputs (by the gateway's id) a runtime refused.
    refused: HashSet<String>,
    /// The client's ids in the echoes the client received.
    echoed: HashSet<String>,
    /// Runtime frames (by payload) the client received.
    delivered: HashSet<String>,
    /// The runtime's numbered transcript lines handed to the conversation record.
    recorded: HashSet<String>,
    /// The last kept number the client saw.
    last_seq: u64,
    /// The number of the last message the client received (what it resumes with).
    received: u64,
    frames: u64,
}

impl World {
    /// Carries out effects as the task would, checking them.
    fn apply(&mut self, drive: &Drive, effects: Vec<Effect>) -> Result<(), TestCaseError> {
        for effect in effects {
            match effect {
                Effect::Client(Frame::Text(text)) => {
                    let message: ServerMessage = serde_json::from_str(text.as_str()).expect("JSON to the client");
                    if let ServerMessage::BidiTranscriptStream { text, .. } = &message
                        && text.starts_with("frame ")
                    {
                        prop_assert!(self.delivered.insert(text.clone()), "{text} delivered twice");
                        prop_assert!(self.recorded.contains(text), "{text} delivered but not recorded");
                    }
                    if let ServerMessage::BidiTranscriptStream { input_id: Some(id), .. }
                    | ServerMessage::BidiError { input_id: Some(id), .. } = &message
                    {
                        prop_assert!(self.echoed.insert(id.clone()), "the answer to {id} delivered twice");
                        let mine = self.taken.iter().chain(&self.refused).any(|g| client_id(g) == Some(id.as_str()));
                        prop_assert!(mine, "an answer to {id}, which no runtime took up or refused");
                    }
                }
                Effect::Client(Frame::Binary(_))
                | Effect::CloseClient(_)
                | Effect::Hold { .. }
                | Effect::Note(_)
                | Effect::PingClient => {}
                Effect::PingRuntime => prop_assert!(self.open.is_some(), "a ping for no runtime"),
                Effect::Runtime { message: UpMessage::Text(text), .. } => {
                    prop_assert!(self.open.is_some(), "a message for no runtime");
                    if let Ok(ClientMessage::BidiTextInput { text, id }) = decode_client(text.as_str()) {
                        let id = id.ok_or_else(|| TestCaseError::fail(format!("{text} sent with no id")))?;
                        self.inbox.push_back((id, text));
                    }
                }
                Effect::Runtime { .. } | Effect::AssertIdentity(_) => {
                    prop_assert!(self.open.is_some(), "a message for no runtime")
                }
                Effect::CloseRuntime => self.closed(),
                Effect::Record(Recorded::Server(text)) => {
                    prop_assert!(ServerKind::peek(text.as_str()) != Some(ServerKind::AudioStream), "audio recorded");
                    if let Ok(ServerMessage::BidiTranscriptStream { text, .. }) = serde_json::from_str(text.as_str())
                        && text.starts_with("frame ")
                    {
                        prop_assert!(self.recorded.insert(text.clone()), "{text} recorded twice");
                    }
                }
                Effect::Record(Recorded::Client(_)) => {}
                Effect::Snapshot(snapshot) => {
                    // What a resume takes should this gateway die: never an input already
                    // taken up (answered twice), never one the client did not send.
                    for typed in &snapshot.kept.in_flight {
                        prop_assert!(self.typed.contains(&typed.id), "{} in a snapshot, never sent", typed.id);
                        prop_assert!(!self.taken.contains(&typed.id), "{} in a snapshot, already taken up", typed.id);
                    }
                }
            }
        }
        prop_assert!(drive.machine.replay().seq >= self.last_seq, "kept numbers only grow");
        self.last_seq = drive.machine.replay().seq;
        if matches!(drive.machine.phase(), Phase::Live) {
            // Everything kept so far was sent while relaying.
            self.received = self.last_seq;
        }
        Ok(())
    }

    fn closed(&mut self) {
        // A runtime that goes takes its queue with it.
        self.open = None;
        self.inbox.clear();
    }

    /// Every typed input is taken up or waits in the session and, while a runtime is
    /// open, in its inbox.
    fn check_inputs(&self, drive: &Drive) -> Result<(), TestCaseError> {
        for id in &self.typed {
            let waits = drive.machine.kept().in_flight.iter().any(|t| t.id == *id)
                && (self.open.is_none() || self.inbox.iter().any(|(i, _)| i == id) || drive.ending().is_some());
            prop_assert!(
                self.taken.contains(id) || self.refused.contains(id) || waits,
                "{id} was lost (in flight: {:?}, inbox: {:?})",
                drive.machine.kept().in_flight,
                self.inbox
            );
        }
        Ok(())
    }

    /// Every reply the runtimes sent reached the client.
    fn check_replies(&self) -> Result<(), TestCaseError> {
        for n in 1..=self.frames {
            prop_assert!(self.delivered.contains(&format!("frame {n}")), "frame {n} never reached the client");
        }
        Ok(())
    }
}

fn run(steps: Vec<Step>, open_ok: Vec<bool>) -> Result<(), TestCaseError> {
    let mut drive = Drive::starting(None);
    let mut world = World::default();
    let mut opens = open_ok.into_iter().cycle();
    let mut pod = 0u8;
    for step in steps {
        // The task answers what the machine waits for first.
        loop {
            let event = match drive.machine.phase() {
                Phase::Opening(_) => {
                    prop_assert!(world.open.is_none(), "a second runtime while one is open");
                    if opens.next().unwrap_or(true) {
                        pod = pod % 4 + 1;
                        world.open = Some(pod);
                        world.inbox.clear();
                        Event::Opened(Ok(addr(pod)))
                    } else {
                        Event::Opened(Err(refused(pod)))
                    }
                }
                Phase::Backoff(_) => Event::RetryDue,
                _ => break,
            };
            let effects = drive.on(event);
            world.apply(&drive, effects)?;
        }
        match drive.ending() {
            // The client comes back with the number of the last message it got.
            Some(Ending::Park) => {
                world.closed();
                let parked = drive.machine.take_parked();
                let target = drive.directory.lookup(&parked.namespace, &parked.agent, parked.reach).expect("routed");
                let cx = Cx { now: drive.now, directory: &drive.directory, outages: &drive.outages };
                drive.machine = Machine::resume(limits(), "key".into(), parked, target, Some(world.received), &cx);
                continue;
            }
            Some(_) => break,
            None => {}
        }
        let live = matches!(drive.machine.phase(), Phase::Live);
        let event = match step {
            // The task reads the client only while relaying.
            Step::Type(_) | Step::Audio | Step::ClientGone if !live => continue,
            Step::Type(with_id) => {
                let n = world.typed.len() + 1;
                let mine = with_id.then(|| format!("c{n}"));
                world.typed.push(mine.as_ref().map_or(n.to_string(), |id| format!("{n}:{id}")));
                let input = json!({"type": "bidi_text_input", "text": "the same again", "id": mine});
                Event::Client(ClientFrame::Text(input.to_string().into()), Ok(()))
            }
            Step::Audio => Event::Client(ClientFrame::Binary(vec![0; 8].into()), Ok(())),
            Step::TakeUp => match world.inbox.pop_front() {
                Some((id, text)) if world.open.is_some() => {
                    prop_assert!(!world.refused.contains(&id) && world.taken.insert(id.clone()), "{id} taken up twice");
                    let mut echo = say("user", &text);
                    echo["input_id"] = json!(id);
                    Event::Runtime(RuntimeFrame::Text(wire(echo).into()))
                }
                _ => continue,
            },
            Step::Refuse => match world.inbox.pop_back() {
                Some((id, _)) if world.open.is_some() => {
                    prop_assert!(!world.taken.contains(&id) && world.refused.insert(id.clone()), "{id} answered twice");
                    let busy = json!({"type": "bidi_error", "code": "busy", "message": "m", "recoverable": true, "input_id": id});
                    Event::Runtime(RuntimeFrame::Text(wire(busy).into()))
                }
                _ => continue,
            },
            Step::Reply => {
                world.frames += 1;
                Event::Runtime(RuntimeFrame::Text(wire(say("assistant", &format!("frame {}", world.frames))).into()))
            }
            Step::Complete => Event::Runtime(RuntimeFrame::Text(wire(complete()).into())),
            Step::Lost => {
                world.closed();
                Event::Runtime(RuntimeFrame::Lost)
            }
            Step::Drain => Event::Runtime(RuntimeFrame::Text(
                wire(json!({"type": "bidi_connection_draining", "seconds": 30})).into(),
            )),
            Step::HandOff => {
                let effects = drive.on(Event::Runtime(RuntimeFrame::Text(wire(handoff("idv")).into())));
                world.apply(&drive, effects)?;
                world.closed();
                Event::Runtime(RuntimeFrame::Closed { code: close_code::HANDOFF, reason: String::new() })
            }
            Step::DirectoryChanged => Event::DirectoryChanged,
            Step::Ping => Event::PingDue,
            Step::ClientGone => Event::Client(ClientFrame::Gone, Ok(())),
        };
        if matches!(drive.machine.phase(), Phase::Settling(_)) && world.open.is_none() {
            break;
        }
        let effects = drive.on(event);
        world.apply(&drive, effects)?;
        world.check_inputs(&drive)?;
    }
    world.check_inputs(&drive)?;
    if matches!(drive.machine.phase(), Phase::Live) {
        world.check_replies()?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_input_lost_no_frame_twice_one_runtime_at_a_time(
        steps in proptest::collection::vec(step(), 1..60),
        open_ok in proptest::collection::vec(proptest::bool::weighted(0.8), 1..8),
    ) {
        run(steps, open_ok)?;
    }
}
