//! Lines a session sends that several of its parts say the same way: a final transcript
//! line, and the refusal of a typed input.

use crate::protocol::{ErrorCode, ServerMessage, TranscriptRole};

/// A final transcript line; the user's for a typed input taken up acknowledges it by `id`.
pub(crate) fn final_text(role: TranscriptRole, text: &str, id: Option<String>) -> ServerMessage {
    ServerMessage::BidiTranscriptStream { role, text: text.to_owned(), delta: false, is_final: true, input_id: id }
}

/// A recoverable `bidi_error` refusing the typed input `id`.
pub(crate) fn refused_input(code: ErrorCode, message: impl Into<String>, id: Option<String>) -> ServerMessage {
    ServerMessage::error_for_input(code, message, true, id)
}
