//! The runtime's Prometheus metrics, one registry per process. Labels are bounded: agent,
//! mode, model, tool, plus small fixed sets (`direction`, `modality`, `outcome`, `type`,
//! `kind`, `reason`) — never a session id. Every series is listed in METRICS.md (a test
//! below holds the two together).
//!
//! Where the OpenTelemetry GenAI semantic conventions name a metric, it is exported under
//! that name in the Prometheus form of the OpenTelemetry-to-Prometheus mapping (dots become
//! underscores, the unit `s` becomes `_seconds`, annotations such as `{token}` are dropped),
//! with the conventions' attributes as labels (`gen_ai.system` -> `gen_ai_system`, ...) and
//! their bucket boundaries:
//!
//! - `gen_ai.client.token.usage` -> `gen_ai_client_token_usage` (tokens per model call and
//!   `gen_ai_token_type`; voice: per usage report of the Nova Sonic stream),
//! - `gen_ai.client.operation.duration` -> `gen_ai_client_operation_duration_seconds`
//!   (text model calls, `error_type` set when one failed),
//! - `gen_ai.server.time_to_first_token` -> `gen_ai_server_time_to_first_token_seconds`.
//!
//! The namespace is not a label of the runtime's own: the scrape adds it (a PodMonitor's
//! `namespace` target label), as it adds `pod`.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};
use switchboard_core::GOTO_TOOL;
use switchboard_core::protocol::{ServerMessage, TransferOutcome};
use switchboard_crds::agent::{SEND_DIGITS_TOOL, TRANSFER_TO_PERSON_TOOL};
use switchboard_crds::runtime::{RETURN_PREFIX, RuntimeSpec};

mod gen_ai;

use gen_ai::GEN_AI;
pub use gen_ai::{DURATION_BUCKETS, ModelLabels, OPERATION, TOKEN_BUCKETS, TTFT_BUCKETS, gen_ai_system};

/// A metric could not be registered (a programming error: duplicate names).
#[derive(Debug, thiserror::Error)]
#[error("cannot register metric: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// Every metric of a runtime process.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// Every family registered, for METRICS.md's test.
    families: Arc<[Family]>,
    /// End of user input -> first reply text, per turn.
    pub turn_latency: HistogramVec,
    /// Model call start -> first token.
    pub time_to_first_token: HistogramVec,
    /// Whole model calls.
    pub model_call_duration: HistogramVec,
    /// Tokens by direction (`input`/`output`) and modality (`text`/`speech`).
    pub tokens: IntCounterVec,
    /// Tool calls by outcome (`success`/`error`/`cached`).
    pub tool_duration: HistogramVec,
    /// Sessions open now.
    pub sessions_active: IntGaugeVec,
    /// Sessions started.
    pub sessions_total: IntCounterVec,
    /// Handoffs made by an agent.
    pub handoffs: IntCounterVec,
    /// Errors by type (`model_*`, `invalid_json`, `rate_limited`, ...).
    pub errors: IntCounterVec,
    /// Voice: end of the user's speech (last voiced input frame, or typed text) -> first
    /// reply audio sent to the client. Includes the model's end-of-turn pause.
    pub time_to_first_audio: HistogramVec,
    /// Voice: model streams replaced, by reason (`rotation`, `voice_change`,
    /// `stream_ended`, an error type).
    pub stream_restarts: IntCounterVec,
    /// Voice: replies the model's stream was lost in the middle of (or before), by
    /// `outcome`: `asked_again` (the replacement answers the words) or `unanswered`.
    pub replies_cut: IntCounterVec,
    /// Voice: filler lines asked for while a tool call ran long (the caller heard the
    /// agent instead of silence).
    pub fillers: IntCounterVec,
    /// Voice: waits of more than 2 s for the agent's audio in its turn (dead air).
    pub silences: IntCounterVec,
    /// Voice: the caller speaking over the agent, by `outcome`: `ignored` (shorter than the
    /// Persona's `turnTaking.minInterruptionMs`, or over a line played whole: the reply went
    /// on) or `taken` (the reply stopped).
    pub caller_interruptions: IntCounterVec,
    /// Voice: lines played whole the caller spoke over, their speech held back and sent to
    /// the model once the line was over, by `outcome`: `heard` (all of it) or `truncated`
    /// (past a minute: the rest was dropped).
    pub withheld_speech: IntCounterVec,
    /// Voice: re-prompts after a quiet period ("Are you still there?").
    pub reprompts: IntCounterVec,
    /// Voice: notices of a session state change (memory set, workflow step) handed to the
    /// live Nova Sonic stream (`VoiceEffect::StateChanged`).
    pub state_notices: IntCounterVec,
    /// Voice: calls that switched to another of the Persona's languages, by the `language`
    /// switched to (a BCP 47 tag from the Persona: bounded).
    pub language_switches: IntCounterVec,
    /// Voice: calls the agent ended itself, by `reason`: `idle` (silent through every
    /// re-prompt) or `max_duration` (the call's time limit).
    pub calls_ended: IntCounterVec,
    /// Model calls (text) and stream openings (voice) that moved on to a fallback model,
    /// by the model left (`from`), the one tried next (`to`) and why (`reason`).
    pub fallbacks: IntCounterVec,
    /// Model summaries of compacted turns, by outcome (`written`, `failed`, `timeout`,
    /// `empty`); all but `written` leave the extractive summary in place.
    pub summaries: IntCounterVec,
    gen_ai_token_usage: HistogramVec,
    gen_ai_duration: HistogramVec,
    gen_ai_ttft: HistogramVec,
    tool_calls: IntCounterVec,
    tool_errors: IntCounterVec,
    consent_requests: IntCounterVec,
    client_tool_calls: IntCounterVec,
    keypad_inputs: IntCounterVec,
    transfers: IntCounterVec,
    interruptions: IntCounterVec,
}

