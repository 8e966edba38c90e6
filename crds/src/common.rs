//! Types shared by every kind: references to other objects and the status block.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to another object of a known kind in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// Name of the referenced object, in the same namespace as the referring one.
    pub name: String,
}

impl ObjectRef {
    /// A reference to the object named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

/// Status shared by `Workflow` and `Persona`: whether the operator accepted the spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions. `Accepted` is `True` when the spec is valid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The condition type that says whether a spec is valid and its references resolve.
pub const CONDITION_ACCEPTED: &str = "Accepted";
/// The condition type that says whether an Agent has at least one ready pod.
pub const CONDITION_READY: &str = "Ready";
/// The condition type that says whether an Agent's rollout is held until the AgentTests
/// that gate it pass (`True`: its live pods keep the last promoted spec, its candidate
/// pods serve test sessions only).
pub const CONDITION_ROLLOUT_HELD: &str = "RolloutHeld";

/// Finds the condition of type `type_` in `conditions`.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
