//! Checks of an Agent's record settings: redaction rules the gateway can compile, and an
//! analysis whose fields a model can fill and the gateway can count.

use super::{Problem, Reason, duplicates};
use crate::agent::{
    AgentSpec, AnalysisFieldType, AnalysisSettings, MAX_ANALYSIS_DESCRIPTION_LEN, MAX_ANALYSIS_FIELDS,
    MAX_ANALYSIS_VALUES, MAX_REDACT_PATTERN_LEN, MAX_REDACT_RULES, RESOLVED_FIELD, RedactRule,
};

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
    if let Some(analysis) = &spec.record.analysis {
        check_analysis(analysis, problems);
    }
}

/// Problems with `spec.record.analysis`.
fn check_analysis(analysis: &AnalysisSettings, problems: &mut Vec<Problem>) {
    let at = "spec.record.analysis";
    let mut invalid =
        |field: String, message: String| problems.push(Problem::new(Reason::InvalidField, field, message));
    if let Some(model) = &analysis.model
        && (model.trim().is_empty() || model.len() > 256 || model.chars().any(char::is_whitespace))
    {
        invalid(
            format!("{at}.model"),
            format!(
                "{model:?} is not a model id; name a Bedrock text model such as amazon.nova-lite-v1:0, or leave it out for the gateway's --record-analysis-model"
            ),
        );
    }
    if analysis.fields.is_empty() || analysis.fields.len() > MAX_ANALYSIS_FIELDS {
        invalid(
            format!("{at}.fields"),
            format!("has {} fields; declare 1 to {MAX_ANALYSIS_FIELDS}", analysis.fields.len()),
        );
    }
    for (i, field) in analysis.fields.iter().enumerate() {
        let here = format!("{at}.fields[{i}]");
        let name_ok = field.name.len() <= 63
            && field.name.starts_with(|c: char| c.is_ascii_lowercase())
            && field.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            invalid(
                format!("{here}.name"),
                format!("{:?} must be snake_case: a-z first, then a-z, 0-9 or '_' (at most 63)", field.name),
            );
        }
        if field.description.trim().is_empty() || field.description.len() > MAX_ANALYSIS_DESCRIPTION_LEN {
            invalid(
                format!("{here}.description"),
                format!(
                    "must say in 1 to {MAX_ANALYSIS_DESCRIPTION_LEN} characters what the field means: the model fills it from that"
                ),
            );
        }
        match field.kind {
            AnalysisFieldType::Enum if field.values.is_empty() => invalid(
                format!("{here}.values"),
                "an enum field lists the values it may take (e.g. [billing, fraud, other])".to_owned(),
            ),
            AnalysisFieldType::Enum => {
                if field.values.len() > MAX_ANALYSIS_VALUES {
                    invalid(
                        format!("{here}.values"),
                        format!("has {} values; at most {MAX_ANALYSIS_VALUES}", field.values.len()),
                    );
                }
                if field.values.iter().any(|v| v.trim().is_empty() || v.len() > 63) {
                    invalid(format!("{here}.values"), "each value is 1 to 63 characters, not blank".to_owned());
                }
                for value in duplicates(field.values.iter().map(String::as_str)) {
                    invalid(format!("{here}.values"), format!("{value:?} is listed twice"));
                }
            }
            kind if !field.values.is_empty() => invalid(
                format!("{here}.values"),
                format!(
                    "only an enum field has values; this one is a {}: make it an enum or drop the values",
                    kind.as_str()
                ),
            ),
            _ => {}
        }
        if field.name == RESOLVED_FIELD && field.kind != AnalysisFieldType::Boolean {
            invalid(
                format!("{here}.type"),
                format!(
                    "the field named {RESOLVED_FIELD:?} counts towards the resolution rate, so it must be a boolean; rename the field or make it one"
                ),
            );
        }
    }
    for name in duplicates(analysis.fields.iter().map(|f| f.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            format!("{at}.fields"),
            format!("two fields are named {name:?}; give each its own name"),
        ));
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

    fn analysed(yaml: &str) -> Vec<String> {
        let mut spec = spec(&[]);
        spec.record.analysis = Some(serde_yaml::from_str(yaml).expect("analysis"));
        let mut out = Vec::new();
        check_record(&spec, &mut out);
        out.iter().map(|p| format!("{} {}: {}", p.reason.as_str(), p.field, p.message)).collect()
    }

    #[test]
    fn an_analysis_needs_named_described_fields_an_enum_its_values_and_resolved_a_boolean() {
        let good = "fields:
  - {name: resolved, type: boolean, description: The caller got what they asked for.}
  - {name: reason, type: enum, values: [balance, fraud, other], description: Why they called.}
  - {name: follow_up, type: string, description: What is left to do.}";
        assert!(analysed(good).is_empty(), "{:?}", analysed(good));
        let bad = analysed(
            "model: 'nova lite'
fields:
  - {name: Resolved, type: boolean, description: x}
  - {name: resolved, type: string, description: x}
  - {name: reason, type: enum, description: ' '}
  - {name: score, type: number, values: [a], description: x}
  - {name: reason, type: enum, values: [a, a], description: x}",
        );
        for needle in [
            "InvalidField spec.record.analysis.model: \"nova lite\" is not a model id",
            "InvalidField spec.record.analysis.fields[0].name: \"Resolved\" must be snake_case",
            "InvalidField spec.record.analysis.fields[1].type: the field named \"resolved\" counts towards the resolution rate",
            "InvalidField spec.record.analysis.fields[2].description: must say",
            "InvalidField spec.record.analysis.fields[2].values: an enum field lists the values",
            "InvalidField spec.record.analysis.fields[3].values: only an enum field has values; this one is a number",
            "InvalidField spec.record.analysis.fields[4].values: \"a\" is listed twice",
            "DuplicateName spec.record.analysis.fields: two fields are named \"reason\"",
        ] {
            assert!(bad.iter().any(|p| p.starts_with(needle)), "{needle} in {bad:#?}");
        }
        assert!(analysed("fields: []").iter().any(|p| p.contains("has 0 fields; declare 1 to 16")));
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
