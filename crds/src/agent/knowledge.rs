//! What an Agent knows besides its prompt: an agent-level data context and bootstrap files
//! (policies, FAQs), written inline or kept in ConfigMaps of the Agent's namespace, so a
//! long fee schedule or FAQ is edited with `kubectl create configmap --from-file` and
//! reaches the pods (the operator rolls them) without touching the Agent.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The ConfigMaps an Agent references that exist, by name: their `data`. The operator reads
/// them from the cluster, the local runner from the folder's ConfigMap documents.
pub type ConfigMaps = BTreeMap<String, BTreeMap<String, String>>;

/// Default of `knowledge.maxBytes`.
pub const DEFAULT_KNOWLEDGE_BYTES: u32 = 65_536;
/// Largest `knowledge.maxBytes`: the resolved knowledge travels to the pods inside the
/// runtime ConfigMap, which Kubernetes caps at 1 MiB.
pub const MAX_KNOWLEDGE_BYTES: u32 = 524_288;
/// Longest inline `text` of a context source.
pub const MAX_INLINE_BYTES: usize = 65_536;

/// Text for the model's context: written inline (`text`) or read from a ConfigMap in the
/// Agent's namespace (`configMapRef`). Exactly one of the two.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.text) != has(self.configMapRef)").message("set exactly one of text and configMapRef"))]
#[serde(rename_all = "camelCase")]
pub struct ContextSource {
    /// The text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub text: Option<String>,
    /// A ConfigMap of the Agent's namespace holding the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ConfigMapKeyRef>,
}

impl ContextSource {
    /// Inline text.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), config_map_ref: None }
    }

    /// The ConfigMap this source reads, if any.
    pub fn config_map(&self) -> Option<&ConfigMapKeyRef> {
        self.config_map_ref.as_ref()
    }
}

/// A ConfigMap (in the Agent's namespace), or one key of it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// One key of its `data`. When absent, every key of `data` is used, in key order (for
    /// `files`, each key is one file, named by the key). `binaryData` is not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// An Agent's knowledge.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Knowledge {
    /// The agent-level data context: facts the model uses in every turn (in the Persona's
    /// `{dataContext}`, or after the workflow when the prompt has no such placeholder).
    /// While a skill with a data context of its own is in use, the skill's replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_context: Option<ContextSource>,
    /// Bootstrap files: documents (policies, FAQs) given to the model in every turn, each
    /// under its name. A ConfigMap without `key` contributes every key as one file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub files: Vec<ConfigMapKeyRef>,
    /// Most bytes all of the Agent's knowledge may take together: the data context, the
    /// files and every skill's data context. An Agent over it is not accepted
    /// (`KnowledgeTooLarge`). Default 65536, at most 524288.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = 524288))]
    pub max_bytes: u32,
}

impl Default for Knowledge {
    fn default() -> Self {
        Self { data_context: None, files: Vec::new(), max_bytes: DEFAULT_KNOWLEDGE_BYTES }
    }
}

impl Knowledge {
    /// True when the Agent has no knowledge configured (the default).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// Every ConfigMap name an Agent spec references (knowledge and skills), each once, in
/// name order.
pub fn referenced_config_maps(spec: &super::AgentSpec) -> Vec<String> {
    let knowledge = &spec.knowledge;
    let names: std::collections::BTreeSet<String> = knowledge
        .data_context
        .iter()
        .chain(spec.skills.iter().filter_map(|s| s.data_context.as_ref()))
        .filter_map(|c| c.config_map())
        .chain(knowledge.files.iter())
        .map(|r| r.name.clone())
        .collect();
    names.into_iter().collect()
}

fn default_max_bytes() -> u32 {
    DEFAULT_KNOWLEDGE_BYTES
}
