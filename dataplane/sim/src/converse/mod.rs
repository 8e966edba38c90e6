//! The Converse and ConverseStream operations: validate the request, apply the script's
//! faults, let the rule engine pick the reply, and send it — as a paced
//! `application/vnd.amazon.eventstream` body for ConverseStream, or as one JSON document
//! for Converse (where stream cuts do not apply).

pub mod pace;
mod plan;
mod wire;

use std::time::Duration;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::engine::decide;
use super::http::{Body, BodyError, full_body};
use super::script::{CutFault, ErrorFault};
use super::service_error::{ErrorKind, ServiceError};
use super::state::{Operation, SimState, applies};
pub use plan::{Action, Plan, PlanInput, Planned, plan};
pub use wire::{ParsedRequest, parse};

/// Bedrock's answer to a request beyond the model's context window (`contextWindow`).
pub const CONTEXT_TOO_LONG: &str = "Input is too long for requested model.";

/// Pause between the last frame and a scripted connection drop.
const DROP_FLUSH_GRACE: Duration = Duration::from_millis(100);

/// Answers one Converse or ConverseStream request that fully arrived at `received`; the
/// scripted timing (extra latency, time to first token, token rate) counts from then.
pub async fn handle(
    operation: Operation,
    model_id: &str,
    body: &[u8],
    state: &SimState,
    kill: &CancellationToken,
    request_id: &str,
    received: tokio::time::Instant,
) -> http::Response<Body> {
    match prepare(operation, model_id, body, state, received).await {
        Ok(prepared) => match operation {
            Operation::ConverseStream => {
                stream_response(prepared.plan, received + prepared.extra_latency, kill.clone(), request_id)
            }
            Operation::Converse => {
                pace::sleep_until(received + prepared.extra_latency + prepared.plan.duration).await;
                json_response(&prepared, request_id)
            }
            Operation::InvokeModelWithBidirectionalStream => {
                ServiceError::new(ErrorKind::UnknownOperation, "not a Converse operation").into_response(request_id)
            }
        },
        Err(error) => {
            tracing::info!(?operation, model_id, error = error.kind.type_name(), message = %error.message, "request refused");
            error.into_response(request_id)
        }
    }
}

struct Prepared {
    plan: Plan,
    input_tokens: u64,
    extra_latency: Duration,
}

async fn prepare(
    operation: Operation,
    model_id: &str,
    body: &[u8],
    state: &SimState,
    received: tokio::time::Instant,
) -> Result<Prepared, ServiceError> {
    let script = &state.script;
    let request = parse(model_id, body)?;
    if !script.known_models.is_empty() && !script.known_models.iter().any(|m| m == model_id) {
        return Err(ServiceError::new(
            ErrorKind::ResourceNotFound,
            format!("Model {model_id} was not found. Check the model id and the region."),
        ));
    }
    if let Some(window) = script.context_window.filter(|w| request.input_tokens > *w) {
        tracing::info!(model_id, input_tokens = request.input_tokens, window, "input beyond the context window");
        return Err(ServiceError::new(ErrorKind::Validation, CONTEXT_TOO_LONG));
    }
    let call = state.next_model_call();
    injected_error(script.faults.error.as_ref(), call, state)?;
    let decision = decide(script, &request.turn);
    let (rule_faults, rule_match, timing) = match decision.rule {
        Some((index, rule)) => (Some(&rule.faults), state.next_rule_match(index), rule.timing.as_ref()),
        None => (None, 0, None),
    };
    if let Some(faults) = rule_faults {
        injected_error(faults.error.as_ref(), rule_match, state)?;
    }
    let extra_latency =
        Duration::from_millis(script.faults.extra_latency_ms + rule_faults.map_or(0, |f| f.extra_latency_ms));
    pace::sleep_until(received + extra_latency).await;
    let cut = select_cut(rule_faults.and_then(|f| f.cut.as_ref()), rule_match)
        .or_else(|| select_cut(script.faults.cut.as_ref(), call))
        .filter(|_| operation == Operation::ConverseStream);
    if cut.is_some() {
        state.count_fault();
    }
    let plan = plan(&PlanInput {
        reply: &decision.reply,
        tool_use_id: format!("tooluse_sim{call:08}"),
        input_tokens: request.input_tokens,
        max_tokens: request.max_tokens,
        timing: timing.unwrap_or(&script.timing),
        cut,
        extra_latency,
    });
    tracing::info!(
        ?operation,
        model_id,
        rule = decision.rule.map_or("default", |(_, r)| r.name.as_str()),
        stop_reason = plan.stop_reason,
        input_tokens = request.input_tokens,
        output_tokens = plan.output_tokens,
        cut = cut.is_some(),
        "answering"
    );
    Ok(Prepared { plan, input_tokens: request.input_tokens, extra_latency })
}

