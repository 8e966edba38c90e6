//! Checks of an Agent's record settings: redaction rules the gateway can compile.

use super::{Problem, Reason, duplicates};
use crate::agent::{AgentSpec, MAX_REDACT_PATTERN_LEN, MAX_REDACT_RULES, RedactRule};

/// Problems with `spec.record`.
pub(super) fn check_record(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let rules = &spec.record.redact;
    if rules.len() > MAX_REDACT_RULES {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.record.redact",
            format!("has {} rules; at most {MAX_REDACT_RULES}", rules.len()),
        ));
    }
    for name in duplicates(rules.iter().map(|r| r.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.record.redact",
            format!("two rules are named {name:?}; give each its own name"),
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        for (part, message) in rule_problems(rule) {
            problems.push(Problem::new(Reason::InvalidField, format!("spec.record.redact[{i}].{part}"), message));
        }
    }
}

/// What is wrong with one redaction rule, by part (`name`, `pattern`): an Agent's, or the
/// platform's (the operator's `--runtime-record-redact`).
pub fn rule_problems(rule: &RedactRule) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    let name_ok = !rule.name.is_empty()
        && rule.name.len() <= 63
        && rule.name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !name_ok {
        problems.push(("name", format!("{:?} must be 1 to 63 letters, digits, '_' or '-'", rule.name)));
    }
    if rule.pattern.is_empty() || rule.pattern.len() > MAX_REDACT_PATTERN_LEN {
        problems.push(("pattern", format!("must be 1 to {MAX_REDACT_PATTERN_LEN} characters")));
        return problems;
    }
    match regex::Regex::new(&rule.pattern) {
        Err(error) => {
            problems.push(("pattern", format!("is not a valid regular expression (Rust regex syntax): {error}")))
        }
        Ok(re) if re.is_match("") => problems.push((
            "pattern",
            format!("{:?} matches the empty string, so it would redact between every character", rule.pattern),
        )),
        Ok(_) => {}
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rules: &[(&str, &str)]) -> AgentSpec {
        let mut spec: AgentSpec =
            serde_yaml::from_str("mode: text\npersonaRef: {name: p}\nworkflowRef: {name: w}\n").expect("spec");
        spec.record.redact =
            rules.iter().map(|(n, p)| RedactRule { name: (*n).into(), pattern: (*p).into() }).collect();
        spec
    }

    fn problems(rules: &[(&str, &str)]) -> Vec<String> {
        let mut out = Vec::new();
        check_record(&spec(rules), &mut out);
        out.iter().map(|p| format!("{}: {}", p.field, p.message)).collect()
    }

    #[test]
    fn good_rules_pass_and_each_bad_one_is_named() {
        assert!(problems(&[("account", r"\b\d{8}\b"), ("sort-code", r"\b\d{2}-\d{2}-\d{2}\b")]).is_empty());
        let bad = problems(&[("account", r"\d{8"), ("x y", "a"), ("account", "b"), ("empty", "a*")]);
        assert!(
            bad.iter().any(|p| p.contains("redact[0].pattern") && p.contains("not a valid regular expression")),
            "{bad:?}"
        );
        assert!(bad.iter().any(|p| p.contains("redact[1].name")), "{bad:?}");
        assert!(bad.iter().any(|p| p.contains("named \"account\"")), "{bad:?}");
        assert!(bad.iter().any(|p| p.contains("redact[3].pattern") && p.contains("empty string")), "{bad:?}");
        let many: Vec<(String, String)> = (0..17).map(|i| (format!("r{i}"), "x".to_owned())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, p)| (n.as_str(), p.as_str())).collect();
        assert!(problems(&many).iter().any(|p| p.contains("at most 16")));
        assert!(problems(&[("long", &"a".repeat(513))]).iter().any(|p| p.contains("1 to 512")));
    }
}
