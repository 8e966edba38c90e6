//! What the driver reads of a session machine (its id, Agent, settings, phase, key and
//! deadlines) and the few settings it gives it after the start (and when it last caught
//! up with the client's socket).

use std::time::Instant;

use switchboard_core::protocol::AudioSettings;

use super::{Machine, Phase};
use crate::directory::{Reach, Target};

impl Machine {
    /// Whether the session is a phone call's: its memory holds the call its SIP edge
    /// vouched for (inbound, `phoneCall`) or the outbound call the gateway placed, and only
    /// a SIP edge's credential starts one (`crate::phone`, `crate::calls`).
    pub fn is_phone_call(&self) -> bool {
        let memory = &self.kept.memory;
        memory.contains_key(switchboard_core::phone::MEMORY_KEY)
            || memory.contains_key(switchboard_core::outbound::MEMORY_KEY)
    }

    /// Who hung up, for a phone call's session that ended (see [`Machine::is_phone_call`]).
    pub fn hung_up_by(&self) -> Option<switchboard_core::outbound::HungUpBy> {
        self.hung_up_by.filter(|_| self.is_phone_call())
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The variant of the Agent serving the session it runs, if that Agent runs variants.
    pub fn variant(&self) -> Option<&str> {
        self.settings.variants().get(&self.target.key()).map(String::as_str)
    }

    /// The session was placed on `route`'s fallback `region` (its own was full or failing,
    /// `cause`): that Agent's runtime sessions open their streams there.
    pub fn place(&mut self, route: &switchboard_crds::routing::Route, region: String, cause: &'static str) {
        let agent = format!("{}/{}", route.namespace, route.name);
        // The first runtime session is asked for as the machine is made: it opens there too.
        self.state.open_in(&agent, &region);
        self.settings.place(agent, region, cause);
    }

    /// The fallback region the Agent serving the session runs it in, and why, if the
    /// session was placed there.
    pub fn placed(&self) -> Option<(&str, &'static str)> {
        self.settings.placed_for(&self.target)
    }

    /// The Agent serving the session.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// About the bytes the session holds: its replay buffer and what is kept of it.
    pub fn held_bytes(&self) -> usize {
        self.replay.bytes() + self.kept.bytes()
    }

    /// The gateway is past its memory budget: the replay buffer, the one part a session
    /// can do without, keeps an eighth of its bytes (a resume from before them is told of
    /// the gap) until the pressure is gone.
    pub fn shed_replay(&mut self) {
        self.replay.trim(self.limits.replay_messages, self.limits.replay_bytes / 8);
    }

    /// The driver found the client's socket empty at `at` (it had read everything that had
    /// arrived): the frames it reads next came after `at`, and the session's message rate
    /// judges them from there, not from when the driver got to them
    /// ([`switchboard_serve::bucket`]).
    pub fn client_caught_up(&mut self, at: Instant) {
        self.client.caught_up(at);
    }

    /// The voice the client asked for.
    pub fn voice(&self) -> &Option<String> {
        self.settings.voice()
    }

    /// The modalities the client asked for.
    pub fn modalities(&self) -> &[String] {
        self.settings.modalities()
    }

    /// The audio formats the client asked for.
    pub fn audio(&self) -> Option<&AudioSettings> {
        self.settings.audio()
    }

    /// Sets the audio formats the client asked for (runtimes opened from now on get them).
    pub fn set_audio(&mut self, audio: Option<AudioSettings>) {
        self.settings.set_audio(audio);
    }

    /// A test session (`session_start.candidate`): the candidate pods of every Agent it
    /// reaches that has them.
    pub fn with_reach(mut self, reach: Reach) -> Self {
        self.settings.set_reach(reach);
        self
    }

    /// The text model the client chose (`session_start.model`), for the agent it starts at.
    pub fn with_model(mut self, model: Option<String>) -> Self {
        let chosen = model.map(|model| (self.target.route.name.clone(), model));
        self.settings.set_model(chosen);
        self
    }

    /// The text model the client chose, if it chose one for `agent`.
    pub fn model_for(&self, agent: &str) -> Option<String> {
        self.settings.model_for(agent)
    }

    /// The serving pod drains (the session moves when another is ready).
    pub fn pod_draining(&self) -> bool {
        self.state.draining()
    }

    /// The session's turn (user inputs taken up so far).
    pub fn turn(&self) -> u64 {
        self.kept.turn
    }

    /// What the task waits on.
    pub fn phase(&self) -> Phase<'_> {
        self.state.phase()
    }

    /// The store key of the newest resume token (none before the first).
    pub fn key(&self) -> Option<&str> {
        self.client.key()
    }

    /// Forgets the resume key (the session ended or was parked under it).
    pub fn take_key(&mut self) -> Option<String> {
        self.client.take_key()
    }

    /// When the session counts as idle unless something moves.
    pub fn idle_deadline(&self) -> Instant {
        self.client.idle_deadline(self.limits.idle_timeout)
    }
}
