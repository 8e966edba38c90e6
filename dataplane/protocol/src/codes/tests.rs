use std::collections::HashSet;

use serde_json::json;

use super::*;

/// Every error code as it was written on the wire before the catalogue.
const ERROR_CODES: &[&str] = &[
    "invalid_json",
    "unknown_type",
    "malformed_message",
    "already_started",
    "unsupported_modality",
    "unsupported_frame",
    "invalid_voice",
    "model_not_allowed",
    "invalid_audio_base64",
    "invalid_audio_length",
    "empty_audio",
    "audio_too_large",
    "empty_text",
    "invalid_dtmf",
    "dtmf_rate",
    "busy",
    "no_consent_pending",
    "no_client_tool_pending",
    "no_transfer_pending",
    "no_digits_pending",
    "session_over",
    "identity_refused",
    "model_error",
    "empty_reply",
    "tool_rounds_exceeded",
    "model_throttled",
    "model_service_unavailable",
    "model_stream_interrupted",
    "model_timeout",
    "model_connection",
    "model_access_denied",
    "model_validation",
    "model_model_not_found",
    "model_credentials",
    "model_invalid_tool_input",
    "model_config",
    "model_protocol",
    "context_refused",
    "origin",
    "missing_key",
    "invalid_token",
    "app_context_invalid",
    "app_context_expired",
    "app_context_replayed",
    "app_context_too_large",
    "app_context_not_accepted",
    "app_context_wrong_subject",
    "unknown_key",
    "key_sessions",
    "key_rate",
    "agent_not_allowed",
    "candidate_not_allowed",
    "no_default",
    "unknown_agent",
    "ambiguous_agent",
    "not_exposed",
    "no_ready_pod",
    "handoff_not_allowed",
    "session_rate",
    "idle_timeout",
    "memory_budget",
    "at_capacity",
    "capacity_full",
    "no_runtime",
    "agent_removed",
    "handoff_failed",
    "replay_gap",
    "session_restored",
    "session_attached",
    "resume_refused",
    "store_unavailable",
    "nothing_to_cancel",
    "unknown_setting",
    "consent_unclear",
    "unsupported_audio_format",
    "fixed_setting",
];

/// Every stop reason as it was written on the wire before the catalogue.
const STOP_REASONS: &[&str] = &[
    "end_turn",
    "tool_use",
    "max_tokens",
    "handoff",
    "interrupted",
    "partial_turn",
    "empty_reply",
    "error",
    "tool_rounds_exceeded",
    "cancelled",
];

/// Each variant's JSON is its old string, it reads back as itself, and the names are
/// the old strings, one each.
fn same_wire<T>(all: &[T], names: &[&str])
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug + fmt::Display + for<'a> From<&'a str>,
{
    assert_eq!(all.len(), names.len(), "one old string per variant");
    for (variant, name) in all.iter().zip(names) {
        let value = serde_json::to_value(variant).expect("serialises");
        assert_eq!(value, json!(name), "{variant:?} on the wire");
        assert_eq!(variant.to_string(), *name);
        assert_eq!(serde_json::from_value::<T>(value).expect("reads back"), *variant);
        assert_eq!(T::from(name), *variant);
    }
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len(), "no name twice");
}

#[test]
fn every_error_code_is_on_the_wire_the_string_it_was() {
    same_wire(ErrorCode::ALL, ERROR_CODES);
    assert!(ErrorCode::ALL.iter().all(|code| code.metric_label() == code.as_str()));
}

#[test]
fn every_stop_reason_is_on_the_wire_the_string_it_was() {
    same_wire(StopReason::ALL, STOP_REASONS);
}

#[test]
fn a_name_a_newer_peer_sends_reads_and_writes_as_it_came() {
    let code: ErrorCode = serde_json::from_value(json!("quota_exceeded")).expect("an unknown code reads");
    assert_eq!(code, ErrorCode::Other("quota_exceeded".into()));
    assert_eq!(serde_json::to_value(&code).expect("writes"), json!("quota_exceeded"));
    assert_eq!((code.as_str(), code.metric_label()), ("quota_exceeded", "other"));
    assert_eq!(ErrorCode::from("busy"), ErrorCode::Busy, "a known name is never Other");
    let reason: StopReason = serde_json::from_value(json!("guardrail_intervened")).expect("reads");
    assert_eq!(reason, "guardrail_intervened");
    assert!(ErrorCode::Busy == "busy" && ErrorCode::Busy != "empty_text", "compared by name");
}
