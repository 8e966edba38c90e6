//! One runtime session as its trace and its log lines show it. The session span
//! ([`session_span`]) is the child of the gateway's (the `traceparent` of the signed grant),
//! so a session is one trace across the gateway, every pod it visits and its tool servers;
//! the drivers run inside it, so their log lines carry its `session_id` and `trace_id`.
//! Below it, [`SessionTrace`] keeps, from what the core tells the client and what the
//! drivers do:
//!
//! - `turn`: from the end of the user's input (`bidi_response_start`) to the answer's end,
//!   with the time to the first response and the stop reason;
//! - `chat <model>`: each model call, with the OpenTelemetry GenAI attributes
//!   (`gen_ai.system`, `gen_ai.operation.name`, `gen_ai.request.model`, token usage, finish
//!   reason, `gen_ai.server.time_to_first_token` in seconds, `error.type`);
//! - `execute_tool <name>`: each tool call, from `tool_start` to its result (consent waits
//!   and cached results included), with its outcome and whether it was cached; its
//!   `traceparent` goes to the tool server;
//! - handoffs, consent requests and errors sent to the client as events of the session span
//!   (log lines too: the session span is theirs, so they carry its ids).
//!
//! Ids, names, counts and codes only: what the user and the model say never enters a span —
//! unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: then, redacted as the
//! conversation record is (the built-in detectors and the Agent's rules), each final user and
//! assistant line is an event of its turn (`gen_ai.user.message`, `gen_ai.assistant.message`
//! with `gen_ai.message.content`), and each tool call's arguments and result are events of
//! its span (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Those events have
//! their own target ([`switchboard_telemetry::CONTENT_TARGET`]), which the log never writes.

use std::collections::HashMap;
use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use super::agent::AgentRuntime;
use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_core::redact::Redactor;
use switchboard_crds::agent::Provider;
use switchboard_telemetry::context;

/// The span of `agent`'s session `session_id`, the child of the gateway's span that
/// `traceparent` names (none: a trace of its own).
pub fn session_span(agent: &AgentRuntime, session_id: &str, traceparent: Option<&str>, voice: bool) -> Span {
    let spec = agent.core.spec();
    let span = tracing::info_span!(
        parent: None,
        "runtime.session",
        otel.kind = "server",
        session_id,
        agent = %spec.agent.name,
        namespace = %spec.agent.namespace,
        variant = agent.variant.as_deref().unwrap_or_default(),
        mode = if voice { "voice" } else { "text" },
        trace_id = Empty,
    );
    context::set_parent(&span, traceparent);
    context::record_trace_id(&span);
    span
}

/// The spans under one session span, kept by the session's driver.
#[derive(Debug)]
pub struct SessionTrace {
    session_id: String,
    session: Span,
    turn: Option<Span>,
    model: Option<Span>,
    tools: HashMap<String, Span>,
    system: &'static str,
    model_id: String,
    /// When what is said goes into the trace (opted in): how it is redacted first.
    content: Option<Redactor>,
}

impl SessionTrace {
    /// The trace of `agent`'s session `session_id`, whose driver runs inside its session
    /// span (the current span); what is said, when opted in, is redacted with `platform`'s
    /// rules and the Agent's own.
    pub fn new(agent: &AgentRuntime, session_id: &str, platform: &Redactor) -> Self {
        let spec = agent.core.spec();
        let system = match spec.model.provider {
            Provider::Bedrock => "aws.bedrock",
            Provider::Openai => "openai",
        };
        Self {
            session_id: session_id.to_owned(),
            session: Span::current(),
            turn: None,
            model: None,
            tools: HashMap::new(),
            system,
            model_id: spec.model.text_model_id.clone(),
            content: switchboard_telemetry::capture_content().then(|| content_redactor(spec, platform)),
        }
    }

    /// The session's id, for log lines.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The span new spans go under: the turn's, else the session's.
    fn parent(&self) -> &Span {
        self.turn.as_ref().unwrap_or(&self.session)
    }

    /// Notes `message`, about to go to the client.
    pub fn message(&mut self, message: &ServerMessage) {
        if let Some(redactor) = &self.content {
            self.content(redactor, message);
        }
        match message {
            ServerMessage::BidiResponseStart { turn } => {
                self.turn = Some(tracing::info_span!(
                    parent: &self.session,
                    "turn",
                    turn = int(*turn),
                    time_to_first_response = Empty,
                    stop_reason = Empty,
                ));
            }
            ServerMessage::BidiResponseComplete { stop_reason, .. } => {
                if let Some(turn) = self.turn.take() {
                    turn.record("stop_reason", stop_reason.as_str());
                }
            }
            ServerMessage::ToolStart { tool_use_id, name, input, .. } => {
                let span = tracing::info_span!(
                    parent: self.parent(),
                    "execute_tool",
                    otel.name = %format_args!("execute_tool {name}"),
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %name,
                    gen_ai.tool.call.id = %tool_use_id,
                    outcome = Empty,
                    cached = Empty,
                    error.type = Empty,
                    otel.status_code = Empty,
                );
                if let Some(redactor) = &self.content {
                    let input = redacted(redactor, input);
                    let _in = span.enter();
                    tracing::event!(target: switchboard_telemetry::CONTENT_TARGET, tracing::Level::INFO, gen_ai.tool.call.id = %tool_use_id, gen_ai.tool.call.arguments = %input, "gen_ai.tool.call.arguments");
                }
                self.tools.insert(tool_use_id.clone(), span);
            }
            ServerMessage::ConsentRequest { tool_use_id, name, .. } => {
                tracing::info!(parent: &self.session, session_id = %self.session_id, tool = %name, %tool_use_id, "waiting for the user's consent");
            }
            ServerMessage::ToolComplete { tool_use_id, cached, .. } => {
                if let Some(span) = self.tools.remove(tool_use_id) {
                    span.record("outcome", "success");
                    span.record("cached", *cached);
                }
            }
            ServerMessage::ToolError { tool_use_id, kind, .. } => {
                if let Some(span) = self.tools.remove(tool_use_id) {
                    span.record("outcome", "error");
                    span.record("cached", false);
                    span.record("error.type", kind.as_str());
                    span.record("otel.status_code", "error");
                }
            }
            ServerMessage::Handoff { from, to, kind, .. } => {
                tracing::info!(parent: &self.session, session_id = %self.session_id, source_agent = %from, target_agent = %to, kind = ?kind, "handoff");
            }
            ServerMessage::BidiError { code, recoverable, .. } => {
                tracing::info!(parent: &self.session, session_id = %self.session_id, %code, recoverable, "an error went to the client");
            }
            _ => {}
        }
    }

