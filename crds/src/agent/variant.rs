//! Variants of an Agent compared on live traffic (`spec.variants`): each a different
//! Persona, Workflow, text model or prompt, with a traffic weight. The gateway picks one
//! per new session by weight (and keeps it for the session: across handoffs back, moves,
//! resumes); the runtime pods hold every variant's core, so the weights — which live only
//! in the routing table, never in the pods' spec — change without a redeploy.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ObjectRef;

/// The most variants an Agent may run.
pub const MAX_VARIANTS: usize = 8;
/// The weights of an Agent's variants add up to this (percent of new sessions).
pub const TOTAL_WEIGHT: u32 = 100;

/// One variant of an Agent (`spec.variants[]`). What it leaves out is the Agent's own.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// The variant's name, unique among the Agent's variants: in the record, traces and
    /// metrics of its sessions (e.g. `control`, `shorter-prompt`).
    #[schemars(length(min = 1, max = 32), regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"))]
    pub name: String,
    /// The percent of new sessions the variant gets, 0 to 100; the weights of all variants
    /// add up to 100. 0 keeps the variant for the sessions that have it (resumed, or a
    /// verified caller's) and sends it no new ones.
    #[schemars(range(min = 0, max = 100))]
    pub weight: u32,
    /// A Persona (same namespace) in place of the Agent's `personaRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona_ref: Option<ObjectRef>,
    /// A Workflow (same namespace) in place of the Agent's `workflowRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_ref: Option<ObjectRef>,
    /// A text model in place of `spec.model.textModelId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub text_model_id: Option<String>,
    /// A system prompt template in place of the Persona's `systemPrompt` (same placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 65536))]
    pub system_prompt: Option<String>,
}

/// Which of `variants` (name, weight) a session with the stickiness key `key` gets: a
/// stable hash of the key places it on the 0..100 line the weights divide, in their order.
/// The same key and weights give the same variant (a verified caller keeps theirs across
/// sessions); random keys split sessions by weight. None when no variant has weight.
pub fn pick<'a>(variants: impl IntoIterator<Item = (&'a str, u32)>, key: &str) -> Option<&'a str> {
    let variants: Vec<(&str, u32)> = variants.into_iter().collect();
    let total: u64 = variants.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut point = stable_hash(key) % total;
    for (name, weight) in variants {
        let weight = u64::from(weight);
        if point < weight {
            return Some(name);
        }
        point -= weight;
    }
    None
}

/// FNV-1a, 64 bits: stable across processes, versions and platforms (std's hasher is not).
fn stable_hash(key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Mix the high bits down: the modulus above reads the low ones.
    hash ^ (hash >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_split_by_weight_and_the_same_key_keeps_its_variant() {
        let variants = [("control", 80), ("candidate", 20), ("off", 0)];
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..10_000 {
            let picked = pick(variants, &format!("gw-{i}")).expect("a variant");
            *counts.entry(picked).or_insert(0) += 1;
        }
        let candidate = counts.get("candidate").copied().unwrap_or(0);
        assert!((1_700..=2_300).contains(&candidate), "{counts:?}");
        assert!(!counts.contains_key("off"), "weight 0 gets no new session: {counts:?}");
        for key in ["alice", "bob", "+441234"] {
            assert_eq!(pick(variants, key), pick(variants, key));
        }
        assert_eq!(pick([("a", 0)], "x"), None);
        assert_eq!(pick([], "x"), None);
        assert_eq!(pick([("all", 100)], "x"), Some("all"));
    }
}
