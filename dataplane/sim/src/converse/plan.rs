//! Plans a reply as a timed sequence of ConverseStream events: which event is sent when
//! (relative to the response headers), where the stream is cut, and the usage it
//! reports. Pure, so pacing, truncation and cuts are unit-tested without a server; the
//! same plan gives the non-streaming Converse answer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::engine::Reply;
use crate::script::{CutFault, CutMode, Timing};
use crate::service_error::StreamExceptionKind;
use crate::tokens::split_tokens;

/// A planned reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The stream's frames, in order, each with its send time.
    pub frames: Vec<Planned>,
    /// The reply's content blocks as Converse JSON (after `maxTokens` truncation).
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use` or `max_tokens`.
    pub stop_reason: &'static str,
    /// Output tokens reported in usage.
    pub output_tokens: u64,
    /// Time from the headers to the last token.
    pub duration: Duration,
}

/// One frame and when to send it.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// Send time, relative to the response headers.
    pub at: Duration,
    /// What to do.
    pub action: Action,
}

/// What a planned frame does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send an event (`:event-type` and JSON payload).
    Event {
        /// The event type, e.g. `contentBlockDelta`.
        event_type: &'static str,
        /// Its JSON payload.
        payload: Value,
    },
    /// Send an exception frame; the stream ends after it.
    Exception(StreamExceptionKind, String),
    /// Close the connection abruptly.
    Drop,
}

/// What the plan needs beyond the reply.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    /// The reply to send.
    pub reply: &'a Reply,
    /// The id of the reply's tool call, if it has one.
    pub tool_use_id: String,
    /// Estimated input tokens, for usage.
    pub input_tokens: u64,
    /// The request's `maxTokens`.
    pub max_tokens: Option<u32>,
    /// Pacing.
    pub timing: &'a Timing,
    /// A cut to apply, if any.
    pub cut: Option<&'a CutFault>,
    /// Latency added before the headers (reported in `latencyMs`).
    pub extra_latency: Duration,
}

struct Builder {
    frames: Vec<Planned>,
    ttft: Duration,
    per_token: Duration,
    tokens_sent: u64,
    cut_at: Option<u64>,
    cut: bool,
}

impl Builder {
    fn time_of(&self, token: u64) -> Duration {
        self.ttft + self.per_token.saturating_mul(u32::try_from(token).unwrap_or(u32::MAX))
    }

    fn event(&mut self, at: Duration, event_type: &'static str, payload: Value) {
        if !self.cut {
            self.frames.push(Planned { at, action: Action::Event { event_type, payload } });
        }
    }

    /// Sends `tokens` as deltas of `group` tokens each, cutting when the cut point is
    /// reached. `make` builds a delta payload from a piece of text.
    fn deltas(&mut self, tokens: &[&str], group: usize, make: impl Fn(String) -> Value) {
        let mut rest = tokens;
        while !rest.is_empty() && !self.cut {
            let mut take = group.min(rest.len());
            if let Some(cut_at) = self.cut_at {
                let left = cut_at.saturating_sub(self.tokens_sent);
                take = take.min(usize::try_from(left).unwrap_or(usize::MAX));
                if take == 0 {
                    self.cut = true;
                    break;
                }
            }
            let (piece, tail) = rest.split_at(take);
            self.tokens_sent += take as u64;
            let at = self.time_of(self.tokens_sent - 1);
            self.frames.push(Planned {
                at,
                action: Action::Event { event_type: "contentBlockDelta", payload: make(piece.concat()) },
            });
            rest = tail;
        }
        if self.cut_at.is_some_and(|c| self.tokens_sent >= c) && !rest.is_empty() {
            self.cut = true;
        }
    }
}

/// Plans the stream of `input.reply`.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let timing = input.timing;
    let per_token = if timing.tokens_per_second > 0.0 {
        Duration::from_secs_f64(1.0 / timing.tokens_per_second)
    } else {
        Duration::ZERO
    };
    let mut b = Builder {
        frames: Vec::new(),
        ttft: Duration::from_millis(timing.time_to_first_token_ms),
        per_token,
        tokens_sent: 0,
        cut_at: input.cut.map(|c| u64::from(c.after_tokens)),
        cut: false,
    };
    let limit = input.max_tokens.map_or(u64::MAX, u64::from);
    let text = input.reply.text.as_deref().unwrap_or_default();
    let mut text_tokens = split_tokens(text);
    let tool_input = input.reply.tool_use.as_ref().map(|t| t.input.to_string()).unwrap_or_default();
    let tool_tokens = split_tokens(&tool_input);
    let mut stop_reason = if input.reply.tool_use.is_some() { "tool_use" } else { "end_turn" };
    let mut with_tool = input.reply.tool_use.is_some();
    if text_tokens.len() as u64 > limit {
        text_tokens.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        (stop_reason, with_tool) = ("max_tokens", false);
    } else if with_tool && (text_tokens.len() + tool_tokens.len() + 1) as u64 > limit {
        (stop_reason, with_tool) = ("max_tokens", false);
    }

    b.event(Duration::ZERO, "messageStart", json!({ "role": "assistant" }));
    let mut content = Vec::new();
    let mut index = 0;
    if !text_tokens.is_empty() {
        let group = usize::try_from(timing.tokens_per_delta).unwrap_or(1).max(1);
        b.deltas(&text_tokens, group, |t| json!({ "contentBlockIndex": 0, "delta": { "text": t } }));
        let at = b.time_of(b.tokens_sent.saturating_sub(1));
        b.event(at, "contentBlockStop", json!({ "contentBlockIndex": 0 }));
        content.push(json!({ "text": text_tokens.concat() }));
        index = 1;
    }
    if let (true, Some(tool)) = (with_tool, &input.reply.tool_use) {
        if b.cut_at.is_some_and(|c| b.tokens_sent >= c) {
            b.cut = true;
        }
        if !b.cut {
            plan_tool(&mut b, index, &input.tool_use_id, &tool.name, &tool_tokens, timing);
        }
        content.push(json!({ "toolUse": { "toolUseId": input.tool_use_id, "name": tool.name, "input": tool.input } }));
    }
    let output_tokens = text_tokens.len() as u64 + if with_tool { tool_tokens.len() as u64 + 1 } else { 0 };
    let duration = b.time_of(output_tokens.saturating_sub(1));
    if let Some(cut) = input.cut.filter(|c| b.cut || u64::from(c.after_tokens) >= output_tokens) {
        let at = b.time_of(b.tokens_sent.saturating_sub(1));
        let action = match cut.mode {
            CutMode::Exception => Action::Exception(
                cut.exception,
                format!("The model stream was interrupted after {} output tokens.", b.tokens_sent),
            ),
            CutMode::Drop => Action::Drop,
        };
        b.cut = false;
        b.frames.push(Planned { at, action });
        return Plan { frames: b.frames, content, stop_reason, output_tokens, duration };
    }
    b.event(duration, "messageStop", json!({ "stopReason": stop_reason }));
    let latency = input.extra_latency + duration;
    let usage = json!({
        "inputTokens": input.input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input.input_tokens + output_tokens,
    });
    let metrics = json!({ "latencyMs": u64::try_from(latency.as_millis()).unwrap_or(u64::MAX) });
    b.event(duration, "metadata", json!({ "usage": usage, "metrics": metrics }));
    Plan { frames: b.frames, content, stop_reason, output_tokens, duration }
}

fn plan_tool(b: &mut Builder, index: usize, id: &str, name: &str, tokens: &[&str], timing: &Timing) {
    let at = b.time_of(b.tokens_sent);
    b.tokens_sent += 1;
    let start = json!({ "toolUse": { "toolUseId": id, "name": name } });
    b.event(at, "contentBlockStart", json!({ "contentBlockIndex": index, "start": start }));
    let group = usize::try_from(timing.tokens_per_delta).unwrap_or(1).max(1) * 4;
    b.deltas(tokens, group, |t| json!({ "contentBlockIndex": index, "delta": { "toolUse": { "input": t } } }));
    let at = b.time_of(b.tokens_sent.saturating_sub(1));
    b.event(at, "contentBlockStop", json!({ "contentBlockIndex": index }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ToolCall;

    fn timing(ttft: u64, tps: f64, per_delta: u32) -> Timing {
        Timing { time_to_first_token_ms: ttft, tokens_per_second: tps, tokens_per_delta: per_delta }
    }

    fn input<'a>(reply: &'a Reply, timing: &'a Timing, cut: Option<&'a CutFault>) -> PlanInput<'a> {
        PlanInput {
            reply,
            tool_use_id: "tooluse_1".into(),
            input_tokens: 7,
            max_tokens: None,
            timing,
            cut,
            extra_latency: Duration::from_millis(5),
        }
    }

    fn event_types(plan: &Plan) -> Vec<&str> {
        plan.frames
            .iter()
            .map(|f| match &f.action {
                Action::Event { event_type, .. } => *event_type,
                Action::Exception(..) => "exception",
                Action::Drop => "drop",
            })
            .collect()
    }

    #[test]
    fn text_is_paced_from_the_first_token() {
        let reply = Reply { text: Some("one two three four".into()), tool_use: None };
        let timing = timing(100, 10.0, 2);
        let plan = plan(&input(&reply, &timing, None));
        assert_eq!(
            event_types(&plan),
            ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]
        );
        let times: Vec<u128> = plan.frames.iter().map(|f| f.at.as_millis()).collect();
        // Tokens at 100, 200, 300, 400 ms; deltas of two tokens go with their second one.
        assert_eq!(times, [0, 200, 400, 400, 400, 400]);
        assert_eq!(plan.output_tokens, 4);
        let Action::Event { payload, .. } = &plan.frames[5].action else { panic!("metadata") };
        assert_eq!(payload["usage"], json!({"inputTokens": 7, "outputTokens": 4, "totalTokens": 11}));
        assert_eq!(payload["metrics"]["latencyMs"], json!(405));
    }

    #[test]
    fn tool_calls_follow_text_and_stream_their_input() {
        let reply = Reply {
            text: Some("Checking.".into()),
            tool_use: Some(ToolCall { name: "check_balance".into(), input: json!({"accountNumber": "12345678"}) }),
        };
        let timing = Timing::instant();
        let plan = plan(&input(&reply, &timing, None));
        assert_eq!(plan.stop_reason, "tool_use");
        let Some(Action::Event { payload, .. }) = plan
            .frames
            .iter()
            .map(|f| &f.action)
            .find(|a| matches!(a, Action::Event { event_type: "contentBlockStart", .. }))
        else {
            panic!("a tool block starts")
        };
        assert_eq!(payload["contentBlockIndex"], json!(1));
        assert_eq!(payload["start"]["toolUse"]["name"], json!("check_balance"));
        let input_json: String = plan
            .frames
            .iter()
            .filter_map(|f| match &f.action {
                Action::Event { payload, .. } => payload["delta"]["toolUse"]["input"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&input_json).ok(), Some(json!({"accountNumber": "12345678"})));
        assert_eq!(plan.content.len(), 2);
    }

    #[test]
    fn cuts_stop_after_the_given_tokens() {
        let reply = Reply { text: Some("a b c d e".into()), tool_use: None };
        let timing = Timing::instant();
        for (mode, last) in [(CutMode::Exception, "exception"), (CutMode::Drop, "drop")] {
            let cut = CutFault { after_tokens: 2, mode, exception: StreamExceptionKind::ModelStreamError, first: None };
            let plan = plan(&input(&reply, &timing, Some(&cut)));
            assert_eq!(event_types(&plan), ["messageStart", "contentBlockDelta", "contentBlockDelta", last]);
        }
        // A cut beyond the reply replaces the end of the message.
        let cut = CutFault {
            after_tokens: 50,
            mode: CutMode::Exception,
            exception: StreamExceptionKind::Throttling,
            first: None,
        };
        let plan = plan(&input(&reply, &timing, Some(&cut)));
        assert_eq!(event_types(&plan).last(), Some(&"exception"));
        assert!(!event_types(&plan).contains(&"messageStop"));
    }

    #[test]
    fn max_tokens_truncates_and_drops_the_tool_call() {
        let reply = Reply {
            text: Some("one two three".into()),
            tool_use: Some(ToolCall { name: "t".into(), input: json!({"k": "v"}) }),
        };
        let timing = Timing::instant();
        let mut plan_input = input(&reply, &timing, None);
        plan_input.max_tokens = Some(2);
        let plan = plan(&plan_input);
        assert_eq!(plan.stop_reason, "max_tokens");
        assert_eq!(plan.output_tokens, 2);
        assert_eq!(plan.content, vec![json!({"text": "one two"})]);
    }
}