    /// What `message` says, as events of its turn or tool span (only when opted in; a tool
    /// call's arguments are noted where its span is made).
    fn content(&self, redactor: &Redactor, message: &ServerMessage) {
        use switchboard_telemetry::CONTENT_TARGET;
        match message {
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text, is_final: true, .. } => {
                let text = redactor.text(text);
                let _in = self.parent().enter();
                tracing::event!(target: CONTENT_TARGET, tracing::Level::INFO, gen_ai.message.content = %text, "gen_ai.user.message");
            }
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, text, is_final: true, .. } => {
                let text = redactor.text(text);
                let _in = self.parent().enter();
                tracing::event!(target: CONTENT_TARGET, tracing::Level::INFO, gen_ai.message.content = %text, "gen_ai.assistant.message");
            }
            ServerMessage::ToolComplete { tool_use_id, result, .. } => {
                let result = redacted(redactor, result);
                let parent = self.tools.get(tool_use_id).unwrap_or(self.parent());
                let _in = parent.enter();
                tracing::event!(target: CONTENT_TARGET, tracing::Level::INFO, gen_ai.tool.call.id = %tool_use_id, gen_ai.tool.call.result = %result, "gen_ai.tool.call.result");
            }
            _ => {}
        }
    }

    /// The traceparent to send with tool call `tool_use_id`.
    pub fn tool_traceparent(&self, tool_use_id: &str) -> Option<String> {
        self.tools.get(tool_use_id).and_then(context::traceparent)
    }

    /// A model call begins.
    pub fn model_call(&mut self) {
        self.model = Some(tracing::info_span!(
            parent: self.parent(),
            "chat",
            otel.name = %format_args!("chat {}", self.model_id),
            otel.kind = "client",
            gen_ai.system = self.system,
            gen_ai.provider.name = self.system,
            gen_ai.operation.name = "chat",
            gen_ai.request.model = %self.model_id,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.server.time_to_first_token = Empty,
            error.type = Empty,
            otel.status_code = Empty,
        ));
    }

    /// The model call's first output came `after` it began.
    pub fn first_token(&self, after: Duration) {
        if let Some(span) = &self.model {
            span.record("gen_ai.server.time_to_first_token", after.as_secs_f64());
        }
    }

    /// The turn's first response came `after` the user's input ended.
    pub fn first_response(&self, after: Duration) {
        if let Some(turn) = &self.turn {
            turn.record("time_to_first_response", after.as_secs_f64());
        }
    }

    /// The model call's token usage.
    pub fn usage(&self, input: u64, output: u64) {
        if let Some(span) = &self.model {
            span.record("gen_ai.usage.input_tokens", int(input));
            span.record("gen_ai.usage.output_tokens", int(output));
        }
    }

    /// The model call ended, for `stop_reason`.
    pub fn model_done(&mut self, stop_reason: Option<&str>) {
        if let Some(span) = self.model.take()
            && let Some(reason) = stop_reason
        {
            span.record("gen_ai.response.finish_reasons", reason);
        }
    }

    /// The model call failed with an error of type `kind` (the metrics' label).
    pub fn model_failed(&mut self, kind: &str) {
        if let Some(span) = self.model.take() {
            span.record("error.type", kind);
            span.record("otel.status_code", "error");
        }
    }
}

/// What redacts captured content: the conversation record's built-in detectors (cards,
/// e-mail, phone numbers) and the Agent's own rules (`spec.record.redact`). The gateway's
/// chart-wide rules are not known here.
/// `platform`'s rules with the Agent's own after them, as the gateway's record applies them.
fn content_redactor(spec: &switchboard_crds::RuntimeSpec, platform: &Redactor) -> Redactor {
    let rules = spec.record.redact.iter().map(|rule| (rule.name.as_str(), rule.pattern.as_str()));
    // The operator refused Agents whose rules do not compile; a hand-written spec's bad rule
    // leaves the platform's.
    platform.extended(rules).unwrap_or_else(|_| platform.clone())
}

/// `value` redacted, as JSON text.
fn redacted(redactor: &Redactor, value: &serde_json::Value) -> String {
    let mut value = value.clone();
    redactor.value(&mut value);
    value.to_string()
}

/// `n` as the span attribute's integer (the OpenTelemetry bridge records `u64` as text).
fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}
