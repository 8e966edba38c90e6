// Generated from schema/protocol.schema.json by scripts/generate.mjs (npm run generate). Do not edit.
//
// Switchboard session protocol 1.2.0: https://switchboard.dev/schema/protocol/1.2.0/protocol.schema.json

/** The version of the session protocol these types describe. */
export const PROTOCOL_VERSION = "1.2.0";

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * An audio format: an encoding and a sample rate, mono.
 */
export type AudioFormat = {
  /**
   * `pcm16` (16-bit signed little-endian linear), `mulaw` (G.711 μ-law; also `ulaw`, `g711_ulaw`) or `alaw` (G.711 A-law; also `g711_alaw`).
   */
  encoding?: string;
  /**
   * Samples per second: PCM16 at 8000, 16000 or 24000; G.711 at 8000. Absent: the encoding's usual rate (G.711 8000; PCM16 16000 in and 24000 out).
   */
  sample_rate?: number | null;
};

/**
 * `session_start.audio`: the formats a client sends and wants, and how it wants reply audio. Every field is optional; without it audio is PCM16 at 16 kHz in and 24 kHz out, as base64 in JSON.
 *
 * ```json
 * {"input": {"encoding": "mulaw", "sample_rate": 8000},
 *  "output": {"encoding": "mulaw", "sample_rate": 8000},
 *  "binary_output": true}
 * ```
 */
export type AudioSettings = {
  /**
   * Reply audio as binary WebSocket frames of raw samples in the output format, instead of base64 in `bidi_audio_stream` (a third less traffic). Every other message stays JSON.
   */
  binary_output?: boolean;
  /**
   * The caller's audio (`bidi_audio_input` and binary frames). Default PCM16 16 kHz.
   */
  input?: AudioFormat | null;
  /**
   * The reply audio (`bidi_audio_stream`, or binary frames). Default PCM16 24 kHz.
   */
  output?: AudioFormat | null;
};

/**
 * A card for the client to show.
 */
export type Card = {
  /**
   * Label/value pairs, in order (at most 12).
   */
  fields?: CardField[];
  /**
   * A web link (`http` or `https`).
   */
  link?: CardLink | null;
  /**
   * A line or two of text (at most 1,000 characters).
   */
  text?: string;
  /**
   * The card's title (1-120 characters).
   */
  title: string;
};

/**
 * One label/value pair of a card.
 */
export type CardField = {
  /**
   * The label (1-60 characters).
   */
  label: string;
  /**
   * The value (at most 200 characters; a number the model gave is written as text).
   */
  value: string;
};

/**
 * A card's link.
 */
export type CardLink = {
  /**
   * What the link says (at most 60 characters); empty: the URL.
   */
  label?: string;
  /**
   * Where it goes: an `http` or `https` URL of at most 2,048 characters.
   */
  url: string;
};

/**
 * Opens the session. Must be the first message; a session that sends something else first is started with defaults.
 */
export type SessionStartMessage = SessionStart & {
  type: "session_start";
};

/**
 * A piece of the user's speech: base64 PCM16, 16 kHz, mono, little-endian (voice and hybrid only). Binary WebSocket frames may carry the same audio as raw bytes.
 */
export type BidiAudioInputMessage = {
  /**
   * Base64-encoded audio; `data` is read as the same field.
   */
  audio: string;
  data?: never;
  type: "bidi_audio_input";
} | {
  audio?: never;
  /**
   * The same as `audio`, under its other name: send one of the two.
   */
  data: string;
  type: "bidi_audio_input";
};

/**
 * Push-to-talk: the caller's turn ends now (sessions with audio). The agent answers without waiting for the pause that ends a turn; the client may stop sending audio until the caller speaks again.
 */
export type BidiAudioInputEndMessage = {
  type: "bidi_audio_input_end";
};

/**
 * Stops what the agent is doing for the current turn: its reply (text: the model call; audio: its speech, silenced until the user's next input) and the tool calls and consent requests of the turn (they end as `tool_error` `cancelled`). The turn ends with `stop_reason: cancelled`. With nothing under way: `bidi_error` `nothing_to_cancel`.
 */
export type BidiCancelMessage = {
  type: "bidi_cancel";
};

/**
 * After a barge-in (`bidi_interruption`): how much of the interrupted reply's audio the client really played before it stopped. The conversation keeps the part of the reply that was heard (without it, all audio sent counts as heard). Text sessions ignore it.
 */
export type BidiAudioPlayedMessage = {
  /**
   * Milliseconds of the interrupted reply played.
   */
  audio_played_ms: number;
  type: "bidi_audio_played";
};

/**
 * Changes settings of the session mid-session (`SessionUpdate`).
 */
export type SessionUpdateMessage = SessionUpdate & {
  type: "session_update";
};

/**
 * Something the user typed.
 */
export type BidiTextInputMessage = {
  /**
   * The client's name for this input (a UUID, a counter: any string), optional. The line that takes the input up — its final `bidi_transcript_stream` (role `user`) — carries it back as `input_id`, and so does a `bidi_error` refusing it (`busy`, `empty_text`): a client tells two identical inputs apart by it. Through a gateway the runtime sees the gateway's own id for the input (unique in the session, the client's after a colon: `7:abc`, or just `7`), and the client gets its own back.
   */
  id?: string | null;
  /**
   * The text.
   */
  text: string;
  type: "bidi_text_input";
};

