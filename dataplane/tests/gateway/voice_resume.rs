//! A voice call whose connection drops while the agent speaks (no close: the socket just
//! goes) resumes with its token: the rest of the reply — its audio and its transcript —
//! arrives once, nothing of what was already received comes again, and the call goes on
//! with audio both ways.

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::fleet::Fleet;
use crate::resume::position;
use crate::voice_common::{self as common, Call, Encoding, audio_bytes, finals, is_final_reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_call_dropped_while_the_agent_speaks_resumes_with_the_rest_of_the_reply() {
    let script = Script::parse(&common::script("", "")).expect("the voice script");
    let fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::STORY, 600);
    // The agent starts speaking; the connection drops two chunks into its reply.
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    let before = call.seen.clone();
    assert!(!before.iter().any(|m| is_final_reply(m, "Once upon a time")), "dropped mid-reply");
    call.vanish().await;

    let (token, last_seq) = position(&before);
    let mut call = Call::resume(&fleet.url, &token, last_seq, Encoding::Binary).await;
    let mut rest = call.until(|m| is_final_reply(m, "Once upon a time")).await;
    if !rest.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })) {
        rest.extend(call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await);
    }
    assert!(audio_bytes(&rest) > 0, "the rest of the reply's audio: {:#?}", common::summary(&rest));
    // Every message is numbered, the resumed session's start too: each one between the two
    // starts arrived once — none lost, none twice (audio chunks of a steady tone look
    // alike, so they are counted, not compared).
    let start = |m: &ServerMessage| match m {
        ServerMessage::BidiConnectionStart { seq: Some(seq), .. } => Some(*seq),
        _ => None,
    };
    let (at, first) = before.iter().enumerate().find_map(|(i, m)| Some((i, start(m)?))).expect("the first start");
    let (upto, next) = rest.iter().enumerate().find_map(|(i, m)| Some((i, start(m)?))).expect("the resumed start");
    let between = (before.len() - at - 1) + upto;
    assert_eq!(u64::try_from(between).expect("count"), next - first - 1, "{:#?}", common::summary(&rest));
    let all: Vec<ServerMessage> = before.iter().chain(&rest).cloned().collect();
    let story = finals(&all, TranscriptRole::Assistant).into_iter().filter(|t| t.starts_with("Once upon a time"));
    assert_eq!(story.count(), 1, "the reply's transcript once: {:#?}", common::summary(&all));

    // The call goes on, aloud.
    call.say(common::HOURS, 600);
    let hours = call.until(|m| is_final_reply(m, "We are open")).await;
    assert!(audio_bytes(&hours) > 0, "{:#?}", common::summary(&hours));
    call.hang_up().await;
}
