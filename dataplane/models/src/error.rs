//! The errors of a text-model call, classified as retryable (worth trying again: the
//! service was busy, broke, or the connection failed) or not (the request or the setup is
//! wrong and will fail the same way again).

use switchboard_core::protocol::ErrorCode;

/// A failed text-model call.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The provider is rate-limiting this account or model.
    #[error(
        "the model service is throttling requests: {message}; retry later, or raise the account's quota for this model"
    )]
    Throttled {
        /// The provider's explanation.
        message: String,
    },
    /// The provider failed or is temporarily unavailable (HTTP 5xx, model not ready).
    #[error("the model service failed ({code}): {message}; this is usually temporary, retry")]
    ServiceUnavailable {
        /// The provider's error code, e.g. `InternalServerException` or `HTTP 503`.
        code: String,
        /// The provider's explanation.
        message: String,
    },
    /// The reply stream broke (connection dropped, in-stream error, ended early).
    #[error("the model's reply stream was interrupted: {message}; retry the turn")]
    StreamInterrupted {
        /// What happened.
        message: String,
    },
    /// A connection or read timed out.
    #[error("the model call timed out: {message}; check the endpoint's reachability or raise the timeout")]
    Timeout {
        /// What timed out.
        message: String,
    },
    /// The model endpoint could not be reached (DNS, connect, TLS handshake, I/O).
    #[error("could not reach the model endpoint: {message}; check the endpoint URL and network")]
    Connection {
        /// What failed.
        message: String,
    },
    /// The credentials are not allowed to call this model.
    #[error(
        "access to the model was denied: {message}; grant bedrock:InvokeModelWithResponseStream for this model to the pod's role or credentials, and enable model access in the Bedrock console"
    )]
    AccessDenied {
        /// The provider's explanation.
        message: String,
    },
    /// The provider refused the request as invalid.
    #[error("the model refused the request as invalid: {message}")]
    Validation {
        /// The provider's explanation.
        message: String,
    },
    /// The model id is unknown to the provider (or not available in the region).
    #[error("model {model_id:?} was not found: {message}; check the model id and region")]
    ModelNotFound {
        /// The model id asked for.
        model_id: String,
        /// The provider's explanation.
        message: String,
    },
    /// No usable credentials, or the provider rejected them.
    #[error(
        "the model service rejected or could not find credentials: {message}; configure credentials (a Secret or the pod's service account)"
    )]
    Credentials {
        /// What failed.
        message: String,
    },
    /// The model produced a tool call whose input is not valid JSON.
    #[error("the model's call of tool {tool:?} has input that is not valid JSON: {message}")]
    InvalidToolInput {
        /// The tool called.
        tool: String,
        /// The parse error.
        message: String,
    },
    /// The client could not be set up (bad endpoint, unreadable CA file, ...).
    #[error("the model client is misconfigured: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// The provider sent something this client does not understand.
    #[error("the model service sent an unexpected response: {message}")]
    Protocol {
        /// What was unexpected.
        message: String,
    },
}

