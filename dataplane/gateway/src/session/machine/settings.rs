//! What every runtime session of a session opens with, as the client chose it: the voice
//! and modalities (which a runtime's `bidi_session_updated` may change for the rest of the
//! session), the text model and the agent it was chosen for, the audio formats, and which
//! pods the session reaches (a test session: its Agents' candidates). [`Settings`] owns
//! them; they go with the session when it parks.

use std::collections::BTreeMap;

use switchboard_core::protocol::{AudioSettings, ServerMessage};

use crate::directory::Target;

use crate::directory::Reach;

/// The client's choices for the runtime sessions it gets.
#[derive(Debug)]
pub(super) struct Settings {
    /// Which pods the session reaches.
    reach: Reach,
    /// The voice.
    voice: Option<String>,
    /// The modalities.
    modalities: Vec<String>,
    /// The text model the client chose (`session_start.model`) and the agent it chose it
    /// for: passed to that agent's runtimes only (another agent may not offer it).
    model: Option<(String, String)>,
    /// The client's audio formats (`session_start.audio`), passed to every runtime.
    audio: Option<AudioSettings>,
    /// The variant the session runs of each Agent it reached that runs variants, by
    /// `namespace/name`: picked when the session first opens on the Agent, then kept
    /// (moves, handoffs back, resumes) whatever the weights do.
    variants: BTreeMap<String, String>,
    /// The fallback region the session was placed on, the Agent (`namespace/name`) it was
    /// placed for and why (`full`, `failing`): that Agent's runtime sessions open their
    /// streams there (the slot is in that region's pool). Not kept when the session parks:
    /// a resumed session takes its slot, and opens, in its Agent's own region.
    placed: Option<(String, String, &'static str)>,
    /// Why the session is served in text only (an outage: `switch` or `breaker`), if it is.
    text_only: Option<&'static str>,
}

impl Settings {
    /// A live session's, with the client's `voice` and `modalities`.
    pub(super) fn new(voice: Option<String>, modalities: Vec<String>) -> Self {
        Self {
            reach: Reach::Live,
            voice,
            modalities,
            model: None,
            audio: None,
            variants: BTreeMap::new(),
            placed: None,
            text_only: None,
        }
    }

    /// Which pods the session reaches.
    pub(super) fn reach(&self) -> Reach {
        self.reach
    }

    pub(super) fn set_reach(&mut self, reach: Reach) {
        self.reach = reach;
    }

    pub(super) fn voice(&self) -> &Option<String> {
        &self.voice
    }

    pub(super) fn modalities(&self) -> &[String] {
        &self.modalities
    }

    pub(super) fn audio(&self) -> Option<&AudioSettings> {
        self.audio.as_ref()
    }

    pub(super) fn set_audio(&mut self, audio: Option<AudioSettings>) {
        self.audio = audio;
    }

    /// The model chosen and the agent it was chosen for, as the store keeps it.
    pub(super) fn model(&self) -> &Option<(String, String)> {
        &self.model
    }

    /// The model chosen (`(agent, model)`), as the store kept it.
    pub(super) fn set_model(&mut self, model: Option<(String, String)>) {
        self.model = model;
    }

    /// The text model the client chose, if it chose one for `agent`.
    pub(super) fn model_for(&self, agent: &str) -> Option<String> {
        self.model.as_ref().filter(|(chosen_for, _)| chosen_for == agent).map(|(_, model)| model.clone())
    }

    /// The session is served in text only, for an outage (`cause`): its runtime sessions
    /// open without `audio`.
    pub(super) fn serve_text_only(&mut self, cause: &'static str) {
        self.modalities.retain(|m| !m.eq_ignore_ascii_case("audio"));
        if self.modalities.is_empty() {
            self.modalities.push("text".to_owned());
        }
        self.text_only = Some(cause);
    }

    /// Why the session is served in text only, if it is.
    pub(super) fn text_only(&self) -> Option<&'static str> {
        self.text_only
    }

    /// The session was placed on `agent`'s fallback `region` (for `cause`).
    pub(super) fn place(&mut self, agent: String, region: String, cause: &'static str) {
        self.placed = Some((agent, region, cause));
    }

    /// The Agent the session was placed for, the fallback region and why, if it was.
    pub(super) fn placement(&self) -> Option<(&str, &str, &'static str)> {
        self.placed.as_ref().map(|(agent, region, cause)| (agent.as_str(), region.as_str(), *cause))
    }

    /// The fallback region `target`'s runtime sessions open their streams in, and why, if
    /// the session was placed there.
    pub(super) fn placed_for(&self, target: &Target) -> Option<(&str, &'static str)> {
        let (agent, region, cause) = self.placed.as_ref()?;
        (*agent == target.key()).then_some((region.as_str(), *cause))
    }

    /// The session's variants, as the store keeps them.
    pub(super) fn variants(&self) -> &BTreeMap<String, String> {
        &self.variants
    }

    /// The session's variants, as the store kept them.
    pub(super) fn set_variants(&mut self, variants: BTreeMap<String, String>) {
        self.variants = variants;
    }

    /// The variant of `target`'s Agent the session runs: the one it has, or one picked by
    /// the weights now with `key` (the verified caller, so they keep theirs across
    /// sessions; else the session id) and kept. None when the Agent runs no variants; a
    /// kept one stays even if the Agent dropped it (its pods serve it as the Agent's own).
    pub(super) fn variant_for(&mut self, target: &Target, key: &str) -> Option<String> {
        let agent = target.key();
        if let Some(kept) = self.variants.get(&agent) {
            return Some(kept.clone());
        }
        let picked = target.pick_variant(key)?;
        self.variants.insert(agent, picked.clone());
        Some(picked)
    }

    /// A runtime applied the client's `session_update` (`text`, its
    /// `bidi_session_updated`): the voice and modalities it names hold for the rest of the
    /// session; what it does not name stays.
    pub(super) fn updated(&mut self, text: &str) {
        if let Ok(ServerMessage::BidiSessionUpdated { voice, modalities }) = serde_json::from_str(text) {
            if voice.is_some() {
                self.voice = voice;
            }
            if let Some(modalities) = modalities {
                self.modalities = modalities;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_model_is_the_agents_it_was_chosen_for() {
        let mut settings = Settings::new(None, vec![]);
        assert_eq!(settings.model_for("triage"), None);
        settings.set_model(Some(("triage".into(), "small".into())));
        assert_eq!(settings.model_for("triage").as_deref(), Some("small"));
        assert_eq!(settings.model_for("idv"), None, "another agent may not offer it");
    }

    #[test]
    fn an_update_changes_what_it_names_and_keeps_the_rest() {
        let mut settings = Settings::new(Some("amy".into()), vec!["text".into()]);
        settings.updated(&json!({"type": "bidi_session_updated", "modalities": ["audio", "text"]}).to_string());
        assert_eq!(settings.voice().as_deref(), Some("amy"), "no voice named: kept");
        assert_eq!(settings.modalities(), ["audio", "text"]);
        settings.updated(&json!({"type": "bidi_session_updated", "voice": "tom"}).to_string());
        assert_eq!(settings.voice().as_deref(), Some("tom"));
        assert_eq!(settings.modalities(), ["audio", "text"], "no modalities named: kept");
        settings.updated("not json");
        assert_eq!(settings.voice().as_deref(), Some("tom"));
    }

    #[test]
    fn a_session_reaches_live_pods_unless_it_tests() {
        let mut settings = Settings::new(None, vec![]);
        assert_eq!(settings.reach(), Reach::Live);
        settings.set_reach(Reach::Candidates);
        assert_eq!(settings.reach(), Reach::Candidates);
    }
}