/**
 * Keys the caller pressed on a phone's keypad (DTMF), in order: `0`-`9`, `*`, `#` and `A`-`D`, at most 32 a message (the SIP edge sends one message a key, as it is pressed). The agent is told them as the caller's input ("The caller pressed 1 2 3 #") when the caller ends them with `#`, pauses for 1.5 s, or has pressed 32; the line that tells them is the session's user transcript line, in the record like other caller input (the message itself is never recorded). Other characters, an empty or longer `digits`: `bidi_error` `invalid_dtmf`; more than a person can press (a burst of 32, then 10 a second): `bidi_error` `dtmf_rate`, the keys dropped.
 */
export type BidiDtmfMessage = {
  /**
   * The keys, e.g. `"1"` or `"1234#"`.
   */
  digits: string;
  type: "bidi_dtmf";
};

/**
 * The user's answer to a `consent_request`. A typed or spoken clear "yes" or "no" while one is pending answers it too.
 */
export type ToolConsentMessage = {
  /**
   * True when the user allows the tool to run.
   */
  approved: boolean;
  /**
   * The `tool_use_id` of the `consent_request` answered.
   */
  tool_use_id: string;
  type: "tool_consent";
};

/**
 * The client's answer to a `client_tool_call`: exactly one of `result` (the tool's JSON result, checked against the tool's `outputSchema` when it has one) and `error` (why the client could not run it, e.g. it has no handler for the tool). The model gets either; a result that does not match the schema reaches it as a `client_bad_result` error. An answer for no waiting call gets `bidi_error` `no_client_tool_pending`.
 */
export type ClientToolResultMessage = {
  /**
   * Why the client did not run the tool, for the model (at most 1,000 characters are kept).
   */
  error?: string | null;
  /**
   * The tool's result (any JSON value).
   */
  result?: JsonValue;
  /**
   * The `tool_use_id` of the `client_tool_call` answered.
   */
  tool_use_id: string;
  type: "client_tool_result";
};

/**
 * How a `transfer_request` ended. `transferred`: the caller is with the person and the session ends (the record says to whom); any other outcome comes back to the agent's model as a `tool_error` of kind `transfer_<outcome>`, and the session goes on. A client that cannot transfer calls answers `rejected`.
 */
export type TransferResultMessage = {
  /**
   * What happened, for the model and the record (`486 Busy Here`), optional.
   */
  message?: string;
  /**
   * What became of it.
   */
  outcome: TransferOutcome;
  /**
   * The `tool_use_id` of the `transfer_request` answered.
   */
  tool_use_id: string;
  type: "transfer_result";
};

/**
 * How a `digits_request` ended: `sent` (every key went; `sent` counts them), or why not. Any outcome but `sent` comes back to the agent's model as a `tool_error` of kind `digits_<outcome>`; the session goes on either way. A client that cannot send keys on its call answers `rejected`.
 */
export type DigitsResultMessage = {
  /**
   * What happened, for the model and the record, optional (at most 300 characters are kept).
   */
  message?: string;
  /**
   * What became of it.
   */
  outcome: DigitsOutcome;
  /**
   * How many keys went (pauses not counted): all of them for `sent`, those before the interruption for `interrupted`, none otherwise.
   */
  sent?: number;
  /**
   * The `tool_use_id` of the `digits_request` answered.
   */
  tool_use_id: string;
  type: "digits_result";
};

/**
 * Ends the session now: the server closes the socket with 1000, and the session cannot be resumed (a dropped connection can: see `session_start.resume_token`).
 */
export type CloseMessage = {
  type: "close";
};

/**
 * A message from the client.
 */
export type ClientMessage =
  | SessionStartMessage
  | BidiAudioInputMessage
  | BidiAudioInputEndMessage
  | BidiCancelMessage
  | BidiAudioPlayedMessage
  | SessionUpdateMessage
  | BidiTextInputMessage
  | BidiDtmfMessage
  | ToolConsentMessage
  | ClientToolResultMessage
  | TransferResultMessage
  | DigitsResultMessage
  | CloseMessage;

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
] as const;

/**
 * How a `digits_request` ended (`digits_result.outcome`).
 */
export type DigitsOutcome = "sent" | "unsupported" | "interrupted" | "rejected";

/**
 * The code of a `bidi_error`: what went wrong, stable for programs (the message says it for people). Unless said otherwise an error is recoverable (`recoverable: true`): the session goes on. A refusal at the start of a session, or one that ends it, comes with its close code (`close_code`).
 */
