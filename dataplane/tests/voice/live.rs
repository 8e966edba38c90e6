//! Issue 26 by voice, through local mode's gateway with a real-time microphone: the
//! caller's speech and the session's state as a spoken turn goes, push-to-talk, cancelling a
//! spoken reply, and changing the voice mid-session (with the bad cases' errors).

use switchboard_core::protocol::{
    ClientMessage, ErrorCode, ServerMessage, SessionState, SessionUpdate, StopReason, TranscriptRole,
};

use switchboard_sim::sonic::voice_frequency;

use crate::common::{self, Call, Encoding, is_final_reply, summary};

fn states(messages: &[ServerMessage]) -> Vec<SessionState> {
    messages
        .iter()
        .filter_map(|m| if let ServerMessage::BidiSessionState { state } = m { Some(*state) } else { None })
        .collect()
}

fn position(messages: &[ServerMessage], pred: impl Fn(&ServerMessage) -> bool) -> usize {
    messages.iter().position(pred).unwrap_or_else(|| panic!("not found in {:#?}", summary(messages)))
}

fn is_error(message: &ServerMessage, wanted: &ErrorCode) -> bool {
    matches!(message, ServerMessage::BidiError { code, recoverable: true, .. } if code == wanted)
}

fn is_user_final(message: &ServerMessage, text: &str) -> bool {
    matches!(message, ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text: t, is_final: true, .. } if t == text)
}

/// Starts a call with triage (hybrid) and reads up to its first state.
async fn call(url: &str) -> Call {
    let mut call = Call::start(url, "triage", &["audio"], Encoding::Binary).await;
    let opened = call.until(|m| matches!(m, ServerMessage::BidiSessionState { .. })).await;
    assert_eq!(states(&opened), [SessionState::Ready]);
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_speech_and_the_state_follow_a_spoken_turn() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = call(&running.url()).await;
    call.say(common::HOURS, 600);
    let turn = call.until(|m| is_final_reply(m, "We are open")).await;
    let started = position(&turn, |m| matches!(m, ServerMessage::BidiSpeechStarted {}));
    let stopped = position(&turn, |m| matches!(m, ServerMessage::BidiSpeechStopped {}));
    let heard = position(&turn, |m| is_user_final(m, "What are your opening hours?"));
    assert!(started < stopped && stopped < heard, "{:#?}", summary(&turn));
    assert_eq!(turn.iter().filter(|m| matches!(m, ServerMessage::BidiSpeechStarted {})).count(), 1);
    assert_eq!(
        states(&turn),
        [SessionState::Listening, SessionState::Processing, SessionState::Speaking, SessionState::Ready],
        "{:#?}",
        summary(&turn)
    );
    call.hang_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_to_talk_ends_the_callers_turn_without_waiting_for_silence() {
    // The model ends a turn after 2 s of silence, and the microphone sends nothing after
    // the button is released: only bidi_audio_input_end gets the caller an answer.
    let script =
        common::script("", "").replace("high: 300, medium: 300, low: 300", "high: 2000, medium: 2000, low: 2000");
    let running = common::banking(&script).await;
    let mut call = call(&running.url()).await;
    call.say(common::HOURS, 600);
    call.release();
    let turn = call.until(|m| is_final_reply(m, "We are open")).await;
    let stopped = position(&turn, |m| matches!(m, ServerMessage::BidiSpeechStopped {}));
    let heard = position(&turn, |m| is_user_final(m, "What are your opening hours?"));
    assert!(stopped < heard, "{:#?}", summary(&turn));
    call.hang_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_spoken_reply_stops_and_stays_silent_until_the_caller_speaks() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = call(&running.url()).await;
    call.send(&ClientMessage::BidiCancel {});
    call.until(|m| is_error(m, &ErrorCode::NothingToCancel)).await;

    call.say(common::STORY, 600);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.send(&ClientMessage::BidiCancel {});
    let cancelled = call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    assert!(cancelled.iter().any(|m| matches!(m, ServerMessage::BidiInterruption {})), "{:#?}", summary(&cancelled));
    assert!(matches!(
        cancelled.last(),
        Some(ServerMessage::BidiResponseComplete { stop_reason: StopReason::Cancelled, .. })
    ));

    call.say(common::HOURS, 600);
    let next = call.until(|m| is_final_reply(m, "We are open")).await;
    let heard = position(&next, |m| is_user_final(m, "What are your opening hours?"));
    assert!(
        !next[..heard].iter().any(|m| matches!(m, ServerMessage::BidiAudioStream { .. })),
        "no audio of the cancelled reply: {:#?}",
        summary(&next[..heard])
    );
    let all = [cancelled, next].concat();
    assert!(!all.iter().any(|m| is_final_reply(m, "Once upon a time")), "the cancelled story never completes");
    call.hang_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_voice_changes_mid_session_and_bad_updates_change_nothing() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = call(&running.url()).await;
    let update = |voice: &str| {
        ClientMessage::SessionUpdate(SessionUpdate { voice: Some(voice.into()), ..SessionUpdate::default() })
    };
    call.send_raw(tokio_tungstenite::tungstenite::Message::text(
        r#"{"type":"session_update","voice":"matthew","pitch":3}"#,
    ));
    let unknown = call.until(|m| is_error(m, &ErrorCode::UnknownSetting)).await;
    assert!(matches!(unknown.last(), Some(ServerMessage::BidiError { message, .. }) if message.contains("pitch")));
    call.send(&update("nobody"));
    call.until(|m| is_error(m, &ErrorCode::InvalidVoice)).await;
    call.send(&update("matthew"));
    call.until(
        |m| matches!(m, ServerMessage::BidiSessionUpdated { voice: Some(v), modalities: None } if v == "matthew"),
    )
    .await;
    if !call
        .seen
        .iter()
        .any(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "voice_change"))
    {
        call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "voice_change"))
            .await;
    }
    call.say(common::HOURS, 600);
    let answer = call.until(|m| is_final_reply(m, "We are open")).await;
    let (heard, matthew) = (common::audio_pitch(&answer), voice_frequency(Some("matthew")));
    assert!((heard - matthew).abs() < 3.0, "the answer is in the new voice: {heard:.1} Hz, not {matthew:.1} Hz");
    let voices: Vec<_> = running.sim.sonic_stats().voices.into_iter().map(|(_, v)| v.unwrap_or_default()).collect();
    assert_eq!(voices, ["tiffany", "matthew"], "one stream per voice, no change for the refused updates");
    call.hang_up().await;
}
