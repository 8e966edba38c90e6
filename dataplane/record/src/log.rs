//! One session's part of the record: it reads the frames the session delivers (each once,
//! never a replay; reply audio never reaches it) and the client's consents, keeps what it
//! needs to measure (when the turn started, when its first reply text came, when each tool
//! call started), and pushes redacted entries to the [`Recorder`]. It runs on the session's
//! task, so it only parses the few frames worth keeping: streamed reply pieces are told
//! apart by their bytes.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use switchboard_core::protocol::{ClientMessage, ServerKind, ServerMessage};
use switchboard_crds::agent::RedactRule;

use super::store::callers;
use super::{Entry, Recorder, Redactor, Update, now_us};
use switchboard_core::assertion::IDENTITY_KEY;

/// Tool calls tracked at once (their durations); more are recorded without one.
const MAX_OPEN_TOOLS: usize = 32;
/// Consent requests awaiting an answer, per session.
const MAX_OPEN_CONSENTS: usize = 16;

/// A session's recorder.
#[derive(Debug)]
pub struct SessionLog {
    recorder: Arc<Recorder>,
    session: Arc<str>,
    /// The model of the Agent serving the session (from its `bidi_connection_start`).
    model: String,
    /// The user turn under way: its number, when it started, when its first reply came.
    turn: Option<(u64, Instant, Option<Instant>)>,
    tools: Vec<(String, Instant)>,
    /// The rules of every Agent the session reached (they stay for the rest of it).
    rules: Vec<RedactRule>,
    redactor: Arc<Redactor>,
    /// The verified caller's id in the store, once verified.
    caller: Option<String>,
    /// Caller keys set before the caller was verified (kept for it once it is).
    caller_keys: Vec<(String, Value)>,
    /// Consent requests the runtime sent that no answer was recorded for yet (at most
    /// [`MAX_OPEN_CONSENTS`], oldest dropped): only an answer to one of them is recorded.
    consents: Vec<String>,
    /// Transfers to a person the runtime asked for that no result was recorded for yet
    /// (bounded as `consents`): only a result of one of them is recorded.
    transfers: Vec<String>,
    /// Bytes of what was said and done that the session's record kept so far; past
    /// [`Recorder::session_bytes`] it keeps no more (`truncated`).
    kept_bytes: usize,
    truncated: bool,
    /// Whether the caller was put through to a person (a session that ends after it ends
    /// with the transfer: [`SessionLog::ended_by`]).
    transferred: bool,
}

/// Caller keys held until the caller is verified; more are not kept.
const MAX_PENDING_CALLER_KEYS: usize = 32;

impl SessionLog {
    /// The log of session `session`.
    pub fn new(recorder: Arc<Recorder>, session: &str) -> Self {
        let redactor = recorder.redactor_for(&[]);
        Self {
            recorder,
            session: session.into(),
            model: String::new(),
            turn: None,
            tools: Vec::new(),
            rules: Vec::new(),
            redactor,
            caller: None,
            caller_keys: Vec::new(),
            consents: Vec::new(),
            transfers: Vec::new(),
            kept_bytes: 0,
            truncated: false,
            transferred: false,
        }
    }

    /// The session reached an Agent with these redaction rules (`spec.record.redact`): from
    /// now on they apply to everything recorded of the session, at every Agent after it too,
    /// so what one Agent deems secret is not kept in the clear when the caller repeats it
    /// elsewhere.
    pub fn reached(&mut self, rules: &[RedactRule]) {
        let before = self.rules.len();
        for rule in rules {
            if !self.rules.contains(rule) {
                self.rules.push(rule.clone());
            }
        }
        if self.rules.len() != before {
            self.rules.sort_by(|a, b| (&a.name, &a.pattern).cmp(&(&b.name, &b.pattern)));
            self.redactor = self.recorder.redactor_for(&self.rules);
        }
    }

    /// Pushes what was said or done (redacted).
    fn push(&mut self, agent: &str, kind: &'static str, mut data: Value, update: Option<Update>) {
        self.redactor.value(&mut data);
        self.push_kept(agent, kind, data, update);
    }