export type ErrorCode = "invalid_json" | "unknown_type" | "malformed_message" | "already_started" | "unsupported_modality" | "unsupported_frame" | "invalid_voice" | "model_not_allowed" | "invalid_audio_base64" | "invalid_audio_length" | "empty_audio" | "audio_too_large" | "empty_text" | "invalid_dtmf" | "dtmf_rate" | "busy" | "no_consent_pending" | "no_client_tool_pending" | "no_transfer_pending" | "no_digits_pending" | "session_over" | "identity_refused" | "model_error" | "empty_reply" | "tool_rounds_exceeded" | "model_throttled" | "model_service_unavailable" | "model_stream_interrupted" | "model_timeout" | "model_connection" | "model_access_denied" | "model_validation" | "model_model_not_found" | "model_credentials" | "model_invalid_tool_input" | "model_config" | "model_protocol" | "context_refused" | "origin" | "missing_key" | "invalid_token" | "app_context_invalid" | "app_context_expired" | "app_context_replayed" | "app_context_too_large" | "app_context_not_accepted" | "app_context_wrong_subject" | "unknown_key" | "key_sessions" | "key_rate" | "agent_not_allowed" | "candidate_not_allowed" | "no_default" | "unknown_agent" | "ambiguous_agent" | "not_exposed" | "no_ready_pod" | "handoff_not_allowed" | "session_rate" | "idle_timeout" | "memory_budget" | "at_capacity" | "capacity_full" | "no_runtime" | "agent_removed" | "handoff_failed" | "replay_gap" | "session_restored" | "session_attached" | "resume_refused" | "store_unavailable" | "nothing_to_cancel" | "unknown_setting" | "consent_unclear" | "unsupported_audio_format" | "fixed_setting" | (string & {});

/**
 * The person an outage fallback puts the caller through to (`bidi_session_fallback`).
 */
export type FallbackPerson = {
  /**
   * Where they are: an E.164 number or a `sip:`/`sips:` URI.
   */
  address: string;
  /**
   * Their name in the Agent (`spec.telephony.people[].name`).
   */
  name: string;
};

/**
 * Everything a receiving agent is told about a handed-over session.
 */
export type HandoffContext = {
  /**
   * The agent handing over.
   */
  from_agent: string;
  /**
   * The conversation so far, as text, oldest first.
   */
  history?: HistoryTurn[];
  /**
   * What the user wants (memory `intent` when set, else the reason).
   */
  intent?: string | null;
  /**
   * Transfer or return.
   */
  kind: HandoffKind;
  /**
   * The user's last message before the handoff.
   */
  last_user_message?: string | null;
  /**
   * The whole session memory.
   */
  memory?: {
    [key: string]: unknown;
  };
  /**
   * Why, in the model's words (the tool call's `reason`).
   */
  reason: string;
  /**
   * The agent the receiving agent may return to (`return_to_<agent>`); kept across onward transfers.
   */
  return_to?: string | null;
  /**
   * For returns: how the work ended.
   */
  status?: ReturnStatus | null;
  /**
   * For returns: what was done.
   */
  summary?: string | null;
  /**
   * The verified user (memory `verifiedUser`), when identity was checked.
   */
  verified_user?: JsonValue;
  /**
   * Where the handing-over agent was in its workflow.
   */
  workflow_state: WorkflowSnapshot;
};

/**
 * Transfer to another agent, or return to the caller.
 */
export type HandoffKind = "transfer" | "return";

/**
 * One turn of carried conversation, reduced to text.
 */
export type HistoryTurn = {
  /**
   * `user` or `assistant`.
   */
  role: TranscriptRole;
  /**
   * What was said.
   */
  text: string;
};

/**
 * How a workflow node's spoken line went (`workflow_line`).
 */
export type LinePlayed = "whole" | "cut" | "abandoned";

/**
 * How the work of a returning agent ended.
 */
export type ReturnStatus = "completed" | "failed" | "cancelled";

/**
 * The session is open on `agent`: the first message of a session, and again after every handoff (after the `handoff` message, on the same socket), every move of the session to another pod, and every resume. Through a gateway it brings a fresh `resume_token` and the message's number `seq`.
 */
export type BidiConnectionStartMessage = {
  /**
   * The agent now serving the session.
   */
  agent: string;
  /**
   * Through a gateway, in a test session (`session_start.candidate`): true when the agent's candidate pods (its held rollout's edited spec) serve it. Absent otherwise: its live pods do.
   */
  candidate?: boolean;
  /**
   * The agent's mode: `voice` (speech to speech), `text`, or `hybrid` (speech and typed text). A session without `audio` in its modalities runs over the text model whatever the mode.
   */
  mode: string;
  /**
   * The model the agent uses.
   */
  model: string;
  /**
   * Through a gateway: the token that resumes this session on a new connection within the resume window (`session_start.resume_token`). A new one comes with every `bidi_connection_start`; the newest is the one to use.
   */
  resume_token?: string | null;
  /**
   * Through a gateway: this message's number in the session. Every message the gateway sends a client counts from 1, this one included, across connections: a client that counts the messages it receives from here knows the last one's number (`session_start.last_seq` on resume).
   */
  seq?: number | null;
  /**
   * The session's id (logs and transcripts use it).
   */
  session_id: string;
  type: "bidi_connection_start";
};

/**
 * Transcript text: streamed deltas of the agent's reply (`delta: true`), then the whole reply once more with `is_final: true`; the user's own text comes back final when the agent takes it up (a typed input's with its `input_id`).
 *
 * Voice and hybrid sessions: Nova Sonic's SPECULATIVE assistant text (what it plans to say, sent before the audio) arrives as `delta: true, is_final: false` — a preview that may differ from what is spoken; its FINAL text (what was really spoken, not interrupted) arrives as `delta: false, is_final: true`, and only that enters the conversation. The transcript of the user's speech arrives final only.
 */
