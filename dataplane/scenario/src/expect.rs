//! Matching a step's expectations against what its turn produced: each expectation that
//! does not hold becomes a [`Divergence`] saying what was expected and what happened.
//! Pure (no I/O); the runner stops a scenario at its first step with a divergence.
//!
//! Lists (`tools`, `handoffs`, `consent`) match in order, other entries allowed between
//! them (`[]` asks for none at all). Argument and memory values match partially: every key
//! given must be there with a matching value, objects recursively; lists element by element
//! with the same length; numbers by value (`5` matches `5.0`).

use std::fmt;

use serde_json::Value;
use switchboard_core::protocol::ServerMessage;

use super::file::{Expect, HandoffExpect, HandoffKind, Latency, Opening, ToolExpect, ToolOutcome, TranscriptExpect};
use super::observe::{SessionView, Turn, TurnEnd, bare};

/// An expectation could not be evaluated (the one error of this module): a regular
/// expression that does not compile, which the checks before running refuse first.
#[derive(Debug, thiserror::Error)]
#[error("the regular expression {pattern:?} does not compile: {source}")]
pub struct ExpectError {
    /// The pattern.
    pub pattern: String,
    /// Why.
    #[source]
    pub source: regex::Error,
}

/// An expectation that did not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// Which expectation, e.g. `tools[0]`, `handoffs`, `latency.turnMs`.
    pub expectation: String,
    /// What it asked for.
    pub expected: String,
    /// What happened instead.
    pub actual: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: expected {}; got {}", self.expectation, self.expected, self.actual)
    }
}

fn diverge(expectation: impl Into<String>, expected: impl Into<String>, actual: impl Into<String>) -> Divergence {
    Divergence { expectation: expectation.into(), expected: expected.into(), actual: actual.into() }
}

/// Whether `actual` matches `expected`: partially (see the module docs) or exactly.
pub fn json_matches(expected: &Value, actual: &Value, exact: bool) -> bool {
    match (expected, actual) {
        (Value::Number(e), Value::Number(a)) => e == a || e.as_f64().zip(a.as_f64()).is_some_and(|(e, a)| e == a),
        (Value::Object(e), Value::Object(a)) => {
            (!exact || e.len() == a.len()) && e.iter().all(|(k, v)| a.get(k).is_some_and(|a| json_matches(v, a, exact)))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| json_matches(e, a, exact))
        }
        (e, a) => e == a,
    }
}

/// A tool call of the turn: name, the model's input, and how it ended (if it did).
#[derive(Clone, Debug)]
struct Call<'a> {
    name: &'a str,
    input: &'a Value,
    outcome: Option<ToolOutcome>,
}

fn calls(turn: &Turn) -> Vec<Call<'_>> {
    let messages: Vec<&ServerMessage> = turn.messages().collect();
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::ToolStart { tool_use_id, name, input, .. } => {
                let outcome = messages.iter().find_map(|m| match m {
                    ServerMessage::ToolComplete { tool_use_id: id, .. } if id == tool_use_id => Some(ToolOutcome::Ok),
                    ServerMessage::ToolError { tool_use_id: id, .. } if id == tool_use_id => Some(ToolOutcome::Error),
                    _ => None,
                });
                Some(Call { name, input, outcome })
            }
            _ => None,
        })
        .collect()
}

