//! Redaction: what the conversation record (and, when opted in, a trace) must never hold in
//! the clear. Built-in detectors — international bank account numbers ([`iban`]: the
//! country's length and the mod-97 check), payment card numbers (13 to 19 digits, spaces or
//! dashes between groups, only when the Luhn check holds), e-mail addresses and phone
//! numbers — and
//! an operator's own named patterns (an Example Bank account number, a sort code) replace
//! what they match with `[redacted:<name>]` before anything is stored or exported. The live
//! conversation is not touched. Pure: the gateway's record and the runtime's traces use it.

use regex::Regex;

mod iban;

/// One named pattern.
#[derive(Clone, Debug)]
struct Rule {
    name: String,
    pattern: Regex,
    /// What a match must pass to be redacted.
    check: Check,
}

/// What a match must pass to be redacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Nothing: every match is.
    None,
    /// The Luhn check (cards).
    Luhn,
    /// Being one or more IBANs ([`iban::redact`] finds them inside the match).
    Iban,
}

/// A rule that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// Not `name=regex`.
    #[error("a redaction rule is `name=regex` (the name in letters, digits, - or _): got {0:?}")]
    Shape(String),
    /// The regex does not compile.
    #[error("the redaction rule {name:?} is not a valid regular expression: {error}")]
    Pattern {
        /// The rule.
        name: String,
        /// Why.
        error: regex::Error,
    },
}

/// The rules, in the order they apply: cards, the operator's, phone numbers, e-mail.
#[derive(Clone, Debug)]
pub struct Redactor {
    rules: Vec<Rule>,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new(&[]).unwrap_or_else(|_| Self { rules: Vec::new() })
    }
}

// The built-in patterns are constants, checked by the tests below.
fn builtin(name: &str, pattern: &str, check: Check) -> Rule {
    #[allow(clippy::expect_used)]
    let pattern = Regex::new(pattern).expect("built-in redaction patterns compile");
    Rule { name: name.to_owned(), pattern, check }
}

impl Redactor {
    /// The built-in detectors with the operator's `name=regex` rules (applied after cards,
    /// before phone numbers, so an account number is not taken for a phone number).
    pub fn new(custom: &[String]) -> Result<Self, RuleError> {
        // IBANs before cards: an IBAN's digits could pass for a card's.
        let mut rules = vec![
            builtin("iban", iban::CANDIDATE, Check::Iban),
            builtin("card", r"\b\d(?:[ -]?\d){12,18}\b", Check::Luhn),
        ];
        for rule in custom {
            let (name, pattern) = rule.split_once('=').ok_or_else(|| RuleError::Shape(rule.clone()))?;
            rules.push(
                custom_rule(name.trim(), pattern).map_err(|e| e.unwrap_or_else(|| RuleError::Shape(rule.clone())))?,
            );
        }
        rules.push(builtin("email", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", Check::None));
        // International (+44 20 7946 0958, +14155550123) or grouped national numbers
        // ((415) 555-0123, 020 7946 0958): at least 9 digits, with a + or separators.
        rules.push(builtin(
            "phone",
            r"(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4})|(?:\(\d{2,5}\)[ .-]?\d{3,4}[ .-]?\d{3,4})|(?:\b0\d{2,4}[ .-]\d{3,4}[ .-]?\d{3,4}\b)|(?:\b\d{3}[.-]\d{3}[.-]\d{4}\b)",
            Check::None,
        ));
        Ok(Self { rules })
    }

    /// These rules and an Agent's own `(name, pattern)` rules after the operator's (before
    /// phone numbers and e-mail addresses).
    pub fn extended<'a>(&self, extra: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, RuleError> {
        let mut rules = self.rules.clone();
        // The last two are e-mail and phone numbers (see `new`).
        let at = rules.len().saturating_sub(2);
        let mut added = Vec::new();
        for (name, pattern) in extra {
            added.push(custom_rule(name, pattern).map_err(|e| e.unwrap_or_else(|| RuleError::Shape(name.to_owned())))?);
        }
        rules.splice(at..at, added);
        Ok(Self { rules })
    }

    /// `text` with every match replaced; borrowed when nothing matched.
    pub fn text<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let mut out = std::borrow::Cow::Borrowed(text);
        for rule in &self.rules {
            if !rule.pattern.is_match(&out) {
                continue;
            }
            let replaced = rule.pattern.replace_all(&out, |caps: &regex::Captures<'_>| {
                let found = &caps[0];
                match rule.check {
                    Check::Luhn if !luhn(found) => found.to_owned(),
                    Check::Iban => iban::redact(found, &rule.name),
                    _ => format!("[redacted:{}]", rule.name),
                }
            });
            out = std::borrow::Cow::Owned(replaced.into_owned());
        }
        out
    }

    /// Redacts every string in `value` (object keys stay).
    pub fn value(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                if let std::borrow::Cow::Owned(redacted) = self.text(s) {
                    *s = redacted;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|item| self.value(item)),
            // A whole number may be a card or an account number too: redacted as its text.
            serde_json::Value::Number(n) if !n.is_f64() => {
                let text = n.to_string();
                if let std::borrow::Cow::Owned(redacted) = self.text(&text) {
                    *value = serde_json::Value::String(redacted);
                }
            }
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) | serde_json::Value::Null => {}
        }
    }
}