export type BidiTranscriptStreamMessage = {
  /**
   * True for a streamed piece.
   */
  delta: boolean;
  /**
   * On the user's final line that takes up a typed input: that input's `id`, when it had one (`bidi_text_input.id`). Absent on spoken lines and on the agent's.
   */
  input_id?: string | null;
  /**
   * True for the complete text of a message.
   */
  is_final: boolean;
  /**
   * Who said it.
   */
  role: TranscriptRole;
  /**
   * The delta, or the whole text when `is_final`.
   */
  text: string;
  type: "bidi_transcript_stream";
};

/**
 * The agent's answer to a user turn begins (`bidi_response_complete` ends it).
 */
export type BidiResponseStartMessage = {
  /**
   * Counts the turns of this session from 1.
   */
  turn: number;
  type: "bidi_response_start";
};

/**
 * The agent's answer to a user turn is over; `stop_reason` says how it ended.
 */
export type BidiResponseCompleteMessage = {
  /**
   * Why the answer ended (`end_turn`, `handoff`, `interrupted`, ...).
   */
  stop_reason: StopReason;
  /**
   * The turn that completed.
   */
  turn: number;
  type: "bidi_response_complete";
};

/**
 * Tokens used by one model call (text), or since the previous report (voice).
 */
export type BidiUsageMessage = {
  /**
   * Tokens read.
   */
  input_tokens: number;
  /**
   * The same tokens by modality (voice and hybrid sessions; absent in text).
   */
  modality?: TokensByModality | null;
  /**
   * The model that answered, when a fallback did (text): `model`, or `model@region` in another region. Absent: the session's model (`bidi_connection_start.model`).
   */
  model?: string | null;
  /**
   * Tokens generated.
   */
  output_tokens: number;
  /**
   * Their sum.
   */
  total_tokens: number;
  type: "bidi_usage";
};

/**
 * Reply audio (voice and hybrid): base64 of the session's output format (`session_start.audio.output`; by default PCM16, 24 kHz, mono, little-endian). With `session_start.audio.binary_output` the same audio comes as binary frames.
 */
export type BidiAudioStreamMessage = {
  /**
   * Base64-encoded audio.
   */
  audio: string;
  /**
   * The audio's format (encoding and sample rate).
   */
  format?: AudioFormat | null;
  type: "bidi_audio_stream";
};

/**
 * The user spoke over the agent (barge-in), or cancelled its reply (`bidi_cancel`): stop playback and drop queued audio now.
 */
export type BidiInterruptionMessage = {
  type: "bidi_interruption";
};

/**
 * The caller started speaking (sessions with audio): from the runtime's voice activity detection on the caller's audio, or the voice model hearing the caller speak over it.
 */
export type BidiSpeechStartedMessage = {
  type: "bidi_speech_started";
};

/**
 * The caller stopped speaking (sessions with audio): the voice model took the turn as ended (its transcript of the caller's words follows), the client ended it (`bidi_audio_input_end`), or the caller fell silent without being heard as speech.
 */
export type BidiSpeechStoppedMessage = {
  type: "bidi_speech_stopped";
};

/**
 * The session's state changed (`SessionState`).
 */
export type BidiSessionStateMessage = {
  /**
   * The new state.
   */
  state: SessionState;
  type: "bidi_session_state";
};

/**
 * A `session_update` applied: the settings it changed, now in effect for the rest of the session — across handoffs, moves and resumes (the gateway carries them).
 */
export type BidiSessionUpdatedMessage = {
  /**
   * The modalities now in use, when the update changed them.
   */
  modalities?: string[] | null;
  type: "bidi_session_updated";
  /**
   * The voice now speaking, when the update changed it.
   */
  voice?: string | null;
};

/**
 * The voice model's stream was replaced (proactive rotation before the service's connection limit, recovery from a stream error, or a voice change). History was replayed and no audio was lost; nothing for the client to do.
 */
export type BidiConnectionRestartMessage = {
  /**
   * The new stream's number in this session (1 is the first).
   */
  generation: number;
  /**
   * `rotation`, `voice_change`, `stream_ended`, or the error type (`throttled`, ...).
   */
  reason: string;
  type: "bidi_connection_restart";
};

/**
 * A tool call started (a handoff or a workflow move is one too); `tool_complete` or `tool_error` with the same `tool_use_id` ends it.
 */
export type ToolStartMessage = {
  /**
   * What the tool does, for people: the `description` of the Agent's tool spec (or of the handoff it makes). Absent for a tool the agent does not have.
   */
  description?: string | null;
  /**
   * Its input.
   */
  input: JsonValue;
  /**
   * The tool.
   */
  name: string;
  /**
   * The model's id of the call.
   */
  tool_use_id: string;
  type: "tool_start";
};

/**
 * A long tool call says how it is going (the tool server's progress notifications).
 */
export type ToolProgressMessage = {
  /**
   * What is happening.
   */
  message: string;
  /**
   * The tool.
   */
  name: string;
  /**
   * The call.
   */
  tool_use_id: string;
  type: "tool_progress";
};

/**
 * A tool call succeeded; `result` is what the model sees (possibly truncated).
 */