fn show_calls(calls: &[Call<'_>]) -> String {
    if calls.is_empty() {
        return "no tool calls".to_owned();
    }
    let shown: Vec<String> = calls
        .iter()
        .map(|c| {
            let outcome = match c.outcome {
                Some(ToolOutcome::Ok) => " (ok)",
                Some(ToolOutcome::Error) => " (error)",
                None => "",
            };
            format!("{} {}{outcome}", c.name, c.input)
        })
        .collect();
    format!("tool calls: {}", shown.join(", "))
}

fn show_tool(tool: &ToolExpect) -> String {
    let mut out = format!("a call of {}", tool.name);
    if let Some(args) = &tool.args {
        out += &format!(" with arguments including {args}");
    }
    if let Some(args) = &tool.args_exact {
        out += &format!(" with arguments exactly {args}");
    }
    match tool.outcome {
        Some(ToolOutcome::Ok) => out += " that succeeds",
        Some(ToolOutcome::Error) => out += " that fails",
        None => {}
    }
    out
}

fn tool_matches(tool: &ToolExpect, call: &Call<'_>) -> bool {
    call.name == tool.name
        && tool.args.as_ref().is_none_or(|args| json_matches(args, call.input, false))
        && tool.args_exact.as_ref().is_none_or(|args| json_matches(args, call.input, true))
        && tool.outcome.is_none_or(|o| call.outcome == Some(o))
}

/// Every expectation of `expect` that does not hold after `turn`, with the session as
/// `view` shows it at the end of the turn.
pub fn check(expect: &Expect, turn: &Turn, view: &SessionView) -> Result<Vec<Divergence>, ExpectError> {
    let mut out = Vec::new();
    if let TurnEnd::TimedOut(after) = &turn.end {
        out.push(diverge("turn", "an answer", format!("the turn did not end within {} ms", after.as_millis())));
    }
    if let Some(agent) = &expect.agent {
        agent_is(&mut out, agent, view);
    }
    if let Some(tools) = &expect.tools {
        check_tools(&mut out, tools, &calls(turn));
    }
    if let Some(handoffs) = &expect.handoffs {
        check_handoffs(&mut out, handoffs, turn);
    }
    for (i, memory) in expect.memory.iter().enumerate() {
        let key = &memory.key;
        match (view.memory.get(key), &memory.value) {
            (Some(actual), _) if memory.absent => {
                out.push(diverge(format!("memory[{i}]"), format!("{key} not set"), format!("{key} = {actual}")))
            }
            (None, _) if memory.absent => {}
            (None, _) => out.push(diverge(format!("memory[{i}]"), format!("{key} set"), format!("{key} is not set"))),
            (Some(actual), Some(value)) if !json_matches(value, actual, false) => out.push(diverge(
                format!("memory[{i}]"),
                format!("{key} including {value}"),
                format!("{key} = {actual}"),
            )),
            _ => {}
        }
    }
    if let Some(transcript) = &expect.transcript {
        check_transcript(&mut out, "transcript", transcript, &turn.replies())?;
    }
    check_consent(&mut out, expect, turn);
    if let Some(node) = &expect.workflow {
        let actual = view
            .node
            .as_deref()
            .map_or("an unknown node (no workflow_transition seen)".to_owned(), |n| format!("node {n}"));
        if view.node.as_deref() != Some(node.as_str()) {
            out.push(diverge("workflow", format!("node {node}"), actual));
        }
    }
    if expect.no_error {
        let errors: Vec<String> = turn
            .messages()
            .filter_map(|m| match m {
                ServerMessage::BidiError { code, message, .. } => Some(format!("bidi_error {code}: {message}")),
                ServerMessage::ToolError { name, kind, message, .. } => {
                    Some(format!("tool_error {name} ({kind}): {message}"))
                }
                _ => None,
            })
            .collect();
        if !errors.is_empty() {
            out.push(diverge("noError", "no error", errors.join("; ")));
        }
    }
    if let Some(latency) = &expect.latency {
        check_latency(&mut out, latency, turn);
    }
    Ok(out)
}

/// The expectations of the opening, before the first turn.
pub fn check_opening(opening: &Opening, turn: &Turn, view: &SessionView) -> Result<Vec<Divergence>, ExpectError> {
    let mut out = Vec::new();
    if let Some(agent) = &opening.agent {
        agent_is(&mut out, agent, view);
    }
    if let Some(transcript) = &opening.transcript {
        check_transcript(&mut out, "transcript", transcript, &turn.replies())?;
    }
    Ok(out)
}

fn agent_is(out: &mut Vec<Divergence>, agent: &str, view: &SessionView) {
    if view.agent.as_deref() != Some(bare(agent)) {
        let actual = view.agent.clone().unwrap_or_else(|| "no agent (the session never started)".to_owned());
        out.push(diverge("agent", agent.to_owned(), actual));
    }
}

fn check_tools(out: &mut Vec<Divergence>, tools: &[ToolExpect], calls: &[Call<'_>]) {
    if tools.is_empty() && !calls.is_empty() {
        out.push(diverge("tools", "no tool calls", show_calls(calls)));
        return;
    }
    let mut from = 0;
    for (i, tool) in tools.iter().enumerate() {
        match calls[from..].iter().position(|c| tool_matches(tool, c)) {
            Some(at) => from += at + 1,
            None => {
                let order = if from > 0 { " (after the calls matched before it)" } else { "" };
                out.push(diverge(format!("tools[{i}]"), format!("{}{order}", show_tool(tool)), show_calls(calls)));
                return;
            }
        }
    }
}

fn check_handoffs(out: &mut Vec<Divergence>, handoffs: &[HandoffExpect], turn: &Turn) {
    let seen: Vec<(&str, &str, HandoffKind)> = turn
        .messages()
        .filter_map(|m| match m {
            ServerMessage::Handoff { from, to, kind, .. } => {
                let kind = match kind {
                    switchboard_core::HandoffKind::Transfer => HandoffKind::Transfer,
                    switchboard_core::HandoffKind::Return => HandoffKind::Return,
                };
                Some((bare(from), bare(to), kind))
            }
            _ => None,
        })
        .collect();
    let show = || {
        if seen.is_empty() {
            return "no handoff".to_owned();
        }
        let shown: Vec<String> =
            seen.iter().map(|(from, to, kind)| format!("{from} -> {to} ({})", kind_name(*kind))).collect();
        format!("handoffs: {}", shown.join(", "))
    };
    if handoffs.is_empty() && !seen.is_empty() {
        out.push(diverge("handoffs", "no handoff", show()));
        return;
    }
    let mut from = 0;
    for (i, expected) in handoffs.iter().enumerate() {
        let matches = |(f, t, k): &(&str, &str, HandoffKind)| {
            *t == bare(&expected.to)
                && expected.from.as_deref().is_none_or(|e| bare(e) == *f)
                && expected.kind.is_none_or(|e| e == *k)
        };
        match seen[from..].iter().position(matches) {
            Some(at) => from += at + 1,
            None => {
                let mut wanted = format!("a handoff to {}", expected.to);
                if let Some(f) = &expected.from {
                    wanted += &format!(" from {f}");
                }
                if let Some(k) = expected.kind {
                    wanted += &format!(" ({})", kind_name(k));
                }
                out.push(diverge(format!("handoffs[{i}]"), wanted, show()));
                return;
            }
        }
    }
}

fn kind_name(kind: HandoffKind) -> &'static str {
    match kind {
        HandoffKind::Transfer => "transfer",
        HandoffKind::Return => "return",
    }
}

fn check_transcript(
    out: &mut Vec<Divergence>,
    at: &str,
    expect: &TranscriptExpect,
    replies: &[&str],
) -> Result<(), ExpectError> {
    let text = replies.join("\n");
    let actual = || if replies.is_empty() { "the agent said nothing".to_owned() } else { format!("{text:?}") };
    for phrase in &expect.contains.0 {
        if !text.contains(phrase.as_str()) {
            out.push(diverge(format!("{at}.contains"), format!("text containing {phrase:?}"), actual()));
        }
    }
    for pattern in &expect.matches.0 {
        let regex = regex::Regex::new(pattern).map_err(|source| ExpectError { pattern: pattern.clone(), source })?;
        if !regex.is_match(&text) {
            out.push(diverge(format!("{at}.matches"), format!("text matching /{pattern}/"), actual()));
        }
    }
    for phrase in &expect.not_contains.0 {
        if text.contains(phrase.as_str()) {
            out.push(diverge(format!("{at}.notContains"), format!("no {phrase:?} in the text"), actual()));
        }
    }
    Ok(())
}

fn check_consent(out: &mut Vec<Divergence>, expect: &Expect, turn: &Turn) {
    for (i, wanted) in expect.consent.iter().enumerate() {
        match turn.consents.get(i) {
            Some(seen) if seen.tool == wanted.tool => {}
            Some(seen) => out.push(diverge(
                format!("consent[{i}]"),
                format!("a consent request for {}", wanted.tool),
                format!("a consent request for {} (denied)", seen.tool),
            )),
            None => out.push(diverge(
                format!("consent[{i}]"),
                format!("a consent request for {}", wanted.tool),
                format!("{} consent request(s)", turn.consents.len()),
            )),
        }
    }
    for seen in turn.consents.iter().skip(expect.consent.len()) {
        out.push(diverge(
            "consent",
            "no consent request beyond those listed",
            format!("a consent request for {} (the runner denied it)", seen.tool),
        ));
    }
}

fn check_latency(out: &mut Vec<Divergence>, latency: &Latency, turn: &Turn) {
    let budgets = [
        ("latency.firstTokenMs", "the first streamed text", latency.first_token_ms, turn.first_token()),
        ("latency.firstTextMs", "the first complete message", latency.first_text_ms, turn.first_text()),
        ("latency.turnMs", "the end of the turn", latency.turn_ms, turn.ended_at),
    ];
    for (key, what, budget, actual) in budgets {
        let Some(budget) = budget else { continue };
        match actual {
            Some(at) if at.as_millis() <= u128::from(budget) => {}
            Some(at) => out.push(diverge(
                key,
                format!("{what} within {budget} ms"),
                format!("{what} after {} ms", at.as_millis()),
            )),
            None => out.push(diverge(key, format!("{what} within {budget} ms"), format!("no {what}"))),
        }
    }
}

#[cfg(test)]
#[path = "expect_tests.rs"]
mod tests;