/// One metric family: what METRICS.md says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Family {
    /// Its name.
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its labels, in order.
    pub labels: &'static [&'static str],
}

/// Registers metrics and remembers them.
struct Builder {
    registry: Registry,
    families: Vec<Family>,
}

impl Builder {
    fn histogram(
        &mut self,
        name: &'static str,
        help: &str,
        buckets: &[f64],
        labels: &'static [&'static str],
    ) -> Result<HistogramVec, MetricsError> {
        let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels)?;
        self.registry.register(Box::new(h.clone()))?;
        self.families.push(Family { name, kind: "histogram", labels });
        Ok(h)
    }

    fn counter(
        &mut self,
        name: &'static str,
        help: &str,
        labels: &'static [&'static str],
    ) -> Result<IntCounterVec, MetricsError> {
        let c = IntCounterVec::new(Opts::new(name, help), labels)?;
        self.registry.register(Box::new(c.clone()))?;
        self.families.push(Family { name, kind: "counter", labels });
        Ok(c)
    }

    fn gauge(
        &mut self,
        name: &'static str,
        help: &str,
        labels: &'static [&'static str],
    ) -> Result<IntGaugeVec, MetricsError> {
        let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
        self.registry.register(Box::new(g.clone()))?;
        self.families.push(Family { name, kind: "gauge", labels });
        Ok(g)
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let mut b = Builder { registry: Registry::new(), families: Vec::new() };
        let model: &'static [&'static str] = &["agent", "mode", "model"];
        let turn_latency = b.histogram(
            "switchboard_turn_latency_seconds",
            "End of user input to the first reply text of the turn.",
            TTFT_BUCKETS,
            model,
        )?;
        let time_to_first_token = b.histogram(
            "switchboard_time_to_first_token_seconds",
            "Model call start to its first token (as gen_ai_server_time_to_first_token_seconds).",
            TTFT_BUCKETS,
            model,
        )?;
        let model_call_duration = b.histogram(
            "switchboard_model_call_duration_seconds",
            "Whole model calls (as gen_ai_client_operation_duration_seconds).",
            DURATION_BUCKETS,
            model,
        )?;
        let tokens = b.counter(
            "switchboard_tokens_total",
            "Model tokens by direction (input/output) and modality (text/speech).",
            &["agent", "mode", "model", "direction", "modality"],
        )?;
        let tool_duration = b.histogram(
            "switchboard_tool_duration_seconds",
            "Tool calls executed, by outcome (success, error).",
            DURATION_BUCKETS,
            &["agent", "tool", "outcome"],
        )?;
        let sessions_active = b.gauge("switchboard_sessions_active", "Sessions open now.", &["agent", "mode"])?;
        let sessions_total = b.counter("switchboard_sessions_total", "Sessions started.", &["agent", "mode"])?;
        let handoffs = b.counter("switchboard_handoffs_total", "Handoffs made by an agent.", &["agent"])?;
        let errors = b.counter("switchboard_errors_total", "Errors by type.", &["agent", "type"])?;
        let time_to_first_audio = b.histogram(
            "switchboard_time_to_first_audio_seconds",
            "Voice: end of the user's speech (last voiced frame, or typed text) to the first reply audio sent.",
            TTFT_BUCKETS,
            model,
        )?;
        let stream_restarts = b.counter(
            "switchboard_model_stream_restarts_total",
            "Voice: model streams replaced, by reason (rotation, voice_change, stream_ended, error type).",
            &["agent", "reason"],
        )?;
        let replies_cut = b.counter(
            "switchboard_voice_replies_cut_total",
            "Voice: replies owed when the model's stream was lost, by outcome (asked_again, unanswered).",
            &["agent", "outcome"],
        )?;
        let fillers = b.counter(
            "switchboard_voice_fillers_total",
            "Voice: filler lines the agent was asked to say while a tool call ran long, instead of silence.",
            &["agent"],
        )?;
        let silences = b.counter(
            "switchboard_voice_silences_total",
            "Voice: waits of more than 2 s for the agent's audio in its turn (dead air).",
            &["agent"],
        )?;
        let caller_interruptions = b.counter(
            "switchboard_voice_interruptions_total",
            "Voice: the caller speaking over the agent, by outcome (ignored: too short or over a line played whole; taken: the reply stopped).",
            &["agent", "outcome"],
        )?;
        let withheld_speech = b.counter(
            "switchboard_voice_withheld_speech_total",
            "Voice: lines played whole the caller spoke over, their speech sent to the model after the line, by outcome (heard: all of it; truncated: past a minute, the rest dropped).",
            &["agent", "outcome"],
        )?;
        let reprompts = b.counter(
            "switchboard_voice_reprompts_total",
            "Voice: re-prompts the agent said after a quiet period.",
            &["agent"],
        )?;
        let state_notices = b.counter(
            "switchboard_voice_state_notices_total",
            "Voice: notices of a session state change (memory set, workflow step) handed to the live Nova Sonic stream.",
            &["agent"],
        )?;
        let language_switches = b.counter(
            "switchboard_voice_language_switches_total",
            "Voice: calls that switched to another of the Persona's languages (spec.languages), by the language switched to.",
            &["agent", "language"],
        )?;
        let calls_ended = b.counter(
            "switchboard_voice_calls_ended_total",
            "Voice: calls the agent ended itself, by reason (idle, max_duration).",
            &["agent", "reason"],
        )?;
        let fallbacks = b.counter(
            "switchboard_model_fallbacks_total",
            "Model calls (text) and stream openings (voice) that moved on to a fallback model, by from, to and reason.",
            &["agent", "mode", "from", "to", "reason"],
        )?;
        let summaries = b.counter(
            "switchboard_context_summaries_total",
            "Model summaries of compacted turns, by outcome (written, failed, timeout, empty; all but written keep the extractive one).",
            &["agent", "outcome"],
        )?;
        let token_labels =
            &["agent", "gen_ai_operation_name", "gen_ai_system", "gen_ai_request_model", "gen_ai_token_type"];
        let gen_ai_token_usage = b.histogram(
            "gen_ai_client_token_usage",
            "gen_ai.client.token.usage: tokens per model call (voice: per usage report), by gen_ai_token_type.",
            TOKEN_BUCKETS,
            token_labels,
        )?;
        let gen_ai_duration = b.histogram(
            "gen_ai_client_operation_duration_seconds",
            "gen_ai.client.operation.duration: whole text model calls; error_type is set when one failed.",
            DURATION_BUCKETS,
            &["agent", "gen_ai_operation_name", "gen_ai_system", "gen_ai_request_model", "error_type"],
        )?;
        let gen_ai_ttft = b.histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "gen_ai.server.time_to_first_token: text model call start to its first token.",
            TTFT_BUCKETS,
            GEN_AI,
        )?;
        let tool_calls = b.counter(
            "switchboard_tool_calls_total",
            "Tool calls answered, by outcome: success, cached (a cached result), error.",
            &["agent", "tool", "outcome"],
        )?;
        let tool_errors = b.counter(
            "switchboard_tool_errors_total",
            "Tool calls that failed, by kind (timeout, http_status, connection, consent_declined, ...).",
            &["agent", "tool", "kind"],
        )?;
        let consent_requests = b.counter(
            "switchboard_consent_requests_total",
            "Tool calls that waited for the user's consent.",
            &["agent", "tool"],
        )?;
        let client_tool_calls = b.counter(
            "switchboard_client_tool_calls_total",
            "Calls of tools the client runs, by outcome (success, client_timeout, client_bad_result, client_error, ...).",
            &["agent", "tool", "outcome"],
        )?;
        let keypad_inputs = b.counter(
            "switchboard_keypad_inputs_total",
            "Tool inputs typed on a phone's keypad (a tool's keypad), by outcome: collected (the tool ran with them), timeout, too_short, invalid (the schema refused them).",
            &["agent", "tool", "outcome"],
        )?;
        let transfers = b.counter(
            "switchboard_transfers_total",
            "Transfers of a caller to a person (transfer_to_person), by outcome: transferred, busy, no_answer, declined, unreachable, rejected, failed.",
            &["agent", "outcome"],
        )?;
        let interruptions = b.counter(
            "switchboard_interruptions_total",
            "Barge-ins: the user spoke over the agent's answer, or cancelled it.",
            &["agent", "mode"],
        )?;
        Ok(Self {
            registry: b.registry,
            families: b.families.into(),
            turn_latency,
            time_to_first_token,
            model_call_duration,
            tokens,
            tool_duration,
            sessions_active,
            sessions_total,
            handoffs,
            errors,
            time_to_first_audio,
            stream_restarts,
            replies_cut,
            fillers,
            silences,
            caller_interruptions,
            withheld_speech,
            reprompts,
            state_notices,
            language_switches,
            calls_ended,
            fallbacks,
            summaries,
            gen_ai_token_usage,
            gen_ai_duration,
            gen_ai_ttft,
            tool_calls,
            tool_errors,
            consent_requests,
            client_tool_calls,
            keypad_inputs,
            transfers,
            interruptions,
        })
    }

    /// A model call's first token came `after` it began.
    pub fn first_token(&self, labels: ModelLabels<'_>, after: Duration) {
        let seconds = after.as_secs_f64();
        self.time_to_first_token.with_label_values(&labels.ours()).observe(seconds);
        self.gen_ai_ttft.with_label_values(&labels.gen_ai()).observe(seconds);
    }

    /// A model call ended after `took`, failed with an error of type `error` if it did.
    pub fn model_call_done(&self, labels: ModelLabels<'_>, took: Duration, error: Option<&str>) {
        let seconds = took.as_secs_f64();
        self.model_call_duration.with_label_values(&labels.ours()).observe(seconds);
        let [agent, operation, system, model] = labels.gen_ai();
        let error = error.unwrap_or_default();
        self.gen_ai_duration.with_label_values(&[agent, operation, system, model, error]).observe(seconds);
    }

    /// The tokens of one model call (voice: one usage report), each direction's observed
    /// when there were any.
    pub fn token_usage(&self, labels: ModelLabels<'_>, input: u64, output: u64) {
        let [agent, operation, system, model] = labels.gen_ai();
        for (kind, count) in [("input", input), ("output", output)] {
            if count > 0 {
                let values = [agent, operation, system, model, kind];
                self.gen_ai_token_usage.with_label_values(&values).observe(count as f64);
            }
        }
    }

    /// Counts what `message`, about to go to a client of `spec`'s agent, says happened:
    /// tool calls answered and failed, consent requests, barge-ins.
    pub fn sent(&self, spec: &RuntimeSpec, message: &ServerMessage) {
        let agent = spec.agent.name.as_str();
        match message {
            ServerMessage::ToolComplete { name, cached, .. } => {
                let outcome = if *cached { "cached" } else { "success" };
                self.tool_calls.with_label_values(&[agent, tool_label(spec, name), outcome]).inc();
                self.client_tool_call(spec, name, "success");
                if name == TRANSFER_TO_PERSON_TOOL {
                    self.transfers.with_label_values(&[agent, TransferOutcome::Transferred.as_str()]).inc();
                }
            }
            ServerMessage::ToolError { name, kind, .. } => {
                let tool = tool_label(spec, name);
                // A transfer's outcome is its error kind (`transfer_busy`, ...); the
                // tool's other errors (an unknown person) transferred nobody.
                if name == TRANSFER_TO_PERSON_TOOL
                    && let Some(outcome) =
                        TransferOutcome::ALL.iter().find(|o| kind.strip_prefix("transfer_") == Some(o.as_str()))
                {
                    self.transfers.with_label_values(&[agent, outcome.as_str()]).inc();
                }
                self.tool_calls.with_label_values(&[agent, tool, "error"]).inc();
                self.tool_errors.with_label_values(&[agent, tool, kind]).inc();
                self.client_tool_call(spec, name, kind);
            }
            ServerMessage::ConsentRequest { name, .. } => {
                self.consent_requests.with_label_values(&[agent, tool_label(spec, name)]).inc();
            }
            ServerMessage::BidiInterruption {} => {
                self.interruptions.with_label_values(&[agent, spec.mode.as_str()]).inc();
            }
            _ => {}
        }
    }

    /// Counts what a transcript line of `spec`'s agent says happened: the end of a keypad
    /// input's entry (`keypad`, whose outcome is one of the few the core writes).
    pub fn transcribed(&self, spec: &RuntimeSpec, entry: &switchboard_core::TranscriptEntry) {
        if entry.event != "keypad" || entry.data["outcome"] == "waiting" {
            return;
        }
        let name = entry.data["name"].as_str().unwrap_or_default();
        let known = ["collected", "timeout", "too_short", "invalid"];
        let outcome = entry.data["outcome"].as_str().filter(|o| known.contains(o)).unwrap_or("other");
        let values = [spec.agent.name.as_str(), tool_label(spec, name), outcome];
        self.keypad_inputs.with_label_values(&values).inc();
    }

    /// Counts a call of `name` that ended with `outcome`, when the agent's tool `name` runs
    /// in the client.
    fn client_tool_call(&self, spec: &RuntimeSpec, name: &str, outcome: &str) {
        if spec.tools.iter().any(|t| t.name == name && t.client.is_some()) {
            self.client_tool_calls.with_label_values(&[spec.agent.name.as_str(), name, outcome]).inc();
        }
    }

    /// Every metric family.
    pub fn families(&self) -> &[Family] {
        &self.families
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# encoding metrics failed: {e}\n");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The `tool` label of a call to `name`: the name when `spec`'s agent has that tool (or
/// transfer tool, `send_digits`, or `workflow_goto`), `return_to_caller` for its return tool, `unknown`
/// otherwise, so a tool name the model made up adds no series.
fn tool_label<'a>(spec: &RuntimeSpec, name: &'a str) -> &'a str {
    let known = name == GOTO_TOOL
        || (name == TRANSFER_TO_PERSON_TOOL && !spec.telephony.people.is_empty())
        || (name == SEND_DIGITS_TOOL && spec.telephony.send_digits)
        || spec.tools.iter().any(|t| t.name == name)
        || spec.handoffs.iter().any(|h| h.tool == name);
    if known {
        name
    } else if name.starts_with(RETURN_PREFIX) {
        "return_to_caller"
    } else {
        "unknown"
    }
}

#[cfg(test)]
mod tests;
