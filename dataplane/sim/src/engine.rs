//! The rule engine: decides, from a script and the latest turn of a conversation, what
//! the simulated model answers. Pure: no I/O, no clock, no randomness.

use std::collections::BTreeSet;

use super::script::{Condition, Pattern, ReplySpec, ResultStatus, Rule, Script, ToolResultCondition};
use super::template::{Context, render, render_json};

/// What the engine looks at in a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Turn {
    /// The model id the request was sent to.
    pub model_id: String,
    /// The system prompt, blocks joined with newlines.
    pub system: String,
    /// The text of the most recent user message that had text (may be older than the
    /// last message when that one carries tool results).
    pub latest_user_text: String,
    /// What the model answers now.
    pub trigger: Trigger,
    /// Names of the tools offered in the request.
    pub offered_tools: BTreeSet<String>,
}

/// What the last user message holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Trigger {
    /// Text from the user.
    UserText(String),
    /// Results of the model's tool calls, in order.
    ToolResults(Vec<ToolResultView>),
    /// Neither (e.g. the conversation ends with an assistant message).
    #[default]
    Nothing,
}

/// A tool result with the name of the tool that produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultView {
    /// The tool's name, from the matching tool call.
    pub name: String,
    /// Success or error.
    pub status: ResultStatus,
    /// The result: the JSON block, or text (parsed as JSON when it is JSON).
    pub content: serde_json::Value,
}

/// The engine's answer.
#[derive(Clone, Debug)]
pub struct Decision<'s> {
    /// The rule that answered, with its index in the script; `None` for the default.
    pub rule: Option<(usize, &'s Rule)>,
    /// The reply.
    pub reply: Reply,
}

/// A reply to send: text, a tool call, or both (text first).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The text, if any.
    pub text: Option<String>,
    /// The tool call, if any.
    pub tool_use: Option<ToolCall>,
}

/// A tool call in a reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its input.
    pub input: serde_json::Value,
}

/// Picks the first rule that matches `turn` (or the default) and renders its reply.
pub fn decide<'s>(script: &'s Script, turn: &Turn) -> Decision<'s> {
    for (index, rule) in script.rules.iter().enumerate() {
        if let Some(reply) = try_rule(rule, turn) {
            return Decision { rule: Some((index, rule)), reply };
        }
    }
    let (spec, result) = match &turn.trigger {
        Trigger::ToolResults(results) => (&script.default_tool_result, results.first()),
        _ => (&script.default, None),
    };
    let context = context_for(turn, Vec::new(), result);
    let text = spec.text.as_deref().map(|t| render(t, &context));
    Decision { rule: None, reply: Reply { text, tool_use: None } }
}

fn try_rule(rule: &Rule, turn: &Turn) -> Option<Reply> {
    let Condition { user_text, tool_result, system, model, tools } = &rule.when;
    if model.as_ref().is_some_and(|p| !p.0.is_match(&turn.model_id))
        || !tools.iter().all(|t| turn.offered_tools.contains(t))
    {
        return None;
    }
    let mut captures = Vec::new();
    if let Some(pattern) = system {
        captures.extend(capture_groups(pattern, &turn.system)?);
    }
    if let Some(pattern) = user_text {
        let Trigger::UserText(text) = &turn.trigger else {
            return None;
        };
        captures.extend(capture_groups(pattern, text)?);
    }
    let result = match (tool_result, &turn.trigger) {
        (Some(condition), Trigger::ToolResults(results)) => {
            Some(results.iter().find(|r| result_matches(condition, r))?)
        }
        (Some(_), _) => return None,
        (None, Trigger::ToolResults(results)) => results.first(),
        (None, _) => None,
    };
    let context = context_for(turn, captures, result);
    render_reply(&rule.reply, &context, &turn.offered_tools)
}

/// The capture groups of `pattern` in `text` by number and name; `None` if no match.
fn capture_groups(pattern: &Pattern, text: &str) -> Option<Vec<(String, String)>> {
    let found = pattern.0.captures(text)?;
    let mut captures = Vec::new();
    for (i, name) in pattern.0.capture_names().enumerate() {
        if let Some(m) = found.get(i) {
            captures.push((i.to_string(), m.as_str().to_owned()));
            if let Some(name) = name {
                captures.push((name.to_owned(), m.as_str().to_owned()));
            }
        }
    }
    Some(captures)
}

fn result_matches(condition: &ToolResultCondition, result: &ToolResultView) -> bool {
    let ToolResultCondition { name, status, fields, matches } = condition;
    name.as_ref().is_none_or(|n| *n == result.name)
        && status.is_none_or(|s| s == result.status)
        && fields.iter().all(|(key, expected)| {
            let found = if key.starts_with('/') { result.content.pointer(key) } else { result.content.get(key) };
            found == Some(expected)
        })
        && matches.as_ref().is_none_or(|p| p.0.is_match(&result.content.to_string()))
}

fn context_for<'a>(turn: &Turn, captures: Vec<(String, String)>, result: Option<&'a ToolResultView>) -> Context<'a> {
    let mut context = Context { result: result.map(|r| &r.content), ..Context::default() };
    context.captures.extend(captures);
    context.builtins.insert("text", turn.latest_user_text.clone());
    context.builtins.insert("model", turn.model_id.clone());
    if let Some(result) = result {
        context.builtins.insert("tool", result.name.clone());
        context.builtins.insert("result", result.content.to_string());
    }
    context
}