/// An operator's or an Agent's rule; `Err(None)` for a bad name.
fn custom_rule(name: &str, pattern: &str) -> Result<Rule, Option<RuleError>> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(None);
    }
    let pattern = Regex::new(pattern).map_err(|error| Some(RuleError::Pattern { name: name.to_owned(), error }))?;
    Ok(Rule { name: name.to_owned(), pattern, check: Check::None })
}

/// Whether the digits of `text` pass the Luhn check.
fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bank() -> Redactor {
        Redactor::new(&[r"account=\b\d{8}\b".into(), r"sort-code=\b\d{2}-\d{2}-\d{2}\b".into()]).expect("rules")
    }

    #[test]
    fn cards_are_redacted_only_when_the_luhn_check_holds() {
        let r = Redactor::default();
        assert_eq!(r.text("card 4111 1111 1111 1111 please"), "card [redacted:card] please");
        assert_eq!(r.text("4111-1111-1111-1111"), "[redacted:card]");
        assert_eq!(r.text("5500005555555559"), "[redacted:card]");
        // Sixteen digits failing the check: an order number, kept.
        assert_eq!(r.text("order 4111111111111112"), "order 4111111111111112");
    }

    #[test]
    fn ibans_are_redacted_before_anything_takes_their_digits() {
        let r = Redactor::default();
        assert_eq!(r.text("my IBAN is DE89 3704 0044 0532 0130 00, thanks"), "my IBAN is [redacted:iban], thanks");
        assert_eq!(r.text("iban: gb82west12345698765432."), "iban: [redacted:iban].");
        assert_eq!(r.text("ref AB12 CDEF and 42 items"), "ref AB12 CDEF and 42 items");
        let mut value = serde_json::json!({"to": "NL91ABNA0417164300"});
        r.value(&mut value);
        assert_eq!(value, serde_json::json!({"to": "[redacted:iban]"}));
    }

    #[test]
    fn email_and_phone_numbers_are_redacted() {
        let r = Redactor::default();
        assert_eq!(r.text("write to ada.lovelace+bank@example.co.uk"), "write to [redacted:email]");
        assert_eq!(r.text("call +44 20 7946 0958 now"), "call [redacted:phone] now");
        assert_eq!(r.text("or (415) 555-0123"), "or [redacted:phone]");
        assert_eq!(r.text("or 415-555-0123"), "or [redacted:phone]");
        assert_eq!(r.text("it costs 12.50 for 3 days"), "it costs 12.50 for 3 days");
    }

    #[test]
    fn operator_rules_apply_before_phone_numbers() {
        let r = bank();
        assert_eq!(
            r.text("account 12345678, sort code 12-34-56"),
            "account [redacted:account], sort code [redacted:sort-code]"
        );
        let mut value = serde_json::json!({"account": 12345678, "note": ["to 87654321"], "ok": true});
        r.value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"account": "[redacted:account]", "note": ["to [redacted:account]"], "ok": true})
        );
    }

    #[test]
    fn an_agents_rules_extend_the_operators_before_phone_numbers() {
        let r = Redactor::new(&[r"sort-code=\b\d{2}-\d{2}-\d{2}\b".into()]).expect("rules");
        // Without the Agent's rule, an 8-digit account number stays; with it, it goes, and
        // an 11-digit account is not taken for a phone number.
        assert_eq!(r.text("account 12345678"), "account 12345678");
        let agent = r.extended([("account", r"\b\d{8}\b"), ("member", r"\bM\d{10}\b")]).expect("agent rules");
        assert_eq!(
            agent.text("account 12345678, sort code 12-34-56, member M0207946095, ada@example.com"),
            "account [redacted:account], sort code [redacted:sort-code], member [redacted:member], [redacted:email]"
        );
        assert!(matches!(r.extended([("bad name", "x")]), Err(RuleError::Shape(_))));
        assert!(matches!(r.extended([("acct", "(")]), Err(RuleError::Pattern { .. })));
    }

    #[test]
    fn bad_rules_are_refused_with_the_rule_named() {
        assert!(matches!(Redactor::new(&["no-equals".into()]), Err(RuleError::Shape(_))));
        assert!(matches!(Redactor::new(&["bad name=x".into()]), Err(RuleError::Shape(_))));
        let error = Redactor::new(&["acct=(".into()]).expect_err("invalid regex");
        assert!(error.to_string().contains("\"acct\""), "{error}");
    }
}