export type ToolCompleteMessage = {
  /**
   * True when the result came from the session's cache without running the tool.
   */
  cached: boolean;
  /**
   * How long the tool ran, in milliseconds (after any consent); 0 when it did not run (a cached result, a handoff or workflow move decided in the session).
   */
  duration_ms?: number;
  /**
   * The tool.
   */
  name: string;
  /**
   * The result handed to the model.
   */
  result: JsonValue;
  /**
   * The call.
   */
  tool_use_id: string;
  type: "tool_complete";
};

/**
 * A tool call failed or was refused; the model gets the error and the session goes on.
 */
export type ToolErrorMessage = {
  /**
   * Kind of failure, e.g. `invalid_input`, `not_allowed`, `timeout`, `http_status`.
   */
  kind: string;
  /**
   * What went wrong (for developers and the model).
   */
  message: string;
  /**
   * The tool.
   */
  name: string;
  /**
   * Whether the same request may succeed later (again, or once the suggestion is followed); false where trying again cannot help (the caller declined, the agent has no such tool). The session goes on either way.
   */
  recoverable?: boolean;
  /**
   * What the caller can do about it.
   */
  suggestion?: string;
  /**
   * The call.
   */
  tool_use_id: string;
  type: "tool_error";
  /**
   * What went wrong, for the caller: a sentence a client can show or say, from one table of failure kinds (`switchboard_core::FailureKind::for_people`).
   */
  user_message?: string;
};

/**
 * A tool needs the user's approval; answer with `tool_consent`, or by typing or saying a clear yes or no. Unanswered for the tool's `consentTimeoutSeconds`, the request ends with `tool_error` `consent_timeout` and the tool does not run. Sent again when an answer was not clear.
 */
export type ConsentRequestMessage = {
  /**
   * What the tool does.
   */
  description: string;
  /**
   * The input it would run with.
   */
  input: JsonValue;
  /**
   * The tool.
   */
  name: string;
  /**
   * The call to approve.
   */
  tool_use_id: string;
  type: "consent_request";
};

/**
 * A tool the client runs (the Agent's tool has `client`): the client runs it with `input` and answers with `client_tool_result` within `timeout_ms`, or the call ends with `tool_error` `client_timeout` (a client without a handler for `name` should answer with an `error` at once). `tool_start` came before it; `tool_complete` or `tool_error` ends it.
 */
export type ClientToolCallMessage = {
  /**
   * Its input, valid against the tool's `inputSchema`.
   */
  input: JsonValue;
  /**
   * The tool.
   */
  name: string;
  /**
   * How long the answer is awaited, in milliseconds.
   */
  timeout_ms: number;
  /**
   * The call; the answer names it.
   */
  tool_use_id: string;
  type: "client_tool_call";
};

/**
 * A card for the client to show (display content): the agent called a `showCard` tool. A client shows it beside the conversation as it sees fit (title, text, the fields in order, the link); it is not part of what is said.
 */
export type DisplayCardMessage = {
  /**
   * The card, every size bounded (see `Card`).
   */
  card: Card;
  /**
   * The call that showed it.
   */
  tool_use_id: string;
  type: "display_card";
};

/**
 * The agent puts the caller through to a person (`transfer_to_person`). The client performs it — the SIP edge transfers the call (SIP REFER, or it dials and bridges) — and answers with `transfer_result`. Unanswered for `timeout_seconds` plus 15 s, the transfer ends as `no_answer`. Cold (the default): `transferred` ends the session. Warm (`warm: true`): the client holds the caller and dials the person; `transferred` means the person answered and now hears the agent instead of the caller: the session goes on while the agent briefs them and ends when its reply is over, and the client then puts the caller through. A person who hangs up during the brief is a second `transfer_result` for the same call (`failed`): the caller is back.
 */
export type TransferRequestMessage = {
  /**
   * Where the person is: an E.164 number or a SIP URI.
   */
  address: string;
  /**
   * The person's name (`spec.telephony.people`).
   */
  person: string;
  /**
   * Why, in the model's words.
   */
  reason: string;
  /**
   * How long the person's phone may ring before the transfer counts as unanswered.
   */
  timeout_seconds: number;
  /**
   * The tool call; `transfer_result` names it.
   */
  tool_use_id: string;
  type: "transfer_request";
  /**
   * A warm transfer: the agent briefs the person before the caller is put through.
   */
  warm?: boolean;
};

/**
 * The agent presses keys on the call (`send_digits`, an Agent with `spec.telephony.sendDigits`, on a phone call only): to navigate another phone system's menu (an IVR) the call reached. The client sends them — the SIP edge as RFC 4733 telephone events, each key held 120 ms with 100 ms between keys, `w` a half-second pause — and answers with `digits_result` when the last key went (or why none, or not all, did). Unanswered for half a second a character plus 15 s, the call ends as a `timeout` tool error.
 */
export type DigitsRequestMessage = {
  /**
   * The keys, in order: `0`-`9`, `*`, `#`, `A`-`D`, and `w` for a half-second pause; 1 to 32 characters.
   */
  digits: string;
  /**
   * The tool call; `digits_result` names it.
   */
  tool_use_id: string;
  type: "digits_request";
};

/**
 * The session moves to another agent (`transfer`), or back to the agent that transferred it (`return`); that agent's `bidi_connection_start` follows on the same socket.
 */
