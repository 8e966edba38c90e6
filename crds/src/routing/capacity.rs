//! A route's share of the model quota ([`RouteCapacity`]): the pool its Agent's model
//! streams count in and how its new sessions wait for a slot, as the operator resolves it
//! from `spec.capacity` and `spec.model.region` and the gateway applies it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A route's share of the model quota: the pool its streams count in and how its sessions
/// wait for a slot (see `switchboard_gateway::capacity`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteCapacity {
    /// `<account>/<region>`: the provider account (`spec.capacity.account`, default
    /// `default`) and the model's region (`spec.model.region`, as the runtime resolves it).
    pub pool: String,
    /// Priority among waiting sessions (`spec.capacity.priority`).
    #[serde(default)]
    pub priority: i32,
    /// Queue or refuse when the quota is full.
    #[serde(default)]
    pub when_full: crate::agent::WhenFull,
    /// What a session waiting for a slot is told (`spec.capacity.holdMessage`; absent: the
    /// gateway's sentence with its place and the estimated wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_message: Option<String>,
}

impl Default for RouteCapacity {
    fn default() -> Self {
        Self::of(&crate::agent::CapacitySettings::default(), crate::agent::DEFAULT_REGION)
    }
}

impl RouteCapacity {
    /// The capacity of an Agent with `settings` whose model runs in `region`.
    pub fn of(settings: &crate::agent::CapacitySettings, region: &str) -> Self {
        Self {
            pool: format!("{}/{region}", settings.account()),
            priority: settings.priority,
            when_full: settings.when_full,
            hold_message: settings.hold_message.clone(),
        }
    }

    pub(super) fn is_default(&self) -> bool {
        *self == Self::default()
    }
}