    /// Pushes what was said or done (`data`, redacted already) while the session's record
    /// has room for it ([`Recorder::session_bytes`]). Past it, one `record_truncated` event
    /// says so and the events that follow keep no data; their changes to the session's row
    /// (the verified caller) still apply.
    fn push_kept(&mut self, agent: &str, kind: &'static str, data: Value, update: Option<Update>) {
        let bytes = super::json_bytes(&data);
        let limit = self.recorder.session_bytes();
        if !self.truncated && self.kept_bytes.saturating_add(bytes) <= limit {
            self.kept_bytes += bytes;
            return self.push_plain(agent, kind, data, update);
        }
        if !self.truncated {
            self.truncated = true;
            tracing::warn!(session_id = %self.session, limit, "the session's record is full: what follows is not kept");
            let note = json!({ "kept_bytes": self.kept_bytes, "limit_bytes": limit });
            self.push_plain(agent, "record_truncated", note, None);
        }
        if update.is_some() {
            self.push_plain(agent, kind, json!({ "truncated": true }), update);
        }
    }

    /// Pushes the gateway's own figures and names (nothing a caller said): not redacted.
    fn push_plain(&self, agent: &str, kind: &'static str, data: Value, update: Option<Update>) {
        let entry = Entry {
            session: self.session.clone(),
            at_us: now_us(),
            ord: 0,
            agent: agent.to_owned(),
            kind,
            data,
            update,
        };
        self.recorder.push(entry);
    }

    /// The session started (or came back: `resumed`) at `agent`, opened by `credential`.
    pub fn started(&self, agent: &str, credential: &str, resumed: bool, voice: Option<&str>, modalities: &[String]) {
        let kind = if resumed { "session_resumed" } else { "session_start" };
        let data = json!({ "credential": credential, "voice": voice, "modalities": modalities });
        self.push_plain(agent, kind, data, Some(Update::Start { credential: credential.to_owned() }));
    }

    /// The session moved to `agent` (a handoff).
    pub fn handed_off(&self, from: &str, agent: &str) {
        self.push_plain(agent, "agent_joined", json!({ "from": from }), Some(Update::Agent));
    }

    /// The session runs `variant` of `agent` (its `spec.variants`): written when the session
    /// first reaches the Agent, so every session of an Agent with variants names its own.
    pub fn variant(&self, agent: &str, variant: &str) {
        self.push_plain(agent, "variant", json!({ "variant": variant }), Some(Update::Variant(variant.to_owned())));
    }

    /// The session was placed on `agent`'s fallback region (`cause`: its own region's
    /// pool was `full`, or its region was `failing`): its model streams run in `region`.
    pub fn region(&self, agent: &str, region: &str, cause: &str) {
        self.push_plain(agent, "region", json!({ "region": region, "cause": cause }), None);
    }

    /// The new session was served in text only, through `agent`'s text model, because the
    /// Agent was in outage mode (`cause`: `switch` or `breaker`) and its fallback says so.
    pub fn text_only(&self, agent: &str, cause: &str) {
        self.push_plain(agent, "outage_text_only", json!({ "cause": cause }), None);
    }

    /// The session moved to another pod of its Agent.
    pub fn moved(&self, agent: &str, reason: &str) {
        self.push_plain(agent, "moved", json!({ "reason": reason }), None);
    }

    /// What continuing the session later needs, sealed, for `credential` and the holder
    /// of the resume token whose store key is `token`.
    pub fn state(&self, agent: &str, credential: &str, token: &str, sealed: String) {
        let update = Update::State { credential: credential.to_owned(), token: token.to_owned(), sealed };
        self.push_plain(agent, "state", Value::Null, Some(update));
    }

    /// The session ended (`outcome`: `ended`, `parked`, `failed`), with `close` if one was sent.
    pub fn ended(&self, agent: &str, outcome: &'static str, close: Option<(u16, &str)>) {
        self.ended_by(agent, outcome, close, None);
    }

