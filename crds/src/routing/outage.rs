//! Outage mode in the routing table: an Agent's own ([`RouteOutage`], from `spec.outage`),
//! a whole namespace's switch ([`NamespaceOutage`], from its [`OUTAGE_SWITCH_CONFIG_MAP`]),
//! and which applies to an Agent ([`RoutingTable::outage_in_effect`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RoutingTable;

/// The name of the ConfigMap that switches a whole namespace into outage mode: in the
/// namespace, `data.active: "true"` (or `"false"`), and an optional `data.message`.
pub const OUTAGE_SWITCH_CONFIG_MAP: &str = "switchboard-outage";

/// A namespace switched into outage mode as a whole.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceOutage {
    /// What the callers of an Agent that names no fallback message are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl NamespaceOutage {
    /// The switch of a namespace from its [`OUTAGE_SWITCH_CONFIG_MAP`]'s `data`: `Ok(None)`
    /// while off, `Err` with what a person has to fix when `active` is neither `"true"` nor
    /// `"false"` or the message is blank or too long (the switch then counts as off).
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Option<Self>, String> {
        let message = data.get("message").map(|m| m.trim().to_owned());
        if let Some(m) = &message
            && (m.is_empty() || m.len() > crate::agent::MAX_FALLBACK_MESSAGE)
        {
            return Err(format!(
                "data.message must be 1 to {} bytes of text, not blank ({} now)",
                crate::agent::MAX_FALLBACK_MESSAGE,
                m.len()
            ));
        }
        match data.get("active").map(|a| a.trim()) {
            Some("true") => Ok(Some(Self { message })),
            Some("false") => Ok(None),
            Some(other) => Err(format!("data.active must be \"true\" or \"false\", not {other:?}")),
            None => {
                Err("data.active is missing: set it to \"true\" (every Agent of the namespace falls back) or \"false\""
                    .to_owned())
            }
        }
    }
}

/// An Agent's outage mode as the gateway applies it (`spec.outage`, its person resolved
/// from `spec.telephony.people`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteOutage {
    /// The switch: every new session goes to the fallback.
    #[serde(default)]
    pub active: bool,
    /// The person new sessions are put through to, with their address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<crate::agent::Person>,
    /// What the caller is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the gateway trips outage mode by itself.
    #[serde(default)]
    pub breaker: crate::agent::Breaker,
    /// A text-only reply (`spec.outage.fallback.text`): a new session whose client reads
    /// text is served in text through the Agent's text model instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text: bool,
}

impl RouteOutage {
    /// The outage mode of an Agent with `spec`, if it has one.
    pub fn of(spec: &crate::AgentSpec) -> Option<Self> {
        let outage = spec.outage.as_ref()?;
        let person = outage.fallback.person.as_deref().and_then(|name| spec.telephony.person(name)).cloned();
        Some(Self {
            active: outage.active,
            person,
            message: outage.fallback.message.clone(),
            breaker: outage.breaker.clone(),
            text: outage.fallback.text && spec.mode.has_audio(),
        })
    }
}

impl RoutingTable {
    /// The outage mode of Agent `namespace/name`, if it has one (`spec.outage`).
    pub fn outage(&self, namespace: &str, name: &str) -> Option<&RouteOutage> {
        self.outages.get(&format!("{namespace}/{name}"))
    }

    /// The outage mode the gateway applies to Agent `namespace/name`: its own, switched on
    /// while its namespace is ([`Self::namespace_outages`]); in such a namespace an Agent
    /// without outage mode gets the namespace's (the switch on, its message, no breaker).
    pub fn outage_in_effect(&self, namespace: &str, name: &str) -> Option<RouteOutage> {
        let own = self.outage(namespace, name);
        let Some(switched) = self.namespace_outages.get(namespace) else { return own.cloned() };
        let mut outage = own.cloned().unwrap_or_else(|| RouteOutage {
            active: true,
            person: None,
            message: switched.message.clone(),
            breaker: crate::agent::Breaker { enabled: false, ..crate::agent::Breaker::default() },
            text: false,
        });
        outage.active = true;
        Some(outage)
    }

    /// Every routed Agent (`namespace/name`) with an outage mode in effect
    /// ([`Self::outage_in_effect`]).
    pub fn outages_in_effect(&self) -> Vec<(String, RouteOutage)> {
        self.routes
            .iter()
            .filter_map(|r| {
                Some((format!("{}/{}", r.namespace, r.name), self.outage_in_effect(&r.namespace, &r.name)?))
            })
            .collect()
    }
}
