//! Reading protocol messages: transcripts, reply audio and its pitch, metrics.

use std::net::SocketAddr;

use switchboard_core::protocol::{ServerMessage, TranscriptRole};

/// Messages without their audio payloads, for readable failure output.
pub fn summary(messages: &[ServerMessage]) -> Vec<String> {
    messages.iter().filter(|m| !matches!(m, ServerMessage::BidiAudioStream { .. })).map(|m| format!("{m:?}")).collect()
}

/// FINAL texts of `role`.
pub fn finals(messages: &[ServerMessage], role: TranscriptRole) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream { role: r, text, is_final: true, .. } if *r == role => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

/// Bytes of reply audio among `messages` (each chunk checked to be whole PCM16 samples).
pub fn audio_bytes(messages: &[ServerMessage]) -> usize {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiAudioStream { audio, .. } => {
                let pcm = aws_smithy_types::base64::decode(audio).expect("audio is base64");
                assert_eq!(pcm.len() % 2, 0, "reply audio is whole PCM16 samples");
                Some(pcm.len())
            }
            _ => None,
        })
        .sum()
}

/// The pitch of the reply audio among `messages` (24 kHz PCM16): which of the simulator's
/// voices spoke it ([`switchboard_sim::sonic::voice_frequency`]).
pub fn audio_pitch(messages: &[ServerMessage]) -> f64 {
    let mut samples = Vec::new();
    for message in messages {
        if let ServerMessage::BidiAudioStream { audio, .. } = message {
            let pcm = aws_smithy_types::base64::decode(audio).expect("audio is base64");
            samples.extend(pcm.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])));
        }
    }
    switchboard_sim::sonic::pitch(&samples, 24_000)
}

/// Is this the FINAL assistant text `text`?
pub fn is_final_reply(message: &ServerMessage, text: &str) -> bool {
    matches!(message, ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, text: t, is_final: true, .. } if t.contains(text))
}

/// GETs `/metrics` over a real TCP connection.
pub async fn metrics(addr: SocketAddr) -> String {
    http_get(addr, "/metrics").await.1
}

/// `GET path` from `addr` with no credential: the status and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// The sum of the samples of metric `name` whose labels contain every `labels` pair.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}
