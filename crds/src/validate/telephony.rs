//! Checks of `spec.telephony`: each number E.164 and claimed once, at most
//! [`MAX_NUMBERS`], and only by an Agent that can take a call (voice or hybrid). Whether
//! another Agent claimed a number first is the operator's check: it sees every Agent.

use super::{Problem, Reason, duplicates};
use crate::agent::{AgentSpec, MAX_NUMBERS, is_e164};

/// Problems with the Agent's phone numbers.
pub(crate) fn check_telephony(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let numbers = &spec.telephony.numbers;
    if numbers.is_empty() {
        return;
    }
    if numbers.len() > MAX_NUMBERS {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.numbers",
            format!("{} numbers; one Agent claims at most {MAX_NUMBERS}", numbers.len()),
        ));
    }
    for (i, number) in numbers.iter().enumerate() {
        if !is_e164(number) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.telephony.numbers[{i}]"),
                format!(
                    "{number:?} is not an E.164 number: write '+', the country code and the national number, digits \
                     only, at most 15 (e.g. +442079460000)"
                ),
            ));
        }
    }
    for dup in duplicates(numbers.iter().map(String::as_str)) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.telephony.numbers",
            format!("{dup} is listed more than once; list each number once"),
        ));
    }
    if !spec.mode.has_audio() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.numbers",
            "a text-only Agent cannot take phone calls: set mode voice or hybrid, or remove its numbers",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(mode: &str, numbers: &[&str]) -> Vec<String> {
        let mut spec: AgentSpec =
            serde_yaml::from_str(&format!("mode: {mode}\npersonaRef: {{name: p}}\nworkflowRef: {{name: w}}\n"))
                .expect("spec");
        spec.telephony.numbers = numbers.iter().map(|n| (*n).to_owned()).collect();
        let mut out = Vec::new();
        check_telephony(&spec, &mut out);
        out.into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn numbers_are_e164_listed_once_and_only_on_agents_that_hear() {
        assert!(problems("voice", &["+442079460000", "+15551234567"]).is_empty());
        assert!(problems("text", &[]).is_empty(), "no numbers, nothing to check");
        let bad = problems("voice", &["02079460000"]);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("spec.telephony.numbers[0]") && bad[0].contains("E.164"), "{bad:?}");
        let dup = problems("hybrid", &["+442079460000", "+442079460000"]);
        assert_eq!(dup.len(), 1);
        assert!(dup[0].starts_with("DuplicateName") && dup[0].contains("more than once"), "{dup:?}");
        let text = problems("text", &["+442079460000"]);
        assert!(text[0].contains("text-only Agent cannot take phone calls"), "{text:?}");
        let many: Vec<String> = (0..65).map(|i| format!("+4420794600{i:02}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(problems("voice", &many)[0].contains("at most 64"));
    }
}
