// Generated from clients/typescript/src/protocol.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
// Generated from schema/protocol.schema.json by scripts/generate.mjs (npm run generate). Do not edit.
//
// Switchboard session protocol 1.2.0: https://switchboard.dev/schema/protocol/1.2.0/protocol.schema.json
/** The version of the session protocol these types describe. */
export const PROTOCOL_VERSION = "1.2.0";
/** The `type` of every ClientMessage. */
export const CLIENT_MESSAGE_TYPES = [
    "session_start",
    "bidi_audio_input",
    "bidi_audio_input_end",
    "bidi_cancel",
    "bidi_audio_played",
    "session_update",
    "bidi_text_input",
    "bidi_dtmf",
    "tool_consent",
    "client_tool_result",
    "transfer_result",
    "digits_result",
    "close",
];
/** The `type` of every ServerMessage. */
export const SERVER_MESSAGE_TYPES = [
    "bidi_connection_start",
    "bidi_transcript_stream",
    "bidi_response_start",
    "bidi_response_complete",
    "bidi_usage",
    "bidi_audio_stream",
    "bidi_interruption",
    "bidi_speech_started",
    "bidi_speech_stopped",
    "bidi_session_state",
    "bidi_session_updated",
    "bidi_connection_restart",
    "tool_start",
    "tool_progress",
    "tool_complete",
    "tool_error",
    "consent_request",
    "client_tool_call",
    "display_card",
    "transfer_request",
    "digits_request",
    "handoff",
    "memory_update",
    "workflow_transition",
    "workflow_line",
    "bidi_error",
    "bidi_session_queued",
    "bidi_session_fallback",
    "bidi_session_outage",
    "bidi_connection_draining",
    "bidi_connection_close",
];
