//! What an Agent takes from the host app's backend (`spec.appContext`): the gateway checks
//! a token the app's backend minted (`session_start.app_context`) and makes its `memory`
//! claim session memory at the Agent a session starts at — the keys listed here, and the
//! Agent's identity keys (the logged-in customer) only when `identity` trusts the app for
//! who the caller is. Nothing is taken by default.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most memory keys an Agent takes from the app's backend.
pub const MAX_APP_MEMORY_KEYS: usize = 32;

/// What an Agent takes from the host app's backend when a session starts with it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppContext {
    /// Whether the caller the app's backend vouches for counts as verified here: its
    /// token's values of the Agent's identity keys (`spec.identityKeys`, default
    /// `verifiedUser`) become session memory, so a logged-in customer skips the identity
    /// check. Default false: the token's identity keys are left out and the caller is
    /// verified as usual (by the identity provider tool). Set it only where the app's
    /// sign-in is as strong as the Agent's own check.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity: bool,
    /// Other memory keys the app's backend may set (what the customer is looking at: a
    /// page, an order). Keys the token carries that are not listed are left out. Not an
    /// identity key: those are taken with `identity`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$")))]
    pub memory: Vec<String>,
}

impl AppContext {
    /// Whether the Agent takes nothing from the app (the default).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the Agent takes `key` from the app, given its identity keys.
    pub fn takes(&self, key: &str, identity_keys: &[String]) -> bool {
        if identity_keys.iter().any(|k| k == key) { self.identity } else { self.memory.iter().any(|k| k == key) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_keys_are_taken_only_with_identity_and_other_keys_only_when_listed() {
        let keys = vec!["verifiedUser".to_owned()];
        let none = AppContext::default();
        assert!(!none.takes("verifiedUser", &keys) && !none.takes("page", &keys));
        let listed = AppContext { identity: false, memory: vec!["page".into()] };
        assert!(listed.takes("page", &keys) && !listed.takes("verifiedUser", &keys) && !listed.takes("order", &keys));
        let trusted = AppContext { identity: true, memory: vec![] };
        assert!(trusted.takes("verifiedUser", &keys) && !trusted.takes("page", &keys));
    }
}
