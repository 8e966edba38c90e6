//! `{placeholder}` interpolation of scripted replies.
//!
//! A placeholder names, in this order of lookup: a capture group of the rule's
//! `userText` regex (by name or number; `{0}` is the whole match); a field of the tool
//! result being answered (a top-level key such as `{balance}`, or a JSON Pointer such as
//! `{/account/balance}`); or a built-in: `{text}` (the latest user text), `{tool}` (the
//! tool whose result is answered), `{result}` (that result as compact JSON), `{model}` (the
//! model id). `{{` and `}}` are literal
//! braces. An unknown placeholder is left as written, so a script mistake is visible in
//! the reply.

use std::collections::HashMap;

/// The values placeholders can refer to.
#[derive(Debug, Default)]
pub struct Context<'a> {
    /// Capture groups by name and by number.
    pub captures: HashMap<String, String>,
    /// The tool result being answered.
    pub result: Option<&'a serde_json::Value>,
    /// Built-ins: `text`, `tool`, `result`, `model`.
    pub builtins: HashMap<&'static str, String>,
}

impl Context<'_> {
    /// The JSON value a placeholder refers to, if any.
    pub fn lookup(&self, name: &str) -> Option<serde_json::Value> {
        if let Some(capture) = self.captures.get(name) {
            return Some(serde_json::Value::String(capture.clone()));
        }
        if let Some(result) = self.result {
            let found = if name.starts_with('/') { result.pointer(name) } else { result.get(name) };
            if let Some(value) = found {
                return Some(value.clone());
            }
        }
        self.builtins.get(name).map(|v| serde_json::Value::String(v.clone()))
    }
}

/// Interpolates the placeholders of `template`. JSON strings are inserted without quotes;
/// other JSON values as compact JSON.
pub fn render(template: &str, context: &Context<'_>) -> String {
    switchboard_crds::template::render(template, |name| {
        context.lookup(name).map(|value| match value {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })
    })
}

/// Interpolates every string inside a JSON template. A string that is exactly one
/// placeholder is replaced by the referenced value with its JSON type (so
/// `"amount": "{/amount}"` stays a number).
pub fn render_json(template: &serde_json::Value, context: &Context<'_>) -> serde_json::Value {
    match template {
        serde_json::Value::String(s) => {
            let whole = s.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
            if let Some(value) = whole.filter(|n| !n.contains(['{', '}'])).and_then(|n| context.lookup(n)) {
                return value;
            }
            serde_json::Value::String(render(s, context))
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(|v| render_json(v, context)).collect())
        }
        serde_json::Value::Object(map) => {
            serde_json::Value::Object(map.iter().map(|(k, v)| (k.clone(), render_json(v, context))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context(result: &serde_json::Value) -> Context<'_> {
        let mut context = Context { result: Some(result), ..Context::default() };
        context.captures.insert("name".into(), "Ada Lovelace".into());
        context.captures.insert("0".into(), "whole".into());
        context.builtins.insert("text", "hello".into());
        context
    }

    #[test]
    fn renders_captures_fields_pointers_builtins_and_escapes() {
        let result = json!({"balance": 1234.5, "currency": "GBP", "account": {"number": "12345678"}});
        let ctx = context(&result);
        assert_eq!(
            render("Hi {name}, {balance} {currency} on {/account/number} ({text}) {{x}} {0}", &ctx),
            "Hi Ada Lovelace, 1234.5 GBP on 12345678 (hello) {x} whole"
        );
        assert_eq!(render("unknown {nope} and { stray", &ctx), "unknown {nope} and { stray");
        assert_eq!(render("closing } alone", &ctx), "closing } alone");
    }

    #[test]
    fn json_templates_keep_types_of_whole_placeholders() {
        let result = json!({"balance": 10, "items": [1, 2]});
        let ctx = context(&result);
        let rendered = render_json(
            &json!({"who": "{name}", "amount": "{balance}", "list": ["{items}", "n={balance}"], "n": 3}),
            &ctx,
        );
        assert_eq!(rendered, json!({"who": "Ada Lovelace", "amount": 10, "list": [[1, 2], "n=10"], "n": 3}));
    }
}
