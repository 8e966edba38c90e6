//! Checks of `spec.telephony`: each number E.164 and claimed once, at most
//! [`MAX_NUMBERS`], and only by an Agent that can take a call (voice or hybrid). Whether
//! another Agent claimed a number first is the operator's check: it sees every Agent.
//! The people a caller may be put through to: named once each, reachable at an E.164
//! number or a SIP URI, at most [`MAX_PEOPLE`], with no tool of the Agent's own under the
//! built-in tool's name. Answering-machine detection: each threshold in its range, the
//! longest greeting shorter than the decision timeout, and only on an Agent with audio.
//! Sending digits: only on an Agent with audio, with no tool of its own under the built-in
//! tool's name.

use super::{Problem, Reason, duplicates};
use crate::agent::{
    AgentSpec, MAX_NUMBERS, MAX_PEOPLE, SEND_DIGITS_TOOL, TRANSFER_TO_PERSON_TOOL, is_e164, is_person_address,
};

/// Problems with the Agent's phone numbers and people.
pub(crate) fn check_telephony(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    check_people(spec, problems);
    check_send_digits(spec, problems);
    check_answering_machine(spec, problems);
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

/// Problems with `spec.telephony.people` and `transferTimeoutSeconds`.
fn check_people(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let telephony = &spec.telephony;
    if let Some(seconds) = telephony.transfer_timeout_seconds
        && !(5..=300).contains(&seconds)
    {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.transferTimeoutSeconds",
            format!("{seconds} s; a transfer rings between 5 and 300 s before it counts as unanswered"),
        ));
    }
    let people = &telephony.people;
    if people.is_empty() {
        return;
    }
    if people.len() > MAX_PEOPLE {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.people",
            format!("{} people; one Agent lists at most {MAX_PEOPLE}", people.len()),
        ));
    }
    for (i, person) in people.iter().enumerate() {
        let name_ok = (1..=63).contains(&person.name.len())
            && person.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && !person.name.starts_with(['-', '_']);
        if !name_ok {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.telephony.people[{i}].name"),
                format!(
                    "{:?} is not a person's name here: lowercase letters, digits, '-' and '_', at most 63, starting \
                     with a letter or digit (the model asks for it by this name)",
                    person.name
                ),
            ));
        }
        if !is_person_address(&person.address) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.telephony.people[{i}].address"),
                format!(
                    "{:?} is not where a person can be reached: write an E.164 number (+442079460001) or a SIP URI \
                     with a user (sip:advisor@pbx.example.com), without spaces, angle brackets or quotes",
                    person.address
                ),
            ));
        }
        if person.description.chars().count() > 500 {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.telephony.people[{i}].description"),
                "longer than 500 characters; say in a sentence when to put a caller through",
            ));
        }
    }
    for dup in duplicates(people.iter().map(|p| p.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.telephony.people",
            format!("{dup} is listed more than once; name each person once"),
        ));
    }
    if let Some(i) = spec.tools.iter().position(|t| t.name == TRANSFER_TO_PERSON_TOOL) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            format!("spec.tools[{i}].name"),
            format!("{TRANSFER_TO_PERSON_TOOL:?} is the built-in tool that puts a caller through to spec.telephony.people; rename this tool"),
        ));
    }
    if !spec.mode.has_audio() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.people",
            "a text-only Agent takes no phone calls, so it cannot put a caller through: set mode voice or hybrid, or \
             remove its people",
        ));
    }
}

/// Problems with `spec.telephony.sendDigits`.
fn check_send_digits(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    if !spec.telephony.send_digits {
        return;
    }
    if let Some(i) = spec.tools.iter().position(|t| t.name == SEND_DIGITS_TOOL) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            format!("spec.tools[{i}].name"),
            format!(
                "{SEND_DIGITS_TOOL:?} is the built-in tool that presses keys on a call (spec.telephony.sendDigits); \
                 rename this tool"
            ),
        ));
    }
    if !spec.mode.has_audio() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.sendDigits",
            "a text-only Agent takes no phone calls, so it has no keys to press: set mode voice or hybrid, or remove \
             sendDigits",
        ));
    }
}