    /// [`SessionLog::ended`] for a phone call's session, with who hung up (`hung_up_by`
    /// in `session_end` and on the session's row): the agent's end after the caller was
    /// put through to a person (a `transfer_result` of outcome `transferred`) is `transfer`.
    pub fn ended_by(
        &self,
        agent: &str,
        outcome: &'static str,
        close: Option<(u16, &str)>,
        hung_up_by: Option<switchboard_core::outbound::HungUpBy>,
    ) {
        use switchboard_core::outbound::HungUpBy;
        let hung_up_by = hung_up_by.map(|by| match by {
            HungUpBy::Agent if self.transferred => HungUpBy::Transfer,
            by => by,
        });
        let by = hung_up_by.map(HungUpBy::as_str);
        let mut data = json!({ "close_code": close.map(|c| c.0), "reason": close.map(|c| c.1) });
        if let Some(by) = by {
            data["hung_up_by"] = json!(by);
        }
        let update = Update::End { outcome, close_code: close.map(|c| c.0), hung_up_by: by };
        self.push_plain(agent, "session_end", data, Some(update));
    }

    /// A client text frame the session forwarded: the answer to a consent request the
    /// runtime made is kept, once (typed text comes back as the user's transcript line). Any
    /// other `tool_consent` — an id the runtime never asked about, one answered already —
    /// is not the record's: a client cannot write to it without a model turn.
    pub fn client(&mut self, agent: &str, text: &str) {
        if text.contains("transfer_result") {
            return self.transfer_result(agent, text);
        }
        if !text.contains("tool_consent") {
            return;
        }
        if let Ok(ClientMessage::ToolConsent { tool_use_id, approved }) = serde_json::from_str(text)
            && let Some(open) = self.consents.iter().position(|id| *id == tool_use_id)
        {
            self.consents.remove(open);
            self.push(agent, "consent_answer", json!({ "tool_use_id": tool_use_id, "approved": approved }), None);
        }
    }

    /// How a transfer to a person ended, as the client (the SIP edge) answered it: kept
    /// when it answers a transfer the runtime asked for; `transferred` marks the session's
    /// row (variants are compared on it).
    fn transfer_result(&mut self, agent: &str, text: &str) {
        let Ok(ClientMessage::TransferResult { tool_use_id, outcome, message }) = serde_json::from_str(text) else {
            return;
        };
        let Some(open) = self.transfers.iter().position(|id| *id == tool_use_id) else { return };
        self.transfers.remove(open);
        let transferred = outcome == switchboard_core::protocol::TransferOutcome::Transferred;
        self.transferred |= transferred;
        let update = transferred.then_some(Update::Transferred);
        let message: String = message.chars().take(200).collect();
        let data = json!({ "tool_use_id": tool_use_id, "outcome": outcome.as_str(), "message": message });
        self.push(agent, "transfer_result", data, update);
    }

    /// A runtime text frame delivered to the client.
    pub fn server(&mut self, agent: &str, text: &str) {
        let kind = ServerKind::peek(text);
        if kind == Some(ServerKind::TranscriptStream) && !text.contains(r#""is_final":true"#) {
            // A streamed piece of the reply (a quote inside its text is escaped, so the
            // bytes above appear only as the field): only its time matters.
            if let Some((_, _, first @ None)) = &mut self.turn {
                *first = Some(Instant::now());
            }
            return;
        }
        if matches!(kind, Some(ServerKind::AudioStream | ServerKind::ToolProgress)) {
            return;
        }
        let Ok(message) = serde_json::from_str::<ServerMessage>(text) else { return };
        self.message(agent, message);
    }