impl ModelError {
    /// Whether the same request may succeed if sent again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Throttled { .. }
            | Self::ServiceUnavailable { .. }
            | Self::StreamInterrupted { .. }
            | Self::Timeout { .. }
            | Self::Connection { .. } => true,
            Self::AccessDenied { .. }
            | Self::Validation { .. }
            | Self::ModelNotFound { .. }
            | Self::Credentials { .. }
            | Self::InvalidToolInput { .. }
            | Self::Config { .. }
            | Self::Protocol { .. } => false,
        }
    }

    /// Whether another model (a fallback, or the same model in another region) may serve
    /// the request the failed one could not: the service throttled it or was unavailable,
    /// or the endpoint could not be reached in time. Never for an invalid request, denied
    /// access or an unknown model (the same request fails the same way elsewhere), nor for
    /// a stream that broke mid-reply.
    pub fn calls_for_fallback(&self) -> bool {
        matches!(
            self,
            Self::Throttled { .. } | Self::ServiceUnavailable { .. } | Self::Timeout { .. } | Self::Connection { .. }
        )
    }

    /// Whether the provider refused the request because its input is longer than the
    /// model's context window: Bedrock answers with a `ValidationException` saying so
    /// ("Input is too long for requested model.", "too many input tokens", "prompt is too
    /// long", "context window" ...). A shorter conversation may succeed.
    pub fn is_context_too_long(&self) -> bool {
        const PHRASES: &[&str] = &[
            "input is too long",
            "too many input tokens",
            "input tokens exceed",
            "prompt is too long",
            "context window",
            "context length",
            "maximum context",
        ];
        match self {
            Self::Validation { message } => {
                let message = message.to_ascii_lowercase();
                PHRASES.iter().any(|phrase| message.contains(phrase))
            }
            _ => false,
        }
    }

    /// The `bidi_error` code of a voice session that ends on this error (`model_<label>`).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Throttled { .. } => ErrorCode::ModelThrottled,
            Self::ServiceUnavailable { .. } => ErrorCode::ModelServiceUnavailable,
            Self::StreamInterrupted { .. } => ErrorCode::ModelStreamInterrupted,
            Self::Timeout { .. } => ErrorCode::ModelTimeout,
            Self::Connection { .. } => ErrorCode::ModelConnection,
            Self::AccessDenied { .. } => ErrorCode::ModelAccessDenied,
            Self::Validation { .. } => ErrorCode::ModelValidation,
            Self::ModelNotFound { .. } => ErrorCode::ModelModelNotFound,
            Self::Credentials { .. } => ErrorCode::ModelCredentials,
            Self::InvalidToolInput { .. } => ErrorCode::ModelInvalidToolInput,
            Self::Config { .. } => ErrorCode::ModelConfig,
            Self::Protocol { .. } => ErrorCode::ModelProtocol,
        }
    }

    /// A short, bounded label for metrics (`model_errors_total{type=...}`) and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Throttled { .. } => "throttled",
            Self::ServiceUnavailable { .. } => "service_unavailable",
            Self::StreamInterrupted { .. } => "stream_interrupted",
            Self::Timeout { .. } => "timeout",
            Self::Connection { .. } => "connection",
            Self::AccessDenied { .. } => "access_denied",
            Self::Validation { .. } => "validation",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::Credentials { .. } => "credentials",
            Self::InvalidToolInput { .. } => "invalid_tool_input",
            Self::Config { .. } => "config",
            Self::Protocol { .. } => "protocol",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_length_refusal_is_told_from_other_invalid_requests() {
        let validation = |message: &str| ModelError::Validation { message: message.into() };
        for message in [
            "Input is too long for requested model.",
            "The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum",
            "Too many input tokens. Max input tokens: 300000, request input token count: 301234",
            "This model's maximum context length is 128000 tokens",
        ] {
            assert!(validation(message).is_context_too_long(), "{message}");
        }
        assert!(!validation("Malformed input request: extraneous key [foo]").is_context_too_long());
        assert!(!ModelError::Throttled { message: "Input is too long".into() }.is_context_too_long());
    }

    #[test]
    fn a_voice_failure_is_coded_model_and_its_label_as_before() {
        let m = || String::from("m");
        for error in [
            ModelError::Throttled { message: m() },
            ModelError::ServiceUnavailable { code: m(), message: m() },
            ModelError::StreamInterrupted { message: m() },
            ModelError::Timeout { message: m() },
            ModelError::Connection { message: m() },
            ModelError::AccessDenied { message: m() },
            ModelError::Validation { message: m() },
            ModelError::ModelNotFound { model_id: m(), message: m() },
            ModelError::Credentials { message: m() },
            ModelError::InvalidToolInput { tool: m(), message: m() },
            ModelError::Config { message: m() },
            ModelError::Protocol { message: m() },
        ] {
            assert_eq!(error.code().as_str(), format!("model_{}", error.metric_label()), "{error:?}");
        }
    }
}