fn injected_error(fault: Option<&ErrorFault>, index: u64, state: &SimState) -> Result<(), ServiceError> {
    match fault {
        Some(fault) if applies(fault.first, index) => {
            state.count_fault();
            let message = fault.message.clone().unwrap_or_else(|| fault.kind.default_message().to_owned());
            Err(ServiceError::new(fault.kind, message))
        }
        _ => Ok(()),
    }
}

fn select_cut(cut: Option<&CutFault>, index: u64) -> Option<&CutFault> {
    cut.filter(|c| applies(c.first, index))
}

fn stream_response(
    plan: Plan,
    start: tokio::time::Instant,
    kill: CancellationToken,
    request_id: &str,
) -> http::Response<Body> {
    let frames = plan.frames.into_iter();
    let paced = (frames, kill, pace::Pacer::new());
    let stream = futures_util::stream::unfold(paced, move |(mut frames, kill, mut pacer)| async move {
        let planned = frames.next()?;
        pacer.sleep_until(start + planned.at).await;
        let item = match planned.action {
            Action::Event { event_type, payload } => encode(&event_message(event_type, &payload)),
            Action::Exception(kind, text) => encode(&kind.message(&text)),
            Action::Drop => {
                // Let the frames already produced reach the socket, so the client
                // sees exactly the planned tokens before the connection goes.
                tokio::time::sleep(DROP_FLUSH_GRACE).await;
                kill.cancel();
                Err(BodyError("the connection was dropped as scripted".into()))
            }
        };
        Some((item, (frames, kill, pacer)))
    });
    http::Response::builder()
        .status(200)
        .header("content-type", "application/vnd.amazon.eventstream")
        .header("x-amzn-requestid", request_id)
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap_or_else(|_| http::Response::new(full_body(Bytes::new())))
}

fn event_message(event_type: &'static str, payload: &serde_json::Value) -> Message {
    // `to_vec` writes the same text as `to_string` without the formatter machinery (4 % of
    // the simulator's CPU under load); it cannot fail on a `Value`.
    Message::new(Bytes::from(serde_json::to_vec(payload).unwrap_or_default()))
        .add_header(Header::new(":event-type", HeaderValue::String(event_type.into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())))
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
}

fn encode(message: &Message) -> Result<Frame<Bytes>, BodyError> {
    let mut buffer = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(message, &mut buffer)
        .map_err(|e| BodyError(format!("cannot encode an event-stream message: {e}")))?;
    Ok(Frame::data(Bytes::from(buffer)))
}

fn json_response(prepared: &Prepared, request_id: &str) -> http::Response<Body> {
    let plan = &prepared.plan;
    let latency = prepared.extra_latency + plan.duration;
    let body = json!({
        "output": { "message": { "role": "assistant", "content": plan.content } },
        "stopReason": plan.stop_reason,
        "usage": {
            "inputTokens": prepared.input_tokens,
            "outputTokens": plan.output_tokens,
            "totalTokens": prepared.input_tokens + plan.output_tokens,
        },
        "metrics": { "latencyMs": u64::try_from(latency.as_millis()).unwrap_or(u64::MAX) },
    });
    http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("x-amzn-requestid", request_id)
        .body(full_body(Bytes::from(body.to_string())))
        .unwrap_or_else(|_| http::Response::new(full_body(Bytes::new())))
}
