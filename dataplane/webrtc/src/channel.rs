//! The data channel's rules: it carries the session protocol's JSON messages unchanged, one
//! per message, under the same limit as the WebSocket (the gateway's `max_message_bytes`,
//! 64 KiB by default). A message over the limit ends the call, as it closes a WebSocket with
//! 1009; text that is not UTF-8 or not JSON, and binary messages (audio has its own track),
//! are refused with a `bidi_error` and the call goes on, as the runtime answers a bad
//! WebSocket frame. What the call sends the client in each case is [`ChannelError::reply`].

use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};

/// The gateway's default largest client message (its `--max-message-bytes`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Why a data-channel message from the client was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Over the limit: the call ends.
    #[error("a message exceeded the limit of {limit} bytes ({size} bytes)")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A binary message.
    #[error(
        "a binary data-channel message ({size} bytes) was refused: send the session protocol's JSON as text; audio goes on the audio track"
    )]
    Binary {
        /// Its size.
        size: usize,
    },
    /// Text that is not UTF-8.
    #[error("the message is not UTF-8 text; send one JSON object per data-channel message")]
    NotUtf8(#[source] std::string::FromUtf8Error),
    /// Text that is not JSON.
    #[error("the message is not valid JSON ({0}); send one JSON object per data-channel message")]
    NotJson(#[source] serde_json::Error),
}

impl ChannelError {
    /// Whether the call ends over it (a message too large, as a WebSocket closes with 1009).
    pub fn ends_call(&self) -> bool {
        matches!(self, Self::TooLarge { .. })
    }

    /// The WebSocket close code the same error gets there, where it ends the session.
    pub fn close_code(&self) -> Option<u16> {
        self.ends_call().then_some(close_code::TOO_BIG)
    }

    /// The `bidi_error` code, where the call goes on.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::TooLarge { .. } => None,
            Self::Binary { .. } => Some(ErrorCode::UnsupportedFrame),
            Self::NotUtf8(_) | Self::NotJson(_) => Some(ErrorCode::InvalidJson),
        }
    }

    /// What the client is told on the data channel: a recoverable `bidi_error`, or (too
    /// large) `bidi_connection_close` with the reason before the call ends.
    pub fn reply(&self) -> ServerMessage {
        match self.code() {
            Some(code) => ServerMessage::error(code, self.to_string(), true),
            None => ServerMessage::BidiConnectionClose { reason: self.to_string() },
        }
    }
}

/// A message from the client, checked: its text when it is one JSON value within `limit`.
pub fn check_incoming(binary: bool, data: Vec<u8>, limit: usize) -> Result<String, ChannelError> {
    if data.len() > limit {
        return Err(ChannelError::TooLarge { size: data.len(), limit });
    }
    if binary {
        return Err(ChannelError::Binary { size: data.len() });
    }
    let text = String::from_utf8(data).map_err(ChannelError::NotUtf8)?;
    serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(ChannelError::NotJson)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_within_the_limit_passes_unchanged() {
        let text = r#"{"type":"session_start","agent":"triage"}"#;
        assert_eq!(check_incoming(false, text.as_bytes().to_vec(), 64).expect("passes"), text);
        let exactly = format!("\"{}\"", "a".repeat(62));
        assert!(check_incoming(false, exactly.into_bytes(), 64).is_ok(), "the limit itself is allowed");
    }

    #[test]
    fn the_session_asks_the_runtime_for_what_the_call_transcodes() {
        use switchboard_core::audio::{Direction, Encoding, resolve};
        let settings = crate::CallConfig::default().audio_settings();
        let input = resolve(settings.input.as_ref().expect("input"), Direction::Input).expect("supported");
        let output = resolve(settings.output.as_ref().expect("output"), Direction::Output).expect("supported");
        assert_eq!((input.encoding, input.rate), (Encoding::Pcm16, 16_000));
        assert_eq!((output.encoding, output.rate), (Encoding::Pcm16, 24_000));
        assert!(settings.binary_output);
    }

    #[test]
    fn too_large_ends_the_call_like_1009() {
        let error = check_incoming(false, vec![b' '; 65], 64).expect_err("too large");
        assert!(error.ends_call());
        assert_eq!(error.close_code(), Some(1009));
        let ServerMessage::BidiConnectionClose { reason } = error.reply() else { panic!("a close") };
        assert!(reason.contains("limit of 64 bytes"), "{reason}");
        // Checked before anything else: a huge binary message is too large, not binary.
        assert!(check_incoming(true, vec![0; 65], 64).expect_err("too large").ends_call());
    }

    #[test]
    fn malformed_messages_get_a_recoverable_bidi_error() {
        for (binary, data, code) in [
            (false, b"{\"type\":".to_vec(), ErrorCode::InvalidJson),
            (false, vec![0xff, 0xfe], ErrorCode::InvalidJson),
            (true, b"{}".to_vec(), ErrorCode::UnsupportedFrame),
        ] {
            let error = check_incoming(binary, data, 64).expect_err("refused");
            assert!(!error.ends_call());
            let ServerMessage::BidiError { code: sent, recoverable, .. } = error.reply() else { panic!("an error") };
            assert_eq!((sent, recoverable), (code, true), "{error}");
        }
    }
}