    fn message(&mut self, agent: &str, message: ServerMessage) {
        match message {
            ServerMessage::BidiConnectionStart { agent: name, mode, model, .. } => {
                self.push_plain(agent, "connected", json!({ "agent": name, "mode": mode, "model": model }), None);
                self.model = model;
            }
            ServerMessage::BidiTranscriptStream { role, text, is_final: true, input_id, .. } => {
                let kind = match role {
                    switchboard_core::protocol::TranscriptRole::User => "user",
                    switchboard_core::protocol::TranscriptRole::Assistant => "assistant",
                };
                self.push(agent, kind, json!({ "text": text, "input_id": input_id }), None);
            }
            ServerMessage::BidiTranscriptStream { .. } => {}
            ServerMessage::BidiResponseStart { turn } => self.turn = Some((turn, Instant::now(), None)),
            ServerMessage::BidiResponseComplete { turn, stop_reason } => {
                let (first, took) = match self.turn.take() {
                    Some((_, started, first)) => (
                        first.map(|f| f.saturating_duration_since(started).as_millis() as u64),
                        Some(started.elapsed().as_millis() as u64),
                    ),
                    None => (None, None),
                };
                let data =
                    json!({ "turn": turn, "stop_reason": stop_reason, "first_reply_ms": first, "turn_ms": took });
                self.push_plain(agent, "turn", data, Some(Update::Turn));
            }
            ServerMessage::BidiUsage { input_tokens, output_tokens, modality, model: answered, .. } => {
                let metrics = &self.recorder.metrics;
                // A fallback's tokens are counted, and priced, as its model's.
                let model = answered.as_deref().unwrap_or(&self.model);
                let priced = model.split_once('@').map_or(model, |(id, _region)| id);
                let cost = self.recorder.prices.cost(priced, input_tokens, output_tokens, modality.as_ref());
                if cost.is_none() {
                    metrics.unpriced.with_label_values(&[model]).inc();
                }
                let cost = cost.unwrap_or(0.0);
                metrics.cost.with_label_values(&[agent, model]).inc_by((cost * 1e6).round() as u64);
                metrics.tokens.with_label_values(&[agent, model, "input"]).inc_by(input_tokens);
                metrics.tokens.with_label_values(&[agent, model, "output"]).inc_by(output_tokens);
                let data = json!({
                    "model": model, "input_tokens": input_tokens, "output_tokens": output_tokens,
                    "modality": modality, "cost_usd": cost,
                });
                let input = i64::try_from(input_tokens).unwrap_or(i64::MAX);
                let output = i64::try_from(output_tokens).unwrap_or(i64::MAX);
                self.push_plain(agent, "usage", data, Some(Update::Usage { input, output, cost }));
            }
            ServerMessage::BidiInterruption {} => self.push_plain(agent, "interruption", json!({}), None),
            ServerMessage::BidiConnectionRestart { reason, generation } => {
                self.push_plain(agent, "stream_restart", json!({ "reason": reason, "generation": generation }), None);
            }
            ServerMessage::ToolStart { tool_use_id, name, input, .. } => {
                if self.tools.len() < MAX_OPEN_TOOLS {
                    self.tools.push((tool_use_id.clone(), Instant::now()));
                }
                self.push(
                    agent,
                    "tool_start",
                    json!({ "tool_use_id": tool_use_id, "name": name, "input": input }),
                    None,
                );
            }
            ServerMessage::ToolComplete { tool_use_id, name, result, cached, .. } => {
                let ms = self.tool_ms(&tool_use_id);
                let data = json!({ "tool_use_id": tool_use_id, "name": name, "result": result, "cached": cached, "duration_ms": ms });
                self.push(agent, "tool_complete", data, None);
            }
            ServerMessage::ToolError { tool_use_id, name, kind, message, .. } => {
                let ms = self.tool_ms(&tool_use_id);
                let data = json!({ "tool_use_id": tool_use_id, "name": name, "kind": kind, "message": message, "duration_ms": ms });
                self.push(agent, "tool_error", data, None);
            }
            ServerMessage::ConsentRequest { tool_use_id, name, description, input } => {
                if !self.consents.contains(&tool_use_id) {
                    if self.consents.len() >= MAX_OPEN_CONSENTS {
                        self.consents.remove(0);
                    }
                    self.consents.push(tool_use_id.clone());
                }
                let data =
                    json!({ "tool_use_id": tool_use_id, "name": name, "description": description, "input": input });
                self.push(agent, "consent_request", data, None);
            }
            ServerMessage::ClientToolCall { tool_use_id, name, input, timeout_ms } => {
                let data =
                    json!({ "tool_use_id": tool_use_id, "name": name, "input": input, "timeout_ms": timeout_ms });
                self.push(agent, "client_tool_call", data, None);
            }
            ServerMessage::DisplayCard { tool_use_id, card } => {
                let mut data = json!({ "tool_use_id": tool_use_id, "card": card });
                self.redactor.value(&mut data);
                self.push(agent, "display_card", data, None);
            }
            ServerMessage::Handoff { from, to, kind, context } => {
                let data = json!({ "from": from, "to": to, "kind": kind, "reason": context.reason, "status": context.status, "summary": context.summary });
                self.push(agent, "handoff", data, None);
            }
            ServerMessage::MemoryUpdate { key, value } => {
                let caller = (key == "verifiedUser").then(|| caller_text(&value)).flatten();
                let mut data = json!({ "key": key, "value": value });
                self.redactor.value(&mut data);
                let update = caller.map(|c| Update::Caller(self.redactor.text(&c).into_owned()));
                self.push_kept(agent, "memory", data, update);
                self.caller_memory(agent, key, value);
            }
            ServerMessage::TransferRequest { tool_use_id, person, address, reason, warm, .. } => {
                if !self.transfers.contains(&tool_use_id) {
                    if self.transfers.len() >= MAX_OPEN_CONSENTS {
                        self.transfers.remove(0);
                    }
                    self.transfers.push(tool_use_id.clone());
                }
                let mode = if warm { "warm" } else { "cold" };
                let data = json!({ "tool_use_id": tool_use_id, "person": person, "address": address, "reason": reason, "mode": mode });
                self.push(agent, "transfer_request", data, None);
            }
            ServerMessage::WorkflowTransition { from, to, by } => {
                self.push(agent, "workflow", json!({ "from": from, "to": to, "by": by }), None);
            }
            ServerMessage::WorkflowLine { node, text, uninterruptible, played, reason } => {
                let data = json!({
                    "node": node, "text": text, "uninterruptible": uninterruptible,
                    "played": played.as_str(), "reason": reason,
                });
                self.push(agent, "workflow_line", data, None);
            }
            ServerMessage::BidiError { message, code, recoverable, input_id, .. } => {
                let data =
                    json!({ "code": code, "message": message, "recoverable": recoverable, "input_id": input_id });
                self.push(agent, "error", data, None);
            }
            // Reply audio, tool progress, a pod's drain notice and its close: nothing to keep.
            _ => {}
        }
    }

