//! Display content: a card the agent shows in the client (`display_card`) — a title, a
//! line of text, label/value fields and a link, each bounded. The model composes it by
//! calling a `showCard` built-in tool; its input is the card, checked against
//! [`card_schema`] (the schema the model is offered, whatever the Agent's `inputSchema`),
//! then read into a [`Card`]. A client shows it as it sees fit; it carries no markup.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 120;
/// The longest text, in characters.
pub const MAX_TEXT_CHARS: usize = 1000;
/// The most fields.
pub const MAX_FIELDS: usize = 12;
/// The longest field label or link label, in characters.
pub const MAX_LABEL_CHARS: usize = 60;
/// The longest field value, in characters.
pub const MAX_VALUE_CHARS: usize = 200;
/// The longest link URL, in characters.
pub const MAX_URL_CHARS: usize = 2048;

/// A card for the client to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Card {
    /// The card's title (1-120 characters).
    pub title: String,
    /// A line or two of text (at most 1,000 characters).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Label/value pairs, in order (at most 12).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<CardField>,
    /// A web link (`http` or `https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<CardLink>,
}

/// One label/value pair of a card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CardField {
    /// The label (1-60 characters).
    pub label: String,
    /// The value (at most 200 characters; a number the model gave is written as text).
    pub value: String,
}

/// A card's link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CardLink {
    /// What the link says (at most 60 characters); empty: the URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// Where it goes: an `http` or `https` URL of at most 2,048 characters.
    pub url: String,
}

/// The input schema of a `showCard` tool: the card, every size bounded.
pub fn card_schema() -> serde_json::Value {
    let text = |min: usize, max: usize, description: &str| serde_json::json!({ "type": "string", "minLength": min, "maxLength": max, "description": description });
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["title"],
        "properties": {
            "title": text(1, MAX_TITLE_CHARS, "The card's title."),
            "text": text(0, MAX_TEXT_CHARS, "A line or two of text."),
            "fields": {
                "type": "array",
                "maxItems": MAX_FIELDS,
                "description": "Label/value pairs, e.g. a transaction and its amount.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["label", "value"],
                    "properties": {
                        "label": text(1, MAX_LABEL_CHARS, "The label."),
                        "value": {
                            "type": ["string", "number"],
                            "maxLength": MAX_VALUE_CHARS,
                            "description": "The value."
                        }
                    }
                }
            },
            "link": {
                "type": "object",
                "additionalProperties": false,
                "required": ["url"],
                "properties": {
                    "label": text(0, MAX_LABEL_CHARS, "What the link says."),
                    "url": {
                        "type": "string",
                        "maxLength": MAX_URL_CHARS,
                        "pattern": "^https?://[^\\s]+$",
                        "description": "An http or https URL."
                    }
                }
            }
        }
    })
}

impl Card {
    /// The card a `showCard` call's `input` describes. The input has passed
    /// [`card_schema`]; this checks the sizes again (a schema can be bypassed by a caller
    /// that skips it) and writes numeric values as text.
    pub fn from_input(input: &serde_json::Value) -> Result<Self, String> {
        let mut input = input.clone();
        if let Some(fields) = input.get_mut("fields").and_then(serde_json::Value::as_array_mut) {
            for field in fields {
                if let Some(value) = field.get_mut("value")
                    && value.is_number()
                {
                    *value = serde_json::Value::String(value.to_string());
                }
            }
        }
        let card: Card = serde_json::from_value(input).map_err(|e| format!("the card is not well formed: {e}"))?;
        card.check()?;
        Ok(card)
    }

    /// Every bound of the card.
    pub fn check(&self) -> Result<(), String> {
        let long = |what: &str, text: &str, min: usize, max: usize| {
            let n = text.chars().count();
            (n < min || n > max).then(|| format!("{what} has {n} characters; it must have {min} to {max}"))
        };
        let mut problems =
            vec![long("the title", &self.title, 1, MAX_TITLE_CHARS), long("the text", &self.text, 0, MAX_TEXT_CHARS)];
        if self.fields.len() > MAX_FIELDS {
            problems.push(Some(format!("the card has {} fields; at most {MAX_FIELDS}", self.fields.len())));
        }
        for field in &self.fields {
            problems.push(long("a field's label", &field.label, 1, MAX_LABEL_CHARS));
            problems.push(long("a field's value", &field.value, 0, MAX_VALUE_CHARS));
        }
        if let Some(link) = &self.link {
            problems.push(long("the link's label", &link.label, 0, MAX_LABEL_CHARS));
            problems.push(long("the link's URL", &link.url, 1, MAX_URL_CHARS));
            let web = link.url.starts_with("https://") || link.url.starts_with("http://");
            if !web || link.url.chars().any(char::is_whitespace) {
                problems.push(Some("the link must be an http or https URL without spaces".into()));
            }
        }
        let problems: Vec<String> = problems.into_iter().flatten().collect();
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_accepts(input: &serde_json::Value) -> bool {
        jsonschema::validator_for(&card_schema()).expect("the card schema compiles").is_valid(input)
    }

    #[test]
    fn a_card_with_numbers_reads_as_text_and_passes_its_schema() {
        let input = serde_json::json!({
            "title": "Recent transactions",
            "fields": [{ "label": "Streamly subscription", "value": -49.99 }],
            "link": { "label": "All transactions", "url": "https://bank.example/transactions" }
        });
        assert!(schema_accepts(&input));
        let card = Card::from_input(&input).expect("a card");
        assert_eq!(card.fields[0].value, "-49.99");
        assert_eq!(card.text, "");
    }

    #[test]
    fn every_bound_is_refused_by_the_schema_and_by_the_check() {
        let cases = [
            serde_json::json!({ "title": "" }),
            serde_json::json!({ "title": "t".repeat(MAX_TITLE_CHARS + 1) }),
            serde_json::json!({ "title": "t", "text": "x".repeat(MAX_TEXT_CHARS + 1) }),
            serde_json::json!({ "title": "t", "fields": vec![serde_json::json!({ "label": "l", "value": "v" }); MAX_FIELDS + 1] }),
            serde_json::json!({ "title": "t", "fields": [{ "label": "l", "value": "v".repeat(MAX_VALUE_CHARS + 1) }] }),
            serde_json::json!({ "title": "t", "link": { "url": "javascript:alert(1)" } }),
            serde_json::json!({ "title": "t", "link": { "url": "https://a b" } }),
        ];
        for input in cases {
            assert!(!schema_accepts(&input), "the schema refuses {input}");
            assert!(Card::from_input(&input).is_err(), "the check refuses {input}");
        }
        assert!(!schema_accepts(&serde_json::json!({ "title": "t", "html": "<b>" })), "no other fields");
    }
}
