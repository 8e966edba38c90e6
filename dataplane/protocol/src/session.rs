//! How a client opens a session ([`SessionStart`]), what it sees of it live and what it may
//! change: the session's state (`bidi_session_state`, [`SessionState`]) and the settings of
//! `session_update` ([`SessionUpdate`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::AudioSettings;
use crate::SignedContext;
use crate::handoff::{HandoffContext, HistoryTurn};

/// What the session is doing, as a client shows it (`bidi_session_state`). Sent when it
/// changes, never twice in a row the same.
///
/// Text sessions go `ready` -> `processing` (the model answers) -> `executing_tool` (a tool
/// runs) -> ... -> `ready`. Sessions with audio add `listening` (the caller speaks) and
/// `speaking` (the agent's reply audio is being generated; a client's playback may run a
/// little longer). While a `consent_request` waits for the user's answer the session is
/// `ready`: it is the user's turn. `ended` comes once, before the session closes; a
/// session handed to another agent sends no `ended` (the next agent's state follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for the user.
    Ready,
    /// The caller is speaking (audio sessions).
    Listening,
    /// The agent is working out its answer.
    Processing,
    /// The agent is speaking (audio sessions).
    Speaking,
    /// A tool call runs.
    ExecutingTool,
    /// The gateway is moving the session to another connection or pod (sent by the
    /// gateway only; runtimes never send it).
    Reconnecting,
    /// The session is over.
    Ended,
}

impl SessionState {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Listening => "listening",
            Self::Processing => "processing",
            Self::Speaking => "speaking",
            Self::ExecutingTool => "executing_tool",
            Self::Reconnecting => "reconnecting",
            Self::Ended => "ended",
        }
    }
}

/// The settings `session_update` may change mid-session. Every field is optional; the
/// ones given are applied together, or — when one is unknown or cannot apply — none is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionUpdate {
    /// A voice of the agent's Nova Sonic model (sessions with audio): the next turn is
    /// spoken with it (`bidi_connection_restart`, reason `voice_change`). Holds for the
    /// rest of the session (`bidi_session_updated`; the gateway carries it to every agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// The modalities the client uses from now on, as in `session_start`: `["text"]`
    /// pauses the audio of a hybrid agent's session with audio (no reply audio is sent,
    /// the microphone is not listened to; transcripts and typed text go on), and a set with
    /// `audio` resumes it. Whether the session runs over the voice model is fixed when it
    /// starts: audio cannot be added to a session that started without it, nor taken from
    /// a voice-only agent's. Holds for the rest of the session, as `voice` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modalities: Option<Vec<String>>,
    /// Fields this version does not know, as sent, and `session_start` settings that are
    /// fixed for the session ([`SessionUpdate::FIXED`]). A server refuses an update that
    /// has any (`bidi_error` `unknown_setting` or `fixed_setting`).
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// What a `session_update`'s `modalities` asks for ([`SessionUpdate::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modalities {
    /// `audio` is among them.
    pub audio: bool,
    /// `text` is among them.
    pub text: bool,
}

impl Modalities {
    /// Their names, as `session_start.modalities` writes them.
    pub fn names(self) -> Vec<String> {
        [("audio", self.audio), ("text", self.text)].into_iter().filter(|(_, on)| *on).map(|(n, _)| n.into()).collect()
    }

    /// Whether a session over the voice model (one that started with audio) of a voice
    /// (`hybrid` false) or hybrid agent may use these modalities: a voice agent needs
    /// audio and takes no typed text. The error completes "agent NAME ...".
    pub fn check_voice_session(self, hybrid: bool) -> Result<(), &'static str> {
        match (self.audio, self.text, hybrid) {
            (false, _, false) => Err("runs in voice mode: it needs audio"),
            (_, true, false) => Err("runs in voice mode: typed text needs a hybrid agent"),
            _ => Ok(()),
        }
    }

    /// Whether a session over the text model (one that started without audio) may use
    /// these modalities: not audio, which would need the voice model from the start.
    pub fn check_text_session(self) -> Result<(), &'static str> {
        match self.audio {
            true => Err("this session started without audio and runs over the text model: audio cannot be added \
                 mid-session; start a new session with modalities [\"audio\"]"),
            false => Ok(()),
        }
    }
}