    /// The session was opened at `agent` for the verified caller `caller` (its id in the
    /// store): a session resumed or continued here, whose verification this log did not
    /// see, links the caller and keeps its caller keys too.
    pub fn verified(&mut self, agent: &str, caller: String) {
        if self.caller.as_ref() == Some(&caller) {
            return;
        }
        let namespace = agent.split_once('/').map_or(agent, |(namespace, _)| namespace).to_owned();
        self.link(agent, caller, namespace);
    }

    /// Links `caller` to the session and writes the caller keys held for it.
    fn link(&mut self, agent: &str, caller: String, namespace: String) {
        self.caller = Some(caller.clone());
        self.push_plain(agent, "caller", Value::Null, Some(Update::CallerSeen { caller: caller.clone(), namespace }));
        for (key, value) in std::mem::take(&mut self.caller_keys) {
            let update = Update::CallerMemory { caller: caller.clone(), key, value };
            self.push_plain(agent, "caller", Value::Null, Some(update));
        }
    }

    /// The caller across sessions ([`super::store::callers`]): a verified caller is linked
    /// to the session, and the caller keys the session sets are kept for it.
    fn caller_memory(&mut self, agent: &str, key: String, value: Value) {
        if key == IDENTITY_KEY {
            let namespace = agent.split_once('/').map_or(agent, |(namespace, _)| namespace);
            let caller = (!value.is_null()).then(|| callers::caller_id(namespace, &value));
            if caller == self.caller {
                return;
            }
            match caller {
                Some(caller) => self.link(agent, caller, namespace.to_owned()),
                None => self.caller = None,
            }
            return;
        }
        if !callers::is_caller_key(&key) {
            return;
        }
        match &self.caller {
            Some(caller) => {
                let update = Update::CallerMemory { caller: caller.clone(), key, value };
                self.push_plain(agent, "caller", Value::Null, Some(update));
            }
            None => {
                self.caller_keys.retain(|(k, _)| *k != key);
                if self.caller_keys.len() < MAX_PENDING_CALLER_KEYS {
                    self.caller_keys.push((key, value));
                }
            }
        }
    }

    fn tool_ms(&mut self, id: &str) -> Option<u64> {
        let index = self.tools.iter().position(|(tool, _)| tool == id)?;
        let (_, started) = self.tools.swap_remove(index);
        Some(started.elapsed().as_millis() as u64)
    }
}

/// The caller a `verifiedUser` value names: a string, or an object's `id`/`customerId`.
fn caller_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Object(map) => ["id", "customerId", "userId", "name"].iter().find_map(|k| {
            map.get(*k).and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_number().map(ToString::to_string)))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
