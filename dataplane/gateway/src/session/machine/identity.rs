//! The verified caller's identity assertion ([`switchboard_core::assertion`]), the session
//! machine's rules. A runtime session opened while the memory holds `verifiedUser` gets one
//! in its grant (the task signs it, [`crate::upstream`]). A caller verified during the
//! session — the runtime's `memory_update` of `verifiedUser` — is asserted to that runtime
//! at once ([`Effect::AssertIdentity`]), and the assertion it holds is replaced before it
//! expires. A client never sends one: its `identity_assertion` gets a `bidi_error` and goes
//! no further (the runtime would refuse it anyway, but the gateway does not relay it).

use switchboard_core::assertion::IDENTITY_KEY;
use switchboard_core::protocol::{ErrorCode, ServerMessage};

use super::{Cx, Effect, Machine};

impl Machine {
    /// The verified caller the session's memory holds now.
    pub(in crate::session) fn caller(&self) -> Option<serde_json::Value> {
        self.kept.memory.get(IDENTITY_KEY).filter(|value| !value.is_null()).cloned()
    }

    /// A runtime message was kept: a caller other than `before` is asserted to the runtime
    /// at once; a caller no longer there needs no more assertions (the runtime drops its
    /// own when its memory loses the caller).
    pub(in crate::session) fn caller_observed(&mut self, before: Option<serde_json::Value>, cx: &Cx<'_>) {
        match self.caller() {
            None => self.runtime.forget_assertion(),
            Some(caller) if Some(&caller) != before.as_ref() => self.assert_identity(caller, cx),
            Some(_) => {}
        }
    }

    /// A runtime session opened: its grant carried an assertion if there is a caller.
    pub(in crate::session) fn identity_granted(&mut self, cx: &Cx<'_>) {
        let caller = self.caller().is_some();
        self.runtime.granted(caller, cx.now);
    }

    /// Every ping interval: an assertion the runtime has held for
    /// [`REFRESH_AFTER_SECS`](switchboard_core::assertion::REFRESH_AFTER_SECS) is replaced, so it never holds an expired one.
    pub(in crate::session) fn refresh_identity(&mut self, cx: &Cx<'_>) {
        let due = self.runtime.assertion_due(cx.now);
        if let Some(caller) = self.caller().filter(|_| due) {
            self.assert_identity(caller, cx);
        }
    }

    fn assert_identity(&mut self, caller: serde_json::Value, cx: &Cx<'_>) {
        if !self.runtime.is_open() || !self.state.is_live() {
            return;
        }
        self.runtime.asserted(cx.now);
        self.push(Effect::AssertIdentity(caller));
    }

    /// A client's `identity_assertion`: refused, and the session goes on.
    pub(in crate::session) fn refuse_gateway_only(&mut self) {
        let message = "identity_assertion is sent to runtimes only by the Switchboard gateway, never by a client; \
                       the frame was dropped";
        self.deliver(ServerMessage::error(ErrorCode::IdentityRefused, message, true).into());
    }
}