export type HandoffMessage = {
  /**
   * Everything the next agent needs (memory, history, reason, status, summary).
   */
  context: HandoffContext;
  /**
   * The agent handing over.
   */
  from: string;
  /**
   * Transfer or return.
   */
  kind: HandoffKind;
  /**
   * The agent taking over.
   */
  to: string;
  type: "handoff";
};

/**
 * Session memory changed: a key set, or removed (`null`). A gateway keeps its copy in sync; a client may show it (the web console does).
 */
export type MemoryUpdateMessage = {
  /**
   * The key, e.g. `verifiedUser`.
   */
  key: string;
  type: "memory_update";
  /**
   * The new value; `null` when removed.
   */
  value: JsonValue;
};

/**
 * The agent's workflow moved from one node (step) to another.
 */
export type WorkflowTransitionMessage = {
  /**
   * `model` (the model chose it) or `condition` (a `when` condition held).
   */
  by: string;
  /**
   * The node left.
   */
  from: string;
  /**
   * The node entered.
   */
  to: string;
  type: "workflow_transition";
};

/**
 * A workflow node's spoken line (its `say`, e.g. a legal disclosure) is over: said whole, cut by the caller, or abandoned when it did not end in time. Sent once per line, after its transcript; the gateway keeps it in the session's record.
 */
export type WorkflowLineMessage = {
  /**
   * The node whose line it is.
   */
  node: string;
  /**
   * How it went.
   */
  played: LinePlayed;
  /**
   * Why it was abandoned; absent otherwise.
   */
  reason?: string | null;
  /**
   * The line's text, as the Workflow has it.
   */
  text: string;
  type: "workflow_line";
  /**
   * Whether it was to be played whole (the caller cannot cut it).
   */
  uninterruptible: boolean;
};

/**
 * Something went wrong. When `recoverable`, the session continues.
 */
export type BidiErrorMessage = {
  /**
   * A stable code, e.g. `invalid_json`, `busy`, `model_error`: see `ErrorCode` for each and what to do.
   */
  code: ErrorCode;
  /**
   * When the error refuses a typed input (`busy`, `empty_text`): that input's `id`, when it had one. The input was not taken up; send it again later if it matters.
   */
  input_id?: string | null;
  /**
   * What happened and what to do.
   */
  message: string;
  /**
   * Whether the session continues.
   */
  recoverable: boolean;
  /**
   * When trying again later is the remedy (`capacity_full`): how many seconds from now a new attempt is likely to find room, an estimate.
   */
  retry_after_seconds?: number | null;
  /**
   * What they can do about it, from the same table.
   */
  suggestion?: string;
  type: "bidi_error";
  /**
   * What went wrong, for the person in the conversation: a sentence a client can show or say, one per `code` from one table (`ErrorCode::for_people`). Empty (and not written) from servers older than the table.
   */
  user_message?: string;
};

/**
 * The gateway's model quota is full and the new session waits for a slot (the Agent queues rather than refuses, `spec.capacity.whenFull`): sent on arrival and whenever the position changes. The session starts (`bidi_connection_start`) when its turn comes; a client that leaves gives up its place.
 */
export type BidiSessionQueuedMessage = {
  /**
   * The Agent the session waits for (`namespace/name`): the one `session_start` named, or the one that claims the number a phone call dialled. A phone edge picks that Agent's own hold recording by it. Empty (and not written) from servers older than it.
   */
  agent?: string;
  /**
   * How long the wait is likely to be, in seconds, from how long sessions have held their slots lately: an estimate, not a promise.
   */
  estimated_wait_seconds: number;
  /**
   * What to tell the person waiting, a sentence a client shows and a phone edge may speak: the Agent's `spec.capacity.holdMessage`, or the gateway's own with the place and the estimate. Empty (and not written) from servers older than it.
   */
  message?: string;
  /**
   * Sessions ahead of this one, plus one: 1 is next.
   */
  position: number;
  type: "bidi_session_queued";
};

/**
 * The Agent is in outage mode (its model service is failing, or an operator switched it on) and the new session goes to the Agent's fallback instead: a person to put the caller through to (a SIP edge transfers the call; another client shows or dials `person.address`) and/or a message for the caller. Sent before any `bidi_connection_start`; the socket then closes with 4513. Try again after `retry_after_seconds`, or follow the fallback.
 */
export type BidiSessionFallbackMessage = {
  /**
   * The Agent the session asked for (`namespace/name`).
   */
  agent: string;
  /**
   * Why: `switch` (an operator turned outage mode on) or `breaker` (the model service failed past the Agent's threshold, or traffic is still ramping back).
   */
  cause: string;
  /**
   * What to tell the caller (the Agent's `spec.outage.fallback.message`, or a default).
   */
  message: string;
  /**
   * The person to put the caller through to, when the Agent names one.
   */
  person?: FallbackPerson | null;
  /**
   * When a new session may be served again, an estimate in seconds (the breaker's next probe); absent while the switch is on.
   */
  retry_after_seconds?: number | null;
  type: "bidi_session_fallback";
};

/**
 * The Agent serving this session went into outage mode while the session was under way (`active: true`; an operator turned its switch, or its namespace's, on, or the gateway's breaker tripped over model failures), or out of it again (`active: false`: switched off, or the breaker recovered). The session goes on: nobody is cut off mid-sentence. `message` and `person` are the fallback new sessions now get, for the client to tell the caller or offer them (put them through to `person.address`). Also sent after `bidi_connection_start` when a session reaches an Agent already in outage mode (a handoff, a resume, or a new session served in text: `text_only`). Each change is told once.
 */
