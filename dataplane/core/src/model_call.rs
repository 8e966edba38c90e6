//! The model call of a session's turn: the conversation compacted to the session's model's
//! budget (`contextTokens`, or the model's default), the tools offered at this workflow
//! step, and the session's text model (the Agent's, or the one the session chose) with the
//! Agent's sampling and reasoning settings.

use super::session::{Effect, Phase, Session};
use crate::model::{ContentBlock, ModelRequest};

impl Session {
    /// Compacts if needed (see `compaction`), then asks for a model call with the current prompt and tools.
    pub(super) fn call_model(&mut self) -> Vec<Effect> {
        let mut effects = self.compact(false);
        let core = self.core.clone();
        let model = &core.spec().model;
        let mut tools = self.core.offered_tools(&self.workflow, self.return_to.as_deref(), &self.memory);
        if tools.is_empty() {
            let mut used: Vec<&str> = self
                .messages
                .iter()
                .flat_map(|m| m.content.iter())
                .filter_map(|b| if let ContentBlock::ToolUse(u) = b { Some(u.name.as_str()) } else { None })
                .collect();
            used.sort_unstable();
            used.dedup();
            tools = used.into_iter().map(|name| core.definition_of(name)).collect();
        }
        let mut request = ModelRequest::new(self.model_id.clone(), self.messages.clone());
        request.system = self.system_prompt();
        request.tools = tools;
        request.max_tokens = model.max_tokens;
        request.temperature = model.temperature;
        request.top_p = model.top_p;
        request.reasoning = model.reasoning.as_ref().map(|r| r.effort);
        self.phase = Phase::Model;
        effects.push(Effect::CallModel(request));
        effects
    }
}
