//! Outage notices: a session under way whose Agent is switched into outage mode (its own
//! switch or its namespace's, [`crate::outage::notice`]) is told so once
//! (`bidi_session_outage`, `active: true`, with the fallback new sessions get) and goes on
//! — a live conversation is not cut off mid-sentence; the client may offer the caller the
//! fallback. It is told again when the switch goes off (`active: false`) or the fallback
//! changes. A session that reaches an Agent already switched on (a handoff, a resume, a
//! move) is told after that Agent's `bidi_connection_start`. The breaker's automatic trips
//! are not told: they divert new sessions only.

use super::{Cx, Machine};
use crate::outage::notice;

impl Machine {
    /// The switched-on Agents changed, or a runtime session of the serving Agent started:
    /// tells the client what no longer holds of what it was told.
    pub(super) fn outage_check(&mut self, cx: &Cx<'_>) {
        if !self.state.is_live() {
            return;
        }
        let route = &self.target.route;
        let on = notice::switched_on(cx.directory.table(), &route.namespace, &route.name);
        let agent = self.target.key();
        let message = notice::told(&agent, on.as_ref());
        let told_here = self.outage_told.as_ref().is_some_and(|(told, _)| *told == agent);
        match on {
            Some(_) if self.outage_told.as_ref().is_some_and(|(_, told)| *told == message) => {}
            Some(_) => {
                self.outage_told = Some((agent, message.clone()));
                self.deliver(message.into());
            }
            None if told_here => {
                self.outage_told = None;
                self.deliver(message.into());
            }
            // Told of an Agent the session has left: nothing to take back.
            None => self.outage_told = None,
        }
    }
}
