//! Errors the way the Bedrock Runtime service sends them: request-level errors as an HTTP
//! status, an `x-amzn-errortype` header and a JSON body `{"message": ...}`; errors inside
//! a reply stream as event-stream frames with `:message-type: exception`.

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::http::{Body, full_body};

/// A request-level error of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// 429 `ThrottlingException` (retryable).
    Throttling,
    /// 400 `ValidationException`.
    Validation,
    /// 403 `AccessDeniedException`.
    AccessDenied,
    /// 404 `ResourceNotFoundException`.
    ResourceNotFound,
    /// 500 `InternalServerException` (retryable).
    InternalServer,
    /// 503 `ServiceUnavailableException` (retryable).
    ServiceUnavailable,
    /// 408 `ModelTimeoutException` (retryable).
    ModelTimeout,
    /// 429 `ModelNotReadyException` (retryable).
    ModelNotReady,
    /// 424 `ModelErrorException`.
    ModelError,
    /// 403 `UnrecognizedClientException`: the credentials are not valid.
    UnrecognizedClient,
    /// 404 `UnknownOperationException`: no such path or method.
    UnknownOperation,
}

impl ErrorKind {
    /// The HTTP status the service uses.
    pub fn status(self) -> u16 {
        match self {
            Self::Throttling | Self::ModelNotReady => 429,
            Self::Validation => 400,
            Self::AccessDenied | Self::UnrecognizedClient => 403,
            Self::ResourceNotFound | Self::UnknownOperation => 404,
            Self::InternalServer => 500,
            Self::ServiceUnavailable => 503,
            Self::ModelTimeout => 408,
            Self::ModelError => 424,
        }
    }

    /// The error type name, as sent in `x-amzn-errortype`.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Throttling => "ThrottlingException",
            Self::Validation => "ValidationException",
            Self::AccessDenied => "AccessDeniedException",
            Self::ResourceNotFound => "ResourceNotFoundException",
            Self::InternalServer => "InternalServerException",
            Self::ServiceUnavailable => "ServiceUnavailableException",
            Self::ModelTimeout => "ModelTimeoutException",
            Self::ModelNotReady => "ModelNotReadyException",
            Self::ModelError => "ModelErrorException",
            Self::UnrecognizedClient => "UnrecognizedClientException",
            Self::UnknownOperation => "UnknownOperationException",
        }
    }

    /// A message like the service's for this error.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::Throttling => "Too many requests, please wait before trying again.",
            Self::Validation => "The request is not valid.",
            Self::AccessDenied => "You don't have access to the model with the specified model ID.",
            Self::ResourceNotFound => "The requested model was not found.",
            Self::InternalServer => {
                "The system encountered an unexpected error during processing. Try your request again."
            }
            Self::ServiceUnavailable => "The service is unavailable. Try again later.",
            Self::ModelTimeout => "Model has timed out in processing the request. Try your request again.",
            Self::ModelNotReady => "Model is not ready to serve inference requests. Try again later.",
            Self::ModelError => "The model encountered an error processing the input.",
            Self::UnrecognizedClient => "The security token included in the request is invalid.",
            Self::UnknownOperation => "The requested operation is not supported by this endpoint.",
        }
    }
}

/// A request-level error response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceError {
    /// Which error.
    pub kind: ErrorKind,
    /// Its message.
    pub message: String,
}

impl ServiceError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// A `ValidationException`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, message)
    }

    /// The HTTP response: status, `x-amzn-errortype`, JSON body.
    pub fn into_response(self, request_id: &str) -> http::Response<Body> {
        let body = serde_json::json!({ "message": self.message }).to_string();
        http::Response::builder()
            .status(self.kind.status())
            .header("content-type", "application/json")
            .header(
                "x-amzn-errortype",
                format!("{}:http://internal.amazon.com/coral/com.amazon.bedrock/", self.kind.type_name()),
            )
            .header("x-amzn-requestid", request_id)
            .body(full_body(Bytes::from(body)))
            .unwrap_or_else(|_| http::Response::new(full_body(Bytes::from_static(b"{}"))))
    }
}

/// An exception sent inside a reply stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamExceptionKind {
    /// `modelStreamErrorException`: the model's stream failed.
    #[default]
    ModelStreamError,
    /// `internalServerException`.
    InternalServer,
    /// `throttlingException`.
    Throttling,
    /// `serviceUnavailableException`.
    ServiceUnavailable,
    /// `validationException`.
    Validation,
}

impl StreamExceptionKind {
    /// The `:exception-type` header value.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::ModelStreamError => "modelStreamErrorException",
            Self::InternalServer => "internalServerException",
            Self::Throttling => "throttlingException",
            Self::ServiceUnavailable => "serviceUnavailableException",
            Self::Validation => "validationException",
        }
    }

    /// The exception's event-stream message.
    pub fn message(self, text: &str) -> Message {
        let mut payload = serde_json::json!({ "message": text });
        if self == Self::ModelStreamError {
            payload["originalStatusCode"] = serde_json::json!(500);
            payload["originalMessage"] = serde_json::json!(text);
        }
        Message::new(Bytes::from(payload.to_string()))
            .add_header(Header::new(":message-type", HeaderValue::String("exception".into())))
            .add_header(Header::new(":exception-type", HeaderValue::String(self.type_name().into())))
            .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())))
    }
}