export type BidiSessionOutageMessage = {
  /**
   * Whether outage mode is on (`true`) or was switched off again (`false`).
   */
  active: boolean;
  /**
   * The Agent serving the session (`namespace/name`).
   */
  agent: string;
  /**
   * Why: `switch` (the Agent's own switch or its namespace's) or `breaker` (the gateway's circuit breaker over model failures and late first audio).
   */
  cause: string;
  /**
   * What to tell the caller while it is on (the Agent's fallback message, the namespace's, or a default); empty (and not written) once it is off.
   */
  message?: string;
  /**
   * The person new sessions go to, when the Agent names one (only while it is on).
   */
  person?: FallbackPerson | null;
  /**
   * This session is served in text only because of the outage (the Agent's `spec.outage.fallback.text`): it started while the voice model was out, so it runs on the Agent's text model — no audio is played or listened to for the rest of the session, even once outage mode is over; type with `bidi_text_input` and read the transcripts. Absent (false) otherwise.
   */
  text_only?: boolean;
  type: "bidi_session_outage";
};

/**
 * The server (a runtime pod) is shutting down and serves this session for at most `seconds` more. A gateway moves the session to another pod at the next turn boundary (the client sees `bidi_connection_restart`, reason `runtime_draining`); a client connected directly should reconnect when convenient.
 */
export type BidiConnectionDrainingMessage = {
  /**
   * The longest the server goes on serving.
   */
  seconds: number;
  type: "bidi_connection_draining";
};

/**
 * The server is ending the session (the agent ended the conversation, or the client sent `close`); the socket closes after it and the session cannot be resumed.
 */
export type BidiConnectionCloseMessage = {
  /**
   * Why.
   */
  reason: string;
  type: "bidi_connection_close";
};

/**
 * A message to the client.
 */
export type ServerMessage =
  | BidiConnectionStartMessage
  | BidiTranscriptStreamMessage
  | BidiResponseStartMessage
  | BidiResponseCompleteMessage
  | BidiUsageMessage
  | BidiAudioStreamMessage
  | BidiInterruptionMessage
  | BidiSpeechStartedMessage
  | BidiSpeechStoppedMessage
  | BidiSessionStateMessage
  | BidiSessionUpdatedMessage
  | BidiConnectionRestartMessage
  | ToolStartMessage
  | ToolProgressMessage
  | ToolCompleteMessage
  | ToolErrorMessage
  | ConsentRequestMessage
  | ClientToolCallMessage
  | DisplayCardMessage
  | TransferRequestMessage
  | DigitsRequestMessage
  | HandoffMessage
  | MemoryUpdateMessage
  | WorkflowTransitionMessage
  | WorkflowLineMessage
  | BidiErrorMessage
  | BidiSessionQueuedMessage
  | BidiSessionFallbackMessage
  | BidiSessionOutageMessage
  | BidiConnectionDrainingMessage
  | BidiConnectionCloseMessage;

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
] as const;

/**
 * The contents of `session_start`.
 */
export type SessionStart = {
  /**
   * The agent to talk to (local mode and the gateway); a runtime pod serves one agent and ignores it unless it names another agent, which is refused.
   */
  agent?: string | null;
  /**
   * Context from the host app's backend (gateway): a JWT the app's backend minted for this session with a key the gateway trusts (its app-context key set), carrying a `memory` claim — what the app knows (the page, an order), and the logged-in customer under the Agent's identity keys (`verifiedUser`). The gateway checks it (signature, issuer, audience, expiry, at most 8 KiB, each `jti` once) and makes it session memory, as far as the Agent the session starts at accepts it (`spec.appContext`): the customer counts as verified only where the Agent trusts the app for identity. A refused token gets an `app_context_*` error. New sessions only. Clients pass it through; they cannot read or forge what it vouches for.
   */
  app_context?: string | null;
  /**
   * The audio formats of a session with audio (`AudioSettings`): PCM16 at 8, 16 or 24 kHz, or G.711 μ-law / A-law at 8 kHz, each way; reply audio as binary frames. Absent: PCM16 16 kHz in, 24 kHz out, base64 JSON.
   */
  audio?: AudioSettings | null;
  /**
   * A test session (gateway): each Agent whose rollout is held until its AgentTests pass (`AgentTest.spec.gateRollout`) serves it from its candidate pods, which run the edited spec; other Agents serve it as usual. Only a credential marked for tests may ask (API key `candidates=test`, or a token with the candidates scope); others are refused with `candidate_not_allowed`. `bidi_connection_start.candidate` says which pods serve each agent.
   */
  candidate?: boolean;
  /**
   * Session context from the gateway — memory, history, handoff — signed with the key the gateway shares with the runtimes (`switchboard_core::grant`). A runtime restores what it can verify and refuses the session otherwise.
   */
  context?: SignedContext | null;
  /**
   * Continues a session that ended, or whose resume window passed (gateway, with its conversation record): that session's id (`bidi_connection_start.session_id`), with `continue_token`. Its memory, the last turns of its conversation and a summary of it come back, at the Agent it was with, for the same credential only (the API key, or the JWT subject) and within the time the gateway keeps such state (a day by default). The session goes on under its id. Who the caller is does not come back: the memory keys its namespace's Agents treat as identity (`spec.identityKeys`) are left out, and the caller is verified again.
   */
  continue_from?: string | null;
  /**
   * With `continue_from`: the newest `resume_token` that session's client received (its last `bidi_connection_start`). The session id alone is no secret — it is in logs, traces and identity assertions — so continuing needs this token, which only the session's own client got. It works once: the continued session's own `bidi_connection_start` brings the next one.
   */
  continue_token?: string | null;
  /**
   * Never accepted, like `memory`.
   */
  handoff?: HandoffContext | null;
  /**
   * Never accepted, like `memory`.
   */
  history?: HistoryTurn[];
  /**
   * With `resume_token`: the sequence number of the last message the client received (see `bidi_connection_start.seq`); the gateway replays the ones after it. Absent: every message the gateway still holds is replayed.
   */
  last_seq?: number | null;
  /**
   * Never accepted: memory is the gateway's to give, signed, in `context`. A server refuses a `session_start` that carries it (close code 4400), so a client cannot claim, say, a verified identity.
   */
  memory?: {
    [key: string]: unknown;
  };
  /**
   * Wanted modalities, e.g. `["text"]` or `["audio","text"]`. With `audio`, a voice or hybrid agent's session runs over Nova Sonic (audio in and out, transcripts; hybrid also takes typed text into the same stream); without it every agent is served as text.
   */
  modalities?: string[];
  /**
   * The text model for this session instead of the agent's `textModelId`: one of the models the Agent offers (`spec.model.sessionModels`); any other is refused with `model_not_allowed`.
   */
  model?: string | null;
  /**
   * A token from an earlier `bidi_connection_start` to resume that session (gateway).
   */
  resume_token?: string | null;
  /**
   * Voice id override for voice modes.
   */
  voice?: string | null;
};