/// Why a `session_update` was refused: the `bidi_error` code and its message.
pub type Refusal = (super::ErrorCode, String);

impl SessionUpdate {
    /// The settings this version knows, for messages that list them.
    pub const KNOWN: &'static [&'static str] = &["voice", "modalities"];
    /// The `session_start` settings fixed for the session's life.
    pub const FIXED: &'static [&'static str] =
        &["agent", "audio", "model", "resume_token", "last_seq", "continue_from", "continue_token", "context"];
    /// The modalities a session may use.
    pub const MODALITIES: &'static [&'static str] = &["audio", "text"];

    /// Whether the update names no setting at all.
    pub fn is_empty(&self) -> bool {
        self.voice.is_none() && self.modalities.is_none() && self.unknown.is_empty()
    }

    /// The names of the unknown fields, comma-separated (empty when there are none);
    /// fixed settings are not among them.
    pub fn unknown_names(&self) -> String {
        self.unknown.keys().filter(|k| !Self::FIXED.contains(&k.as_str())).cloned().collect::<Vec<_>>().join(", ")
    }

    /// The fixed settings the update names, comma-separated (empty when there are none).
    pub fn fixed_names(&self) -> String {
        self.unknown.keys().filter(|k| Self::FIXED.contains(&k.as_str())).cloned().collect::<Vec<_>>().join(", ")
    }

    /// What every server checks before it applies an update, whatever the session: no
    /// fixed or unknown setting, at least one setting, and `modalities` (if given) a
    /// non-empty set of `audio` and `text`. Returns the modalities asked for.
    pub fn check(&self) -> Result<Option<Modalities>, Refusal> {
        use super::ErrorCode;
        let nothing = "nothing was changed";
        let fixed = self.fixed_names();
        if !fixed.is_empty() {
            let message = format!(
                "session_update: {fixed} cannot change mid-session (set when the session starts); {nothing}. \
                 Start a new session with the setting wanted"
            );
            return Err((ErrorCode::FixedSetting, message));
        }
        let unknown = self.unknown_names();
        if !unknown.is_empty() {
            let message =
                format!("session_update: unknown setting(s) {unknown}; {nothing} (known: {})", Self::KNOWN.join(", "));
            return Err((ErrorCode::UnknownSetting, message));
        }
        if self.is_empty() {
            let message = format!("session_update names no setting; known: {}", Self::KNOWN.join(", "));
            return Err((ErrorCode::MalformedMessage, message));
        }
        let Some(modalities) = &self.modalities else { return Ok(None) };
        let known = Self::MODALITIES.join(", ");
        if let Some(other) = modalities.iter().find(|m| !Self::MODALITIES.iter().any(|k| m.eq_ignore_ascii_case(k))) {
            let message = format!("session_update: modality {other:?} is not one of {known}; {nothing}");
            return Err((ErrorCode::UnsupportedModality, message));
        }
        if modalities.is_empty() {
            let message = format!("session_update: modalities is empty; name one or more of {known}; {nothing}");
            return Err((ErrorCode::UnsupportedModality, message));
        }
        let has = |name: &str| modalities.iter().any(|m| m.eq_ignore_ascii_case(name));
        Ok(Some(Modalities { audio: has("audio"), text: has("text") }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientMessage, decode_client};

    #[test]
    fn an_update_keeps_what_it_does_not_know_apart() {
        let text = r#"{"type":"session_update","voice":"amy","speed":2,"mood":"calm"}"#;
        let Ok(ClientMessage::SessionUpdate(update)) = decode_client(text) else { panic!("decodes") };
        assert_eq!(update.voice.as_deref(), Some("amy"));
        assert_eq!(update.unknown_names(), "mood, speed", "the type tag is not a setting");
        let Ok(ClientMessage::SessionUpdate(plain)) = decode_client(r#"{"type":"session_update","voice":"amy"}"#)
        else {
            panic!("decodes")
        };
        assert!(plain.unknown.is_empty() && !plain.is_empty());
        let Ok(ClientMessage::SessionUpdate(empty)) = decode_client(r#"{"type":"session_update"}"#) else {
            panic!("decodes")
        };
        assert!(empty.is_empty());
        let written = serde_json::to_string(&ClientMessage::SessionUpdate(plain)).expect("writes");
        assert_eq!(written, r#"{"type":"session_update","voice":"amy"}"#);
    }

    fn update(text: &str) -> SessionUpdate {
        let Ok(ClientMessage::SessionUpdate(update)) = decode_client(text) else { panic!("decodes: {text}") };
        update
    }

    #[test]
    fn an_update_is_checked_before_any_of_it_applies() {
        use crate::ErrorCode;
        let refused = |text: &str| update(text).check().expect_err(text);
        let (code, message) = refused(r#"{"type":"session_update","voice":"amy","audio":{},"model":"m","x":1}"#);
        assert_eq!(code, ErrorCode::FixedSetting, "a fixed setting is named first: {message}");
        assert!(message.contains("audio, model") && !message.contains('x'), "{message}");
        let (code, message) = refused(r#"{"type":"session_update","voice":"amy","speed":2}"#);
        assert_eq!((code, message.contains("speed")), (ErrorCode::UnknownSetting, true), "{message}");
        assert_eq!(refused(r#"{"type":"session_update"}"#).0, ErrorCode::MalformedMessage);
        let (code, message) = refused(r#"{"type":"session_update","modalities":["audio","video"]}"#);
        assert_eq!((code, message.contains("\"video\"")), (ErrorCode::UnsupportedModality, true), "{message}");
        assert_eq!(refused(r#"{"type":"session_update","modalities":[]}"#).0, ErrorCode::UnsupportedModality);

        let modalities = |text: &str| update(text).check().expect(text);
        assert_eq!(modalities(r#"{"type":"session_update","voice":"amy"}"#), None);
        assert_eq!(
            modalities(r#"{"type":"session_update","modalities":["TEXT"]}"#),
            Some(Modalities { audio: false, text: true })
        );
        assert_eq!(
            modalities(r#"{"type":"session_update","modalities":["audio","text"],"voice":"amy"}"#),
            Some(Modalities { audio: true, text: true })
        );
    }

    #[test]
    fn audio_comes_and_goes_only_where_the_session_runs_over_the_voice_model() {
        let set = |audio, text| Modalities { audio, text };
        // A hybrid agent's session with audio: any non-empty set.
        for (audio, text) in [(true, true), (true, false), (false, true)] {
            assert_eq!(set(audio, text).check_voice_session(true), Ok(()));
        }
        // A voice agent's: audio only.
        assert_eq!(set(true, false).check_voice_session(false), Ok(()));
        assert!(set(false, true).check_voice_session(false).is_err_and(|why| why.contains("needs audio")));
        assert!(set(true, true).check_voice_session(false).is_err_and(|why| why.contains("hybrid")));
        // A text session never gains audio.
        assert_eq!(set(false, true).check_text_session(), Ok(()));
        assert!(set(true, true).check_text_session().is_err_and(|why| why.contains("new session")));
    }

    #[test]
    fn states_are_snake_case_on_the_wire() {
        for state in [
            SessionState::Ready,
            SessionState::Listening,
            SessionState::Processing,
            SessionState::Speaking,
            SessionState::ExecutingTool,
            SessionState::Reconnecting,
            SessionState::Ended,
        ] {
            assert_eq!(serde_json::to_value(state).expect("writes"), serde_json::json!(state.as_str()));
        }
    }
}

/// The contents of `session_start`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStart {
    /// The agent to talk to (local mode and the gateway); a runtime pod serves one agent
    /// and ignores it unless it names another agent, which is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A token from an earlier `bidi_connection_start` to resume that session (gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// With `resume_token`: the sequence number of the last message the client received
    /// (see `bidi_connection_start.seq`); the gateway replays the ones after it. Absent:
    /// every message the gateway still holds is replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// Continues a session that ended, or whose resume window passed (gateway, with its
    /// conversation record): that session's id (`bidi_connection_start.session_id`), with
    /// `continue_token`. Its memory, the last turns of its conversation and a summary of it
    /// come back, at the Agent it was with, for the same credential only (the API key, or
    /// the JWT subject) and within the time the gateway keeps such state (a day by
    /// default). The session goes on under its id. Who the caller is does not come back:
    /// the memory keys its namespace's Agents treat as identity (`spec.identityKeys`) are
    /// left out, and the caller is verified again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_from: Option<String>,
    /// With `continue_from`: the newest `resume_token` that session's client received (its
    /// last `bidi_connection_start`). The session id alone is no secret — it is in logs,
    /// traces and identity assertions — so continuing needs this token, which only the
    /// session's own client got. It works once: the continued session's own
    /// `bidi_connection_start` brings the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
    /// A test session (gateway): each Agent whose rollout is held until its AgentTests pass
    /// (`AgentTest.spec.gateRollout`) serves it from its candidate pods, which run the
    /// edited spec; other Agents serve it as usual. Only a credential marked for tests may
    /// ask (API key `candidates=test`, or a token with the candidates scope); others are
    /// refused with `candidate_not_allowed`. `bidi_connection_start.candidate` says which
    /// pods serve each agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub candidate: bool,
    /// Voice id override for voice modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// The text model for this session instead of the agent's `textModelId`: one of the
    /// models the Agent offers (`spec.model.sessionModels`); any other is refused with
    /// `model_not_allowed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Wanted modalities, e.g. `["text"]` or `["audio","text"]`. With `audio`, a voice or
    /// hybrid agent's session runs over Nova Sonic (audio in and out, transcripts; hybrid
    /// also takes typed text into the same stream); without it every agent is served as
    /// text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modalities: Vec<String>,
    /// The audio formats of a session with audio ([`AudioSettings`]): PCM16 at 8, 16 or
    /// 24 kHz, or G.711 μ-law / A-law at 8 kHz, each way; reply audio as binary frames.
    /// Absent: PCM16 16 kHz in, 24 kHz out, base64 JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<AudioSettings>,
    /// Session context from the gateway — memory, history, handoff — signed with the key
    /// the gateway shares with the runtimes (`switchboard_core::grant`). A runtime restores what it
    /// can verify and refuses the session otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<SignedContext>,
    /// Context from the host app's backend (gateway): a JWT the app's backend minted for
    /// this session with a key the gateway trusts (its app-context key set), carrying a
    /// `memory` claim — what the app knows (the page, an order), and the logged-in customer
    /// under the Agent's identity keys (`verifiedUser`). The gateway checks it (signature,
    /// issuer, audience, expiry, at most 8 KiB, each `jti` once) and makes it session
    /// memory, as far as the Agent the session starts at accepts it
    /// (`spec.appContext`): the customer counts as verified only where the Agent trusts
    /// the app for identity. A refused token gets an `app_context_*` error. New sessions
    /// only. Clients pass it through; they cannot read or forge what it vouches for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_context: Option<String>,
    /// Never accepted: memory is the gateway's to give, signed, in `context`. A server
    /// refuses a `session_start` that carries it (close code 4400), so a client cannot
    /// claim, say, a verified identity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Never accepted, like `memory`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryTurn>,
    /// Never accepted, like `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffContext>,
}

impl SessionStart {
    /// The unsigned context fields a client tried to set, if any (each is refused).
    pub fn unsigned_context(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if !self.memory.is_empty() {
            fields.push("memory");
        }
        if !self.history.is_empty() {
            fields.push("history");
        }
        if self.handoff.is_some() {
            fields.push("handoff");
        }
        fields
    }
}
