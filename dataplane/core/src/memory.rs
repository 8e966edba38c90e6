//! Session memory: what the session knows (the verified user, the intent, ...), as JSON
//! values by key. Changes are reported so they can be emitted as events and synced.

use std::collections::BTreeMap;

/// The memory of one session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    values: BTreeMap<String, serde_json::Value>,
}

impl Memory {
    /// Memory restored from handed-over values.
    pub fn from_map(values: BTreeMap<String, serde_json::Value>) -> Self {
        Self { values }
    }

    /// Sets `key`; returns true when the value changed.
    pub fn set(&mut self, key: &str, value: serde_json::Value) -> bool {
        if self.values.get(key) == Some(&value) {
            return false;
        }
        self.values.insert(key.to_owned(), value);
        true
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.values.get(key)
    }

    /// Every value, by key.
    pub fn as_map(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.values
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The text injected into the prompt for `{memory}`: one `key: value` line per entry
    /// (values as compact JSON), or a note that nothing is known yet.
    pub fn render(&self) -> String {
        if self.values.is_empty() {
            return "nothing yet".to_owned();
        }
        self.values
            .iter()
            .map(|(key, value)| match value {
                serde_json::Value::String(text) => format!("{key}: {text}"),
                other => format!("{key}: {other}"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The value, as text, compared by `memoryEquals` conditions.
    pub fn text_of(&self, key: &str) -> Option<String> {
        self.values.get(key).map(|value| match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }
}