fn render_reply(spec: &ReplySpec, context: &Context<'_>, offered: &BTreeSet<String>) -> Option<Reply> {
    let text = spec.text.as_deref().map(|t| render(t, context));
    let Some(tool) = &spec.tool_use else {
        return Some(Reply { text, tool_use: None });
    };
    let name = render(&tool.name, context);
    if offered.contains(&name) {
        let input = render_json(&tool.input, context);
        return Some(Reply { text, tool_use: Some(ToolCall { name, input }) });
    }
    let fallback = spec.fallback_text.as_deref()?;
    Some(Reply { text: Some(render(fallback, context)), tool_use: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn script() -> Script {
        Script::parse(
            r#"
rules:
  - name: idv
    when: { userText: "(?i)my name is (?P<name>[a-z ]+?), account (?P<account>\\d{8})" }
    reply:
      text: "Let me check."
      toolUse: { name: perform_idv_check, input: { name: "{name}", accountNumber: "{account}" } }
      fallbackText: "I cannot verify you here."
  - name: handoff
    when: { userText: "(?i)transfer me to (?P<agent>[a-z]+)" }
    reply: { toolUse: { name: "transfer_to_{agent}", input: { reason: "{0}" } } }
  - name: verified
    when: { toolResult: { name: perform_idv_check, fields: { verified: true } } }
    reply: { text: "Thanks {/customer/first}, you are verified." }
  - name: failed
    when: { toolResult: { name: perform_idv_check, status: error } }
    reply: { text: "That did not work: {result}" }
  - name: triage-only
    when: { system: "triage", userText: "hello" }
    reply: { text: "Triage here." }
"#,
        )
        .expect("script parses")
    }

    fn user(text: &str, tools: &[&str]) -> Turn {
        Turn {
            model_id: "m".into(),
            latest_user_text: text.into(),
            trigger: Trigger::UserText(text.into()),
            offered_tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            ..Turn::default()
        }
    }

    fn result(name: &str, status: ResultStatus, content: serde_json::Value) -> Turn {
        Turn {
            trigger: Trigger::ToolResults(vec![ToolResultView { name: name.into(), status, content }]),
            ..user("earlier", &[])
        }
    }

    #[test]
    fn user_text_rule_calls_an_offered_tool_with_captures() {
        let script = script();
        let decision = decide(&script, &user("My name is Ada Lovelace, account 12345678", &["perform_idv_check"]));
        assert_eq!(decision.rule.map(|(i, r)| (i, r.name.as_str())), Some((0, "idv")));
        assert_eq!(decision.reply.text.as_deref(), Some("Let me check."));
        let call = decision.reply.tool_use.expect("a tool call");
        assert_eq!(call.name, "perform_idv_check");
        assert_eq!(call.input, json!({"name": "Ada Lovelace", "accountNumber": "12345678"}));
    }

    #[test]
    fn a_tool_that_is_not_offered_falls_back_to_text_or_skips_the_rule() {
        let script = script();
        let decision = decide(&script, &user("my name is Ada, account 12345678", &[]));
        assert_eq!(decision.reply, Reply { text: Some("I cannot verify you here.".into()), tool_use: None });
        // No fallback text: the rule is skipped and the default answers.
        let decision = decide(&script, &user("please transfer me to disputes", &["transfer_to_billing"]));
        assert!(decision.rule.is_none());
        assert_eq!(decision.reply.text.as_deref(), Some("You said: please transfer me to disputes"));
        let decision = decide(&script, &user("please transfer me to disputes", &["transfer_to_disputes"]));
        let call = decision.reply.tool_use.expect("a handoff");
        assert_eq!(
            (call.name.as_str(), call.input),
            ("transfer_to_disputes", json!({"reason": "transfer me to disputes"}))
        );
    }

    #[test]
    fn tool_result_rules_match_name_status_and_fields() {
        let script = script();
        let ok = json!({"verified": true, "customer": {"first": "Ada"}});
        let decision = decide(&script, &result("perform_idv_check", ResultStatus::Success, ok));
        assert_eq!(decision.reply.text.as_deref(), Some("Thanks Ada, you are verified."));
        let failed = json!({"error": "timeout"});
        let decision = decide(&script, &result("perform_idv_check", ResultStatus::Error, failed));
        assert_eq!(decision.reply.text.as_deref(), Some(r#"That did not work: {"error":"timeout"}"#));
        let other = decide(&script, &result("check_balance", ResultStatus::Success, json!({"balance": 5})));
        assert!(other.rule.is_none());
        assert_eq!(other.reply.text.as_deref(), Some(r#"check_balance returned: {"balance":5}"#));
    }

    #[test]
    fn system_condition_tells_agents_apart() {
        let script = script();
        let mut turn = user("hello", &[]);
        assert!(decide(&script, &turn).rule.is_none());
        turn.system = "You are the triage agent".into();
        assert_eq!(decide(&script, &turn).reply.text.as_deref(), Some("Triage here."));
    }

    #[test]
    fn invalid_scripts_are_refused_with_a_reason() {
        for (text, needle) in [
            ("rules: [{name: a, reply: {}}]", "neither text nor toolUse"),
            ("rules: [{name: a, reply: {text: x}}, {name: a, reply: {text: y}}]", "used twice"),
            ("rules: [{name: a, when: {userText: '('}, reply: {text: x}}]", "regex"),
            ("timing: {tokensPerDelta: 0}", "tokensPerDelta"),
            ("rulez: []", "unknown field"),
        ] {
            let error = Script::parse(text).expect_err(text).to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }
}