/**
 * What the session is doing, as a client shows it (`bidi_session_state`). Sent when it changes, never twice in a row the same.
 *
 * Text sessions go `ready` -> `processing` (the model answers) -> `executing_tool` (a tool runs) -> ... -> `ready`. Sessions with audio add `listening` (the caller speaks) and `speaking` (the agent's reply audio is being generated; a client's playback may run a little longer). While a `consent_request` waits for the user's answer the session is `ready`: it is the user's turn. `ended` comes once, before the session closes; a session handed to another agent sends no `ended` (the next agent's state follows).
 */
export type SessionState = "ready" | "listening" | "processing" | "speaking" | "executing_tool" | "reconnecting" | "ended";

/**
 * The settings `session_update` may change mid-session. Every field is optional; the ones given are applied together, or — when one is unknown or cannot apply — none is.
 */
export type SessionUpdate = {
  /**
   * The modalities the client uses from now on, as in `session_start`: `["text"]` pauses the audio of a hybrid agent's session with audio (no reply audio is sent, the microphone is not listened to; transcripts and typed text go on), and a set with `audio` resumes it. Whether the session runs over the voice model is fixed when it starts: audio cannot be added to a session that started without it, nor taken from a voice-only agent's. Holds for the rest of the session, as `voice` does.
   */
  modalities?: string[] | null;
  /**
   * A voice of the agent's Nova Sonic model (sessions with audio): the next turn is spoken with it (`bidi_connection_restart`, reason `voice_change`). Holds for the rest of the session (`bidi_session_updated`; the gateway carries it to every agent).
   */
  voice?: string | null;
  [key: string]: unknown;
};

/**
 * A session context (the core's `grant::SessionContext`) as sent: its JSON text and the MAC over it.
 */
export type SignedContext = {
  /**
   * The context's JSON text, exactly as signed.
   */
  payload: string;
  /**
   * The gateway's Ed25519 signature of `payload`, lower-case hex.
   */
  signature: string;
};

/**
 * Why an answer ended (`bidi_response_complete.stop_reason`).
 */
export type StopReason = "end_turn" | "tool_use" | "max_tokens" | "handoff" | "interrupted" | "partial_turn" | "empty_reply" | "error" | "tool_rounds_exceeded" | "cancelled" | (string & {});

/**
 * Token counts by direction and modality.
 */
export type TokensByModality = {
  /**
   * Speech tokens read.
   */
  input_speech: number;
  /**
   * Text tokens read.
   */
  input_text: number;
  /**
   * Speech tokens generated.
   */
  output_speech: number;
  /**
   * Text tokens generated.
   */
  output_text: number;
};

/**
 * Who produced a piece of transcript.
 */
export type TranscriptRole = "user" | "assistant";

/**
 * How a transfer to a person ended (`transfer_result.outcome`).
 */
export type TransferOutcome = "transferred" | "busy" | "no_answer" | "declined" | "unreachable" | "rejected" | "failed";

/**
 * Where the session was in the handing-over agent's workflow.
 */
export type WorkflowSnapshot = {
  /**
   * The handing-over agent.
   */
  agent: string;
  /**
   * Its current node.
   */
  node: string;
  /**
   * The skills in use at the current node (the `inUse` of the last `use_skill` result), so that a session resumed elsewhere keeps its skills' instructions and data context.
   */
  skills?: string[];
  /**
   * The nodes visited, in order.
   */
  visited: string[];
};
