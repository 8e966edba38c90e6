//! The caller's audio through a gateway that gathers it into 100 ms frames for the runtime
//! (`GatewayConfig::audio_batch`, `switchboard gateway --audio-batch-ms`), in front of a
//! real runtime process (its own events 60 ms, the default) and the simulator: every 20 ms
//! frame the client sent reaches the voice model once and in the order sent, five to an
//! `audioInput` event (the runtime, told of the batches in the grant, sends each as it
//! comes), and the caller's turn is heard and answered as before. (Push-to-talk, whose
//! last frames go before the client's `bidi_audio_input_end`, and stream replacements are
//! tested in local mode, which gathers the caller's audio the same way: tests/voice `live`
//! and `lifetime`.)

use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, SessionState, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::fleet::Fleet;
use crate::voice_common::{self as common, Call, Encoding, summary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_audio_reaches_the_model_whole_in_order_and_each_turn_is_answered() {
    let script = Script::parse(&common::script("", "")).expect("the voice script");
    let config = GatewayConfig { audio_batch: Duration::from_millis(100), ..GatewayConfig::default() };
    let fleet = Fleet::with_script(&[], Auth::default(), config, Store::default(), script).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    // Triage's greeting is played whole: speech over it would reach the model later, after
    // silence in its place (turn taking), not as sent; and the simulator, still speaking the
    // greeting, takes speech that starts at once for a barge-in and mishears the tone (it
    // heard "(inaudible)" in 2 of 3 runs, batched or not). It is over well within a second.
    call.until(|m| matches!(m, ServerMessage::BidiSessionState { state: SessionState::Ready })).await;
    call.read_until(tokio::time::Instant::now() + Duration::from_secs(1)).await;

    // A phrase, then the silence after it (an open microphone): the model ends the turn on
    // that silence and answers it.
    call.say(common::HOURS, 610);
    let turn = call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    assert_eq!(common::finals(&turn, TranscriptRole::User), ["What are your opening hours?"], "{:#?}", summary(&turn));
    call.read_until(tokio::time::Instant::now() + Duration::from_millis(500)).await;
    let sent = call.hang_up().await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let stats = fleet.sim.sonic_stats();
        if stats.frames.len() >= sent.len() || tokio::time::Instant::now() >= deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let received: Vec<u64> = stats.frames.iter().map(|frame| frame.fingerprint).collect();
    assert!(sent.len() > 60, "the call sent {} frames", sent.len());
    assert_eq!(received.len(), sent.len(), "every frame reached the model once");
    assert!(received == sent, "the frames reached the model in the order they were sent");
    assert_eq!(stats.streams, 1, "one stream heard them all");
    assert!(
        stats.audio_events * 4 <= stats.audio_frames,
        "{} events carried {} frames: the gateway's 100 ms batches, not the runtime's own 60 ms events",
        stats.audio_events,
        stats.audio_frames
    );
}
