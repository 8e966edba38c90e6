//! Outage notices: a session under way whose Agent goes into outage mode — switched on
//! (its own switch or its namespace's) or its breaker tripped here
//! ([`switchboard_outage::notice::in_effect`]) — is told so once (`bidi_session_outage`,
//! `active: true`, the cause, with the fallback new sessions get) and goes on: a live
//! conversation is not cut off mid-sentence; the client may offer the caller the fallback.
//! It is told again when the switch goes off or the breaker recovers (`active: false`, the
//! same cause) or the fallback changes. A session that reaches an Agent already in outage
//! mode (a handoff, a resume, a move) is told after that Agent's `bidi_connection_start`.
//!
//! A new session served in text because of an outage (`spec.outage.fallback.text`,
//! [`Machine::serve_text_only`]) runs without its `audio` modality from its first runtime
//! session on; every notice it gets says `text_only`, and it gets one after its first
//! `bidi_connection_start` even if the outage ended meanwhile (then `active: false`), so
//! its client always learns why no audio comes. The audio it still sends is dropped here.

use switchboard_core::protocol::{ClientMessage, ServerMessage, decode_client};

use super::{Cx, Machine};
use switchboard_outage::notice;

/// What the session was told of outage mode.
#[derive(Debug, Default)]
pub(super) struct Told {
    /// The last notice and the Agent (`namespace/name`) it was about.
    last: Option<(String, ServerMessage)>,
    /// Whether any notice was told in this session.
    any: bool,
}

impl Machine {
    /// The Agents in outage mode changed, or a runtime session of the serving Agent
    /// started: tells the client what no longer holds of what it was told.
    pub(super) fn outage_check(&mut self, cx: &Cx<'_>) {
        if !self.state.is_live() {
            return;
        }
        let route = &self.target.route;
        let on = notice::in_effect(cx.directory.table(), cx.outages, &route.namespace, &route.name);
        let agent = self.target.key();
        let text_only = self.settings.text_only();
        let last = self.outage_told.last.as_ref().filter(|(told, _)| *told == agent).map(|(_, message)| message);
        let due = match (on, last) {
            (Some((outage, cause)), _) => Some(notice::told(&agent, Some(&outage), cause, text_only.is_some())),
            (None, Some(ServerMessage::BidiSessionOutage { active: true, cause, .. })) => {
                Some(notice::told(&agent, None, cause, text_only.is_some()))
            }
            // Told it is off already.
            (None, Some(last)) => Some(last.clone()),
            // Served in text for an outage that ended before it started: it hears why.
            (None, None) => match text_only {
                Some(cause) if !self.outage_told.any => Some(notice::told(&agent, None, cause, true)),
                // Told of an Agent the session has left: nothing to take back.
                _ => None,
            },
        };
        let Some(message) = due else {
            self.outage_told.last = None;
            return;
        };
        if self.outage_told.last.as_ref().is_some_and(|(told, last)| *told == agent && *last == message) {
            return;
        }
        self.outage_told = Told { last: Some((agent, message.clone())), any: true };
        self.deliver(message.into());
    }

    /// Serves this new session in text because its Agent is in outage mode (`cause`:
    /// `switch` or `breaker`) and its fallback says so: its runtime sessions open without
    /// `audio`, over the Agent's text model. Before its first runtime session opens.
    pub fn serve_text_only(&mut self, cause: &'static str) {
        self.settings.serve_text_only(cause);
    }

    /// A resumed session that was served in text only (for `cause`): it still is, and was
    /// told so before it parked.
    pub(super) fn resume_text_only(&mut self, cause: &str) {
        self.settings.serve_text_only(if cause == "switch" { "switch" } else { "breaker" });
        self.outage_told.any = true;
    }

    /// Why the session is served in text only (`switch` or `breaker`), if it is.
    pub fn text_only(&self) -> Option<&'static str> {
        self.settings.text_only()
    }

    /// Whether `text`, a client's text frame, is audio a session served in text drops.
    pub(super) fn dropped_audio(&self, text: &str) -> bool {
        self.settings.text_only().is_some()
            && text.contains("bidi_audio_input")
            && matches!(
                decode_client(text),
                Ok(ClientMessage::BidiAudioInput { .. } | ClientMessage::BidiAudioInputEnd {})
            )
    }
}
