//! Languages on a call (the Persona's `languages`), the adapter's side of
//! [`switchboard_core::language`]: each final transcript of the caller's words is judged;
//! when they clearly speak another language the Persona speaks, the call switches to it for
//! the rest of the call — the system prompt of the streams opened from now on gets a line
//! saying to speak it, and a new Nova Sonic stream with that language's voice takes over at
//! the next turn boundary (with the history replayed; the client sees
//! `bidi_connection_restart` with reason `voice_change`). The language goes into the
//! session's memory (`memory_update` `language`), which the gateway keeps and records, so a
//! call handed to another agent, or resumed on another pod, starts in it where that Persona
//! speaks it. `switchboard_voice_language_switches_total` counts the switches.

use switchboard_core::Session;
use switchboard_core::language::MEMORY_KEY;
use switchboard_core::protocol::ServerMessage;

use super::super::agent::Exit;
use super::Voice;

impl Voice<'_> {
    /// The SYSTEM prompt for the streams opened from now on: the session's, with the
    /// language line when the call is not in the Persona's own language.
    pub(super) fn stream_prompt(&self) -> String {
        match self.languages.as_ref().and_then(|l| l.prompt_line()) {
            Some(line) => format!("{}\n\n{line}", self.prompt),
            None => self.prompt.clone(),
        }
    }

    /// At the start of the session: a call that was in another language (the session's
    /// memory, from an earlier agent or pod) goes on in it, if this Persona speaks it.
    pub(super) async fn start_language(&mut self, session: &Session) -> Option<Exit> {
        let languages = self.languages.as_mut()?;
        let code = session.memory().get(MEMORY_KEY)?.as_str()?;
        if !languages.start_in(code) || languages.at_home() {
            return None;
        }
        let voice = languages.current().voice.clone();
        self.switch_streams(voice).await
    }

    /// The caller said `text`: a switch of language, if they spoke another one.
    pub(super) async fn heard_language(&mut self, text: &str) -> Option<Exit> {
        let to = self.languages.as_mut()?.heard(text)?;
        let (code, voice) = (to.code.clone(), to.voice.clone());
        let agent = self.agent.core.name();
        self.shared.metrics.language_switches.with_label_values(&[agent, &code]).inc();
        tracing::info!(
            agent,
            session_id = self.trace.session_id(),
            "the caller speaks {code}: the call goes on in it, with the voice {voice}"
        );
        let memory = ServerMessage::MemoryUpdate { key: MEMORY_KEY.to_owned(), value: serde_json::json!(code) };
        if let Err(exit) = self.send(memory).await {
            return Some(exit);
        }
        self.switch_streams(voice).await
    }

    /// The streams from now on: the prompt with the language's line, the language's voice.
    async fn switch_streams(&mut self, voice: String) -> Option<Exit> {
        if self.stream.update_system_prompt(self.stream_prompt()).await.is_err()
            || self.stream.change_voice(voice).await.is_err()
        {
            return Some(Exit::model_gone());
        }
        None
    }
}
