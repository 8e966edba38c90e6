//! The Bedrock text models Switchboard knows: each one's context window (from which the
//! default `contextTokens` comes) and how it takes reasoning settings, if it does.
//!
//! Sources: the Amazon Bedrock user guide's model cards and the Amazon Nova 2 user guide
//! ("Extended thinking": `additionalModelRequestFields.reasoningConfig` with
//! `maxReasoningEffort` low, medium or high). A model id this table does not know (a custom
//! model, a provisioned ARN, an OpenAI-compatible server's model) keeps the old default of
//! [`FALLBACK_CONTEXT_TOKENS`] and takes no reasoning settings.

/// The conversation budget of a model this table does not know (the one default every
/// model had before the table).
pub const FALLBACK_CONTEXT_TOKENS: u32 = 32_000;

/// The share of a model's context window its conversation may fill before older turns are
/// compacted, by default: the rest stays free for the system prompt, tool definitions, tool
/// results and the reply, and the cost of a turn stays bounded.
pub const DEFAULT_WINDOW_SHARE: u32 = 4;

/// How a model takes reasoning (extended thinking) settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningStyle {
    /// It takes none.
    None,
    /// Amazon Nova 2: `reasoningConfig: {type: enabled, maxReasoningEffort: <effort>}`.
    NovaEffort,
}

/// One known text model family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextModel {
    /// The start of the Bedrock model ids of the family (e.g. `amazon.nova-lite-v1`); a
    /// cross-region inference profile prefix (`us.`, `eu.`, ...) is ignored.
    pub prefix: &'static str,
    /// What people call it.
    pub name: &'static str,
    /// Its context window, in tokens.
    pub context_window: u32,
    /// How it takes reasoning settings.
    pub reasoning: ReasoningStyle,
}

impl TextModel {
    /// The default conversation budget: a [`DEFAULT_WINDOW_SHARE`]th of the window.
    pub fn default_context_tokens(&self) -> u32 {
        self.context_window / DEFAULT_WINDOW_SHARE
    }
}

const fn model(prefix: &'static str, name: &'static str, context_window: u32) -> TextModel {
    TextModel { prefix, name, context_window, reasoning: ReasoningStyle::None }
}

/// Every known text model family; longer prefixes before the shorter ones they start with.
pub const TEXT_MODELS: &[TextModel] = &[
    TextModel {
        prefix: "amazon.nova-2-lite",
        name: "Amazon Nova 2 Lite",
        context_window: 1_000_000,
        reasoning: ReasoningStyle::NovaEffort,
    },
    TextModel {
        prefix: "amazon.nova-2-pro",
        name: "Amazon Nova 2 Pro",
        context_window: 1_000_000,
        reasoning: ReasoningStyle::NovaEffort,
    },
    model("amazon.nova-micro", "Amazon Nova Micro", 128_000),
    model("amazon.nova-lite", "Amazon Nova Lite", 300_000),
    model("amazon.nova-pro", "Amazon Nova Pro", 300_000),
    model("amazon.nova-premier", "Amazon Nova Premier", 1_000_000),
    model("anthropic.claude", "Anthropic Claude", 200_000),
    model("meta.llama3", "Meta Llama 3", 128_000),
    model("meta.llama4", "Meta Llama 4", 128_000),
    model("mistral.mistral-large", "Mistral Large", 128_000),
    model("cohere.command-r", "Cohere Command R", 128_000),
    model("deepseek.r1", "DeepSeek-R1", 128_000),
];

/// Cross-region inference profile prefixes Bedrock puts before a model id.
const PROFILE_PREFIXES: [&str; 8] = ["us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca."];

/// The family `model_id` belongs to, if this table knows it.
pub fn text_model(model_id: &str) -> Option<&'static TextModel> {
    let id = PROFILE_PREFIXES.iter().find_map(|p| model_id.strip_prefix(p)).unwrap_or(model_id);
    TEXT_MODELS.iter().find(|m| id.starts_with(m.prefix))
}

/// The conversation budget of `model_id` when the Agent sets no `contextTokens`.
pub fn default_context_tokens(model_id: &str) -> u32 {
    text_model(model_id).map_or(FALLBACK_CONTEXT_TOKENS, TextModel::default_context_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_are_found_through_profile_prefixes_and_unknown_ids_keep_the_old_default() {
        assert_eq!(text_model("amazon.nova-lite-v1:0").map(|m| m.name), Some("Amazon Nova Lite"));
        assert_eq!(text_model("us.amazon.nova-2-lite-v1:0").map(|m| m.name), Some("Amazon Nova 2 Lite"));
        assert_eq!(text_model("eu.anthropic.claude-3-7-sonnet-20250219-v1:0").map(|m| m.context_window), Some(200_000));
        assert_eq!(default_context_tokens("amazon.nova-micro-v1:0"), 32_000);
        assert_eq!(default_context_tokens("amazon.nova-pro-v1:0"), 75_000);
        assert_eq!(default_context_tokens("my-local-llama"), FALLBACK_CONTEXT_TOKENS);
        assert_eq!(text_model("amazon.nova-2-lite-v1:0").map(|m| m.reasoning), Some(ReasoningStyle::NovaEffort));
        assert_eq!(text_model("amazon.nova-lite-v1:0").map(|m| m.reasoning), Some(ReasoningStyle::None));
    }

    #[test]
    fn every_prefix_is_found_as_itself() {
        for known in TEXT_MODELS {
            assert_eq!(text_model(known.prefix), Some(known), "{}", known.prefix);
        }
    }
}
