//! A route's share of the model quota ([`RouteCapacity`]): the pool its Agent's model
//! streams count in, the pool of its fallback region, and how its new sessions wait for a
//! slot, as the operator resolves it from `spec.capacity`, `spec.model.region` and
//! `spec.model.voiceFallback.region`, and the gateway applies it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::Mode;

/// A route's share of the model quota: the pool its streams count in and how its sessions
/// wait for a slot (see `switchboard_capacity`).
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
    /// The region new sessions go to when the pool's region is full or failing: a voice or
    /// hybrid Agent's `spec.model.voiceFallback.region` when it differs from its own. Its
    /// sessions count in `<account>/<fallbackRegion>`, and their Nova Sonic streams open
    /// there (the gateway names the region in the session's grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_region: Option<String>,
}

impl Default for RouteCapacity {
    fn default() -> Self {
        Self::of(&crate::agent::CapacitySettings::default(), &crate::agent::ModelSettings::default(), Mode::Text)
    }
}

impl RouteCapacity {
    /// The capacity of an Agent of `mode` with `settings` whose model settings are `model`.
    pub fn of(settings: &crate::agent::CapacitySettings, model: &crate::agent::ModelSettings, mode: Mode) -> Self {
        let region = &model.region;
        let fallback_region = model
            .voice_fallback
            .as_ref()
            .and_then(|fallback| fallback.region.clone())
            .filter(|fallback| mode.has_audio() && fallback != region);
        Self {
            pool: format!("{}/{region}", settings.account()),
            priority: settings.priority,
            when_full: settings.when_full,
            hold_message: settings.hold_message.clone(),
            fallback_region,
        }
    }

    /// The pool of the fallback region (`<account>/<fallbackRegion>`), if there is one.
    pub fn fallback_pool(&self) -> Option<String> {
        let region = self.fallback_region.as_deref()?;
        let account = self.pool.split_once('/').map_or(self.pool.as_str(), |(account, _)| account);
        Some(format!("{account}/{region}"))
    }

    pub(super) fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{CapacitySettings, ModelSettings, VoiceFallback};

    #[test]
    fn a_voice_agents_fallback_region_has_a_pool_of_the_same_account() {
        let settings = CapacitySettings { account: Some("bank-prod".into()), ..Default::default() };
        let mut model = ModelSettings::default();
        assert_eq!(RouteCapacity::of(&settings, &model, Mode::Voice).fallback_pool(), None);
        model.voice_fallback = Some(VoiceFallback { model_id: None, region: Some("us-west-2".into()) });
        let voice = RouteCapacity::of(&settings, &model, Mode::Voice);
        assert_eq!(voice.pool, "bank-prod/us-east-1");
        assert_eq!(voice.fallback_region.as_deref(), Some("us-west-2"));
        assert_eq!(voice.fallback_pool().as_deref(), Some("bank-prod/us-west-2"));
        assert!(RouteCapacity::of(&settings, &model, Mode::Hybrid).fallback_pool().is_some());
        assert_eq!(RouteCapacity::of(&settings, &model, Mode::Text).fallback_pool(), None, "text streams no voice");
        model.voice_fallback = Some(VoiceFallback { model_id: Some("other".into()), region: Some("us-east-1".into()) });
        assert_eq!(RouteCapacity::of(&settings, &model, Mode::Voice).fallback_pool(), None, "its own region");
    }
}
