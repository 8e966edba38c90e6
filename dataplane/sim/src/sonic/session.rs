//! One simulated Nova Sonic stream: reads the input events as they arrive, validates them,
//! detects utterances in the user's audio, and sends the planned reply events at their
//! time — interrupting itself when the user speaks over it, keeping on listening while
//! tool calls run, and closing or failing the stream as the script says.
//!
//! # The shape of the output, and where it comes from
//!
//! - **One completion per prompt.** `completionStart` comes once, just before the model's
//!   first reply content (after the first USER transcript), and `completionEnd` only when
//!   the client ends the prompt (`promptEnd`). Replies within it are delimited by their
//!   contents: the AUDIO content ends `END_TURN` (or `INTERRUPTED`), then the FINAL text.
//!   Sources: Strands 1.62 (`bedrock.py`: "completionEnd closes the whole prompt/session");
//!   LiveKit's AWS plugin 1.8.9 (`realtime_model.py` sends `promptEnd` "to trigger
//!   completionEnd", and expects USER transcripts to arrive with no generation open — a
//!   `completionStart` per turn before the transcript opens one, and the transcript then
//!   counts as the user talking over it); Pipecat 1.14 treats `completionEnd` as a mere
//!   fallback signal. The documentation's "the flow begins with a completionStart" holds
//!   for the stream as a whole.
//! - **USER transcripts end `PARTIAL_TURN`.** Sources: LiveKit ("stopReason=PARTIAL_TURN
//!   always for user") and Strands ("Nova uses PARTIAL_TURN for user text").
//! - **The response ends after the client's input, not at `sessionEnd`.** After
//!   `sessionEnd` (or `connectionEnd`) the simulator sends nothing more but keeps the
//!   response open until the client ends its input stream (at most a few seconds). The
//!   AWS CRT HTTP/2 client all three Python clients use fails the final write of a stream
//!   whose response already completed (`AWS_ERROR_HTTP_STREAM_HAS_COMPLETED`), and each
//!   of them closes its input only after sending `sessionEnd`; Pipecat 1.14 even waits a
//!   second after closing before it stops reading (`llm.py`, `_disconnect`).
//! - **Asynchronous tool calls** (Nova 2 Sonic, "Tool configuration" page): the model keeps
//!   listening while a tool runs. Several calls may wait for results at once; the user may
//!   speak (and be answered) meanwhile; a barge-in stops the speech but not the calls,
//!   whose results are still answered when they come.
//! - **Interactive USER text is answered like speech, without a USER transcript of it**
//!   (Nova 2 Sonic's cross-modal input: `contentStart` type `TEXT`, role `USER`,
//!   `interactive: true`, then `textInput` and `contentEnd`). The text is the user's turn;
//!   the simulator does not echo it back as a USER transcript unless the script's
//!   `echoText` asks it to (a client must cope either way).
//!
//! What goes out when, and the ends of the output, are in [`emit`].

mod emit;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::audio::{Detection, TurnDetector, Utterance, frame_fingerprint};
use super::envelope::{Envelope, EnvelopeDecoder, encode_event};
use super::output::{Event, Ids, Marker, Planned, Usage, input_tokens, instructed_line, speech_tokens};
use super::protocol::{Input, Protocol};
use super::stats::{FrameRecord, ReplyRecord};
use crate::engine::{ToolResultView, Trigger, Turn, decide};
use crate::script::ResultStatus;
use crate::service_error::StreamExceptionKind;
use crate::state::{SimState, applies};

/// How long a stream whose output ended may keep draining its input.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long the output stays open after `sessionEnd` for the client to end its input.
const SESSION_END_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long the output stays open after the input's end message for the request body
/// itself to end. The output ends after the body, as over a real network: a client (the
/// CRT HTTP client of Pipecat's SDK) that ends its body after the response completed
/// fails the write ("HTTP-stream has completed").
const BODY_END_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// One stream's state.
pub struct Session {
    /// Shared simulator state.
    pub state: Arc<SimState>,
    /// The model id of the request.
    pub model_id: String,
    /// The stream's index (0-based, over the simulator's life).
    pub stream: u64,
    /// The response body's feed; `None` once the output ended.
    pub out: Option<mpsc::Sender<Bytes>>,
    /// When the script closes this stream.
    pub close_at: Option<Instant>,
    /// The exception the script's close sends first, if any.
    close_exception: Option<StreamExceptionKind>,
    /// The close due is the `cutReply` fault's.
    cutting: bool,
    protocol: Protocol,
    detector: Option<TurnDetector>,
    ids: Ids,
    system: String,
    tools: BTreeSet<String>,
    queue: VecDeque<Planned>,
    next_id: u64,
    speaking: Option<String>,
    completion_open: bool,
    pending_tools: HashMap<String, String>,
    last_heard: String,
    total: Usage,
    input_done: bool,
    drain_until: Option<Instant>,
    /// The input's end message arrived: the output ends when the body does (or by then).
    body_end_by: Option<Instant>,
}

