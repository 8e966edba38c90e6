//! Audio input formats: raw PCM16 in binary frames and base64 JSON are both accepted in
//! one session; bad audio (half a sample, bad base64, more than a second in one frame)
//! gets a clear recoverable `bidi_error` and the session goes on.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{self, Call, Encoding, finals, is_final_reply};

fn error_code(message: &ServerMessage) -> Option<&str> {
    match message {
        ServerMessage::BidiError { code, recoverable: true, .. } => Some(code.as_str()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_json_audio_are_accepted_and_bad_audio_is_refused_without_ending_the_session() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.say(common::HOURS, 500);
    call.until(|m| is_final_reply(m, "nine to five")).await;
    let binary_frames = running.sim.sonic_stats().audio_frames;
    assert!(binary_frames > 20);

    call.encoding(Encoding::Json);
    call.say(common::STORY, 500);
    call.until(|m| is_final_reply(m, "Once upon a time")).await;
    assert!(running.sim.sonic_stats().audio_frames > binary_frames + 20);

    call.send_raw(Message::binary(vec![0u8; 641]));
    let odd = call.until(|m| error_code(m).is_some()).await;
    assert_eq!(odd.last().and_then(error_code), Some("invalid_audio_length"));
    call.send(&ClientMessage::BidiAudioInput { audio: "this is not base64!".into() });
    let bad = call.until(|m| error_code(m).is_some()).await;
    assert_eq!(bad.last().and_then(error_code), Some("invalid_audio_base64"));
    call.send_raw(Message::binary(vec![0u8; 48_000]));
    let big = call.until(|m| error_code(m).is_some()).await;
    let message = format!("{:?}", big.last());
    assert_eq!(big.last().and_then(error_code), Some("audio_too_large"), "{message}");
    assert!(message.contains("20-100 ms"), "the error says what to do: {message}");

    // Still talking.
    tokio::time::sleep(Duration::from_millis(100)).await;
    call.say(common::STOP, 500);
    let after = call.until(|m| is_final_reply(m, "Sure.")).await;
    assert!(finals(&after, TranscriptRole::User).iter().any(|t| t == "Stop"));
    call.hang_up().await;
}