/// Problems with `spec.telephony.answeringMachine`.
fn check_answering_machine(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    use crate::agent::{
        BEEP_TIMEOUT_SECONDS, DECISION_TIMEOUT_MILLIS, GREETING_MAX_MILLIS, SILENCE_AFTER_GREETING_MILLIS,
    };
    let Some(amd) = &spec.telephony.answering_machine else { return };
    let field = |name: &str| format!("spec.telephony.answeringMachine.{name}");
    let ranges = [
        (
            "greetingMaxMillis",
            amd.greeting_max_millis,
            GREETING_MAX_MILLIS,
            "ms of speech that make a machine's greeting",
        ),
        (
            "silenceAfterGreetingMillis",
            amd.silence_after_greeting_millis,
            SILENCE_AFTER_GREETING_MILLIS,
            "ms of silence that end a person's greeting",
        ),
        ("decisionTimeoutMillis", amd.decision_timeout_millis, DECISION_TIMEOUT_MILLIS, "ms to decide in"),
        ("beepTimeoutSeconds", amd.beep_timeout_seconds, BEEP_TIMEOUT_SECONDS, "s to wait for the beep"),
    ];
    for (name, value, range, what) in ranges {
        if let Some(value) = value
            && !range.contains(&value)
        {
            problems.push(Problem::new(
                Reason::InvalidField,
                field(name),
                format!("{value}: the {what} is between {} and {}", range.start(), range.end()),
            ));
        }
    }
    let greeting = amd.greeting_max_millis.unwrap_or(2500);
    let timeout = amd.decision_timeout_millis.unwrap_or(5000);
    if greeting >= timeout {
        problems.push(Problem::new(
            Reason::InvalidField,
            field("decisionTimeoutMillis"),
            format!(
                "{timeout} ms is not longer than the longest greeting ({greeting} ms): no call could ever be found a \
                 machine; raise decisionTimeoutMillis or lower greetingMaxMillis"
            ),
        ));
    }
    if let Some(message) = &amd.message {
        let chars = message.chars().count();
        let why = if message.trim().is_empty() {
            Some(
                "is empty: write what the agent says on the machine, or leave message out to leave the Persona's \
                  greeting"
                    .to_owned(),
            )
        } else if chars > crate::agent::MESSAGE_MAX_CHARS {
            Some(format!(
                "is {chars} characters long: a voicemail message is at most {} (about a minute spoken)",
                crate::agent::MESSAGE_MAX_CHARS
            ))
        } else if amd.on_machine == crate::agent::OnMachine::HangUp {
            Some(
                "is left only with onMachine: leaveMessage (this Agent hangs up on machines): remove message, or \
                  set onMachine: leaveMessage"
                    .to_owned(),
            )
        } else {
            None
        };
        if let Some(why) = why {
            problems.push(Problem::new(Reason::InvalidField, field("message"), format!("the message {why}")));
        }
    }
    if !spec.mode.has_audio() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.telephony.answeringMachine",
            "a text-only Agent places no phone calls, so it detects no answering machines: set mode voice or hybrid, \
             or remove answeringMachine",
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

    fn people_problems(mode: &str, people: &str) -> Vec<String> {
        let spec: AgentSpec = serde_yaml::from_str(&format!(
            "mode: {mode}\npersonaRef: {{name: p}}\nworkflowRef: {{name: w}}\ntelephony: {{ people: {people} }}\n"
        ))
        .expect("spec");
        let mut out = Vec::new();
        check_telephony(&spec, &mut out);
        out.into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn people_are_named_once_and_reachable_at_a_number_or_a_sip_uri() {
        let good = "[{name: advisor, address: '+442079460001'}, {name: fraud-team, address: 'sip:fraud@pbx.example.com', description: Fraud}]";
        assert!(people_problems("voice", good).is_empty(), "{:?}", people_problems("voice", good));
        let bad = people_problems("voice", "[{name: Advisor, address: '02079460001'}]");
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad[0].contains("people[0].name") && bad[0].contains("lowercase"), "{bad:?}");
        assert!(bad[1].contains("people[0].address") && bad[1].contains("E.164"), "{bad:?}");
        let dup = people_problems("voice", "[{name: a, address: '+442079460001'}, {name: a, address: 'sip:a@b'}]");
        assert!(dup.len() == 1 && dup[0].contains("more than once"), "{dup:?}");
        let text = people_problems("text", "[{name: a, address: '+442079460001'}]");
        assert!(text.len() == 1 && text[0].contains("text-only"), "{text:?}");
        let mut spec: AgentSpec = serde_yaml::from_str(
            "mode: voice\npersonaRef: {name: p}\nworkflowRef: {name: w}\ntelephony: {transferTimeoutSeconds: 2}\n",
        )
        .expect("spec");
        let mut out = Vec::new();
        check_telephony(&spec, &mut out);
        assert!(out[0].to_string().contains("between 5 and 300"), "{out:?}");
        spec.telephony.transfer_timeout_seconds = Some(20);
        spec.telephony.people = vec![crate::agent::Person {
            name: "a".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        }];
        spec.tools = vec![
            serde_yaml::from_str("{name: transfer_to_person, description: d, builtin: {kind: currentTime}}")
                .expect("tool"),
        ];
        let mut out = Vec::new();
        check_telephony(&spec, &mut out);
        assert!(out.len() == 1 && out[0].to_string().contains("built-in tool"), "{out:?}");
    }

    #[test]
    fn sending_digits_needs_audio_and_its_tool_name_free() {
        let problems = |mode: &str, tools: &str| {
            let spec: AgentSpec = serde_yaml::from_str(&format!(
                "mode: {mode}\npersonaRef: {{name: p}}\nworkflowRef: {{name: w}}\ntelephony: {{sendDigits: true}}\n{tools}"
            ))
            .expect("spec");
            assert!(spec.telephony.send_digits && !spec.telephony.is_empty());
            let mut out = Vec::new();
            check_telephony(&spec, &mut out);
            out.into_iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        assert!(problems("voice", "").is_empty(), "{:?}", problems("voice", ""));
        assert!(problems("hybrid", "").is_empty());
        let text = problems("text", "");
        assert!(text.len() == 1 && text[0].contains("sendDigits") && text[0].contains("text-only"), "{text:?}");
        let taken = problems("voice", "tools: [{name: send_digits, description: d, builtin: {kind: currentTime}}]");
        assert!(
            taken.len() == 1 && taken[0].contains("spec.tools[0].name") && taken[0].contains("rename"),
            "{taken:?}"
        );
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

    fn amd_problems(mode: &str, amd: &str) -> Vec<String> {
        let spec: AgentSpec = serde_yaml::from_str(&format!(
            "mode: {mode}\npersonaRef: {{name: p}}\nworkflowRef: {{name: w}}\ntelephony: {{ answeringMachine: {amd} }}\n"
        ))
        .expect("spec");
        let mut out = Vec::new();
        check_telephony(&spec, &mut out);
        out.into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn answering_machine_settings_are_in_range_and_only_on_agents_that_call() {
        assert!(amd_problems("voice", "{}").is_empty());
        assert!(
            amd_problems("voice", "{onMachine: hangUp, greetingMaxMillis: 3000, beepTimeoutSeconds: 10}").is_empty()
        );
        let bad = amd_problems("voice", "{silenceAfterGreetingMillis: 50, beepTimeoutSeconds: 600}");
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad[0].contains("silenceAfterGreetingMillis") && bad[0].contains("between 300 and 3000"), "{bad:?}");
        assert!(bad[1].contains("beepTimeoutSeconds") && bad[1].contains("between 1 and 120"), "{bad:?}");
        let never = amd_problems("voice", "{greetingMaxMillis: 6000}");
        assert!(never.len() == 1 && never[0].contains("could ever be found a machine"), "{never:?}");
        let text = amd_problems("text", "{onMachine: leaveMessage}");
        assert!(text.len() == 1 && text[0].contains("text-only"), "{text:?}");
        let unknown: Result<AgentSpec, _> = serde_yaml::from_str(
            "mode: voice\npersonaRef: {name: p}\nworkflowRef: {name: w}\ntelephony: {answeringMachine: {onMachine: hold}}\n",
        );
        assert!(unknown.is_err(), "an unknown action is refused when read");
    }

    #[test]
    fn a_voicemail_message_is_some_words_left_only_by_an_agent_that_leaves_messages() {
        assert!(amd_problems("voice", "{message: \"Please call Example Bank back.\"}").is_empty());
        let empty = amd_problems("voice", "{message: \"  \"}");
        assert!(
            empty.len() == 1 && empty[0].contains("answeringMachine.message") && empty[0].contains("empty"),
            "{empty:?}"
        );
        let long = amd_problems("voice", &format!("{{message: \"{}\"}}", "a".repeat(1001)));
        assert!(long.len() == 1 && long[0].contains("1001 characters") && long[0].contains("at most 1000"), "{long:?}");
        let hang_up = amd_problems("voice", "{onMachine: hangUp, message: \"Call us back.\"}");
        assert!(hang_up.len() == 1 && hang_up[0].contains("only with onMachine: leaveMessage"), "{hang_up:?}");
    }
}