impl Session {
    /// A session for a new stream.
    pub fn new(
        state: Arc<SimState>,
        model_id: String,
        stream: u64,
        out: mpsc::Sender<Bytes>,
        close_at: Option<Instant>,
    ) -> Self {
        let ids = Ids {
            session_id: format!("sim-session-{stream:08}"),
            prompt_name: String::new(),
            completion_id: String::new(),
            voice: Default::default(),
        };
        let close_exception = state.script.sonic.faults.close.as_ref().and_then(|c| c.exception);
        Self {
            state,
            model_id,
            stream,
            out: Some(out),
            close_at,
            close_exception,
            cutting: false,
            protocol: Protocol::default(),
            detector: None,
            ids,
            system: String::new(),
            tools: BTreeSet::new(),
            queue: VecDeque::new(),
            next_id: 0,
            speaking: None,
            completion_open: false,
            pending_tools: HashMap::new(),
            last_heard: String::new(),
            total: Usage::default(),
            input_done: false,
            drain_until: None,
            body_end_by: None,
        }
    }

    /// Runs the stream until both directions are done.
    pub async fn run(mut self, mut body: Incoming) {
        let mut decoder = EnvelopeDecoder::default();
        loop {
            if self.input_done && self.out.is_none() {
                break;
            }
            // What is planned for the script's close or later never goes out: the close
            // comes first, however late this task runs.
            let close_at = self.close_at.filter(|_| self.out.is_some());
            let next_due = self
                .queue
                .front()
                .map(|p| p.at)
                .filter(|at| self.out.is_some() && close_at.is_none_or(|close| *at < close));
            // Events already due go out now: a timer would round their deadline up to the
            // timer's next millisecond tick.
            if next_due.is_some_and(|at| at <= Instant::now()) {
                self.emit_due().await;
                continue;
            }
            tokio::select! {
                biased;
                frame = body.frame(), if !self.input_done => match frame {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            decoder.extend(&data);
                            self.drain(&mut decoder).await;
                        }
                    }
                    Some(Err(error)) => {
                        tracing::debug!(stream = self.stream, %error, "the client's input broke");
                        self.input_done = true;
                        self.out = None;
                    }
                    None => {
                        self.input_done = true;
                        self.finish_output();
                    }
                },
                () = sleep_until(next_due), if next_due.is_some() => self.emit_due().await,
                () = sleep_until(close_at), if close_at.is_some() => self.scripted_close().await,
                () = sleep_until(self.body_end_by), if self.body_end_by.is_some() && !self.input_done => {
                    tracing::debug!(stream = self.stream, "the client's body did not end after its end message; ending the output");
                    self.input_done = true;
                    self.finish_output();
                }
                () = sleep_until(self.drain_until), if self.drain_until.is_some() && !self.input_done => {
                    tracing::debug!(stream = self.stream, "the client did not end its input after the output ended; giving up");
                    break;
                }
            }
        }
    }

    async fn drain(&mut self, decoder: &mut EnvelopeDecoder) {
        // After the end message nothing more is read; the body's own end finishes the output.
        if self.body_end_by.is_some() {
            return;
        }
        loop {
            match decoder.next_envelope() {
                Ok(Some(Envelope::Event(event))) => self.on_event(&event).await,
                Ok(Some(Envelope::End)) => {
                    self.body_end_by = Some(Instant::now() + BODY_END_GRACE);
                    return;
                }
                Ok(None) => return,
                Err(error) => {
                    self.fail(StreamExceptionKind::Validation, &error.0).await;
                    self.input_done = true;
                    return;
                }
            }
        }
    }

    async fn on_event(&mut self, event: &Value) {
        if self.out.is_none() {
            if let Some(content) = event.pointer("/event/audioInput/content").and_then(Value::as_str) {
                let pcm = aws_smithy_types::base64::decode(content).unwrap_or_default();
                self.state.sonic.count_audio_event();
                for frame in pcm.chunks(super::audio::INPUT_FRAME_BYTES) {
                    self.record_frame(frame, false);
                }
            }
            return;
        }
        let input = match self.protocol.accept(event) {
            Ok(Some(input)) => input,
            Ok(None) => return,
            Err(error) => {
                self.state.sonic.count_validation_error();
                self.fail(StreamExceptionKind::Validation, &error.0).await;
                return;
            }
        };
        match input {
            Input::SessionStart { sensitivity } => {
                let config = &self.state.script.sonic.turn_detection;
                let silence = match sensitivity.as_deref() {
                    Some("HIGH") => config.silence_ms.high,
                    Some("LOW") => config.silence_ms.low,
                    _ => config.silence_ms.medium,
                };
                self.detector = Some(TurnDetector::new(config, silence));
            }
            Input::PromptStart { tools, voice_id } => {
                self.ids.voice = super::voice::Voice::new(voice_id.as_deref());
                self.state.sonic.record_voice(self.stream, voice_id);
                self.tools = tools;
                self.ids.prompt_name = self.protocol.prompt_name().to_owned();
            }
            Input::System(text) => {
                tracing::debug!(stream = self.stream, system = %text, "system prompt");
                self.state.sonic.record_system_prompt(self.stream, &text);
                self.system = text;
            }
            Input::History { role, text } => {
                self.state.sonic.record_history(self.stream, &role, &text);
                self.total.input_text += input_tokens(&role, &text);
            }
            Input::Context(text) => {
                // Taken in, not answered: what the model knows from now on (the rules'
                // `system` conditions read it).
                let mut awaiting: Vec<String> = self.pending_tools.values().cloned().collect();
                awaiting.sort();
                self.state.sonic.record_notice(self.stream, &text, awaiting);
                self.total.input_text += input_tokens("USER", &text);
                self.system.push('\n');
                self.system.push_str(&text);
            }
            Input::Audio(pcm) => self.on_audio(&pcm).await,
            Input::AudioEnd => {}
            Input::PromptEnd => self.end_prompt().await,
            Input::UserText(text) => {
                self.state.sonic.record_typed(&text);
                let usage = Usage { input_text: crate::tokens::estimate_tokens(&text), ..Usage::default() };
                match instructed_line(&text) {
                    Some((_, line)) if self.unsaid(line) => self.total.input_text += usage.input_text,
                    Some((rule, line)) => self.greet(rule, line.to_owned(), &usage),
                    None => self.answer_user(text, usage, false).await,
                }
            }
            Input::ToolResult { tool_use_id, content } => self.on_tool_result(&tool_use_id, &content),
            Input::SessionEnd => {
                // The output ends when the client ends its input (or after a grace period).
                self.queue.clear();
                self.close_at = None;
                self.drain_until = Some(Instant::now() + SESSION_END_GRACE);
            }
        }
    }

    async fn on_audio(&mut self, pcm: &[u8]) {
        self.state.sonic.count_audio_event();
        for frame in pcm.chunks(super::audio::INPUT_FRAME_BYTES) {
            // An utterance that ended in an earlier frame may have closed the stream.
            let heard = self.out.is_some();
            self.record_frame(frame, heard);
            if !heard {
                continue;
            }
            let Some(detector) = self.detector.as_mut() else {
                continue;
            };
            match detector.push(frame) {
                Some(Detection::SpeechStarted) if self.speaking.is_some() => self.interrupt().await,
                Some(Detection::UtteranceEnded(utterance)) => self.on_utterance(utterance).await,
                _ => {}
            }
        }
    }

    fn record_frame(&self, pcm: &[u8], heard: bool) {
        let frame = FrameRecord { stream: self.stream, fingerprint: frame_fingerprint(pcm), heard };
        self.state.sonic.count_frame(frame, self.state.script.sonic.record_frames);
    }

    async fn on_utterance(&mut self, utterance: Utterance) {
        let sonic = &self.state.script.sonic;
        let index = self.state.sonic.next_utterance();
        if let Some(fault) = &sonic.faults.stream_error
            && fault.at_utterance.is_none_or(|n| n == index)
            && applies(fault.first, self.state.sonic.next_stream_error())
        {
            self.state.count_fault();
            let kind = fault.kind;
            self.fail(kind, "The model's stream failed while processing the audio (injected by the simulator script).")
                .await;
            return;
        }
        let heard = utterance
            .phrase_id
            .and_then(|id| self.state.phrase(id))
            .or_else(|| sonic.utterances.get(usize::try_from(index).unwrap_or(usize::MAX)).cloned())
            .unwrap_or_else(|| {
                utterance.phrase_id.map_or_else(|| "(inaudible)".to_owned(), |id| format!("phrase {id}"))
            });
        tracing::debug!(stream = self.stream, index, ?utterance, %heard, "utterance heard");
        let usage = Usage { input_speech: speech_tokens(utterance.voiced_ms), ..Usage::default() };
        self.answer_user(heard, usage, true).await;
    }

    async fn answer_user(&mut self, heard: String, input: Usage, spoken: bool) {
        tracing::debug!(stream = self.stream, %heard, spoken, system_bytes = self.system.len(), "answering the user");
        self.last_heard = heard.clone();
        let turn = Turn {
            model_id: self.model_id.clone(),
            system: self.system.clone(),
            latest_user_text: heard.clone(),
            trigger: Trigger::UserText(heard.clone()),
            offered_tools: self.tools.clone(),
        };
        let at = self.reply_start();
        if spoken || self.state.script.sonic.echo_text {
            self.planner().transcript(at, &heard);
        }
        self.ensure_completion(at);
        self.plan_reply(at, &turn, &input, Some(heard), spoken);
    }

    /// Asked to speak first or to say a line now (`rule`): the line is the reply.
    /// Whether the script has the model not say `line` (`sonic.faults.unsaidLines`).
    fn unsaid(&self, line: &str) -> bool {
        self.state.script.sonic.faults.unsaid_lines.iter().any(|words| line.contains(words.as_str()))
    }

    fn greet(&mut self, rule: &str, greeting: String, input: &Usage) {
        let at = self.reply_start();
        self.ensure_completion(at);
        let (stream, text) = (self.stream, Some(greeting.clone()));
        let rule = Some(rule.to_owned());
        self.state.sonic.record_reply(ReplyRecord { stream, heard: None, spoken: false, rule, text, tool: None });
        let mut total = std::mem::take(&mut self.total);
        self.planner().reply(at, Some(&greeting), None, input, &mut total);
        self.total = total;
    }

    fn on_tool_result(&mut self, tool_use_id: &str, content: &str) {
        let Some(name) = self.pending_tools.remove(tool_use_id) else {
            return;
        };
        let value = serde_json::from_str(content).unwrap_or_else(|_| Value::String(content.to_owned()));
        let status = if value.get("error").is_some() { ResultStatus::Error } else { ResultStatus::Success };
        let turn = Turn {
            model_id: self.model_id.clone(),
            system: self.system.clone(),
            latest_user_text: self.last_heard.clone(),
            trigger: Trigger::ToolResults(vec![ToolResultView { name, status, content: value }]),
            offered_tools: self.tools.clone(),
        };
        self.state.sonic.count_tool_result();
        let input = Usage { input_text: crate::tokens::estimate_tokens(content), ..Usage::default() };
        let at = self.reply_start();
        self.ensure_completion(at);
        self.plan_reply(at, &turn, &input, None, false);
    }

    /// Starts the prompt's completion at `at` unless it is open.
    fn ensure_completion(&mut self, at: Instant) {
        if !self.completion_open {
            self.completion_open = true;
            self.ids.completion_id = format!("sim-completion-{:08}", self.state.sonic.next_completion());
            self.queue.push_back(Planned { at, event: Event::Json(self.ids.completion_start()), marker: Marker::None });
        }
    }

    fn plan_reply(&mut self, at: Instant, turn: &Turn, input: &Usage, heard: Option<String>, spoken: bool) {
        let decision = decide(&self.state.script, turn);
        let tool_use_id = format!("tooluse-sim-{:08}", self.state.sonic.next_tool_use());
        let tool = decision.reply.tool_use.as_ref().map(|call| (tool_use_id.as_str(), call.name.as_str(), &call.input));
        let text = decision.reply.text.clone();
        self.state.sonic.record_reply(ReplyRecord {
            stream: self.stream,
            heard,
            spoken,
            rule: decision.rule.map(|(_, rule)| rule.name.clone()),
            text: text.clone(),
            tool: tool.map(|(_, name, _)| name.to_owned()),
        });
        let mut total = std::mem::take(&mut self.total);
        self.planner().reply(at, text.as_deref(), tool, input, &mut total);
        self.total = total;
    }

    /// `promptEnd`: what was still planned is dropped and the prompt's completion ends.
    async fn end_prompt(&mut self) {
        self.queue.clear();
        self.speaking = None;
        if std::mem::take(&mut self.completion_open) {
            let end = self.ids.completion_end("END_TURN");
            self.send_encoded([encode_event(&end)]).await;
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
