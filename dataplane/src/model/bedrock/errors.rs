//! Classification of the Bedrock SDK's errors into [`ModelError`]: modelled service
//! exceptions by type, unmodelled ones by error code and HTTP status, and transport
//! failures by kind.

use std::error::Error as StdError;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;

use crate::model::ModelError;

/// Maps the error of starting a ConverseStream call.
pub fn from_start_error(error: SdkError<ConverseStreamError, HttpResponse>, model_id: &str) -> ModelError {
    if let Some(credentials) = find_credentials_error(&error) {
        return ModelError::Credentials { message: credentials };
    }
    match error {
        SdkError::ServiceError(context) => {
            let status = Some(context.raw().status().as_u16());
            from_start_exception(context.into_err(), model_id, status)
        }
        other => from_transport(&other),
    }
}

/// Maps an error that arrived while the reply was streaming.
pub fn from_stream_error<R: std::fmt::Debug>(error: SdkError<ConverseStreamOutputError, R>) -> ModelError {
    match error {
        SdkError::ServiceError(context) => {
            let exception = context.into_err();
            let message = message_of(&exception);
            match exception {
                ConverseStreamOutputError::ThrottlingException(_) => ModelError::Throttled { message },
                ConverseStreamOutputError::ValidationException(_) => ModelError::Validation { message },
                ConverseStreamOutputError::InternalServerException(_) => {
                    ModelError::ServiceUnavailable { code: "InternalServerException".into(), message }
                }
                ConverseStreamOutputError::ServiceUnavailableException(_) => {
                    ModelError::ServiceUnavailable { code: "ServiceUnavailableException".into(), message }
                }
                ConverseStreamOutputError::ModelStreamErrorException(_) => {
                    ModelError::StreamInterrupted { message: format!("ModelStreamErrorException: {message}") }
                }
                other => ModelError::StreamInterrupted {
                    message: format!("{}: {message}", other.code().unwrap_or("unknown exception")),
                },
            }
        }
        other => match from_transport(&other) {
            ModelError::Protocol { message } | ModelError::Connection { message } => {
                ModelError::StreamInterrupted { message }
            }
            classified => classified,
        },
    }
}

fn from_start_exception(exception: ConverseStreamError, model_id: &str, status: Option<u16>) -> ModelError {
    let message = message_of(&exception);
    let code = exception.code().unwrap_or_default().to_owned();
    match exception {
        ConverseStreamError::ThrottlingException(_) => ModelError::Throttled { message },
        ConverseStreamError::AccessDeniedException(_) => ModelError::AccessDenied { message },
        ConverseStreamError::ValidationException(_) => ModelError::Validation { message },
        ConverseStreamError::ResourceNotFoundException(_) => {
            ModelError::ModelNotFound { model_id: model_id.to_owned(), message }
        }
        ConverseStreamError::ModelTimeoutException(_) => ModelError::Timeout { message },
        ConverseStreamError::InternalServerException(_)
        | ConverseStreamError::ServiceUnavailableException(_)
        | ConverseStreamError::ModelNotReadyException(_) => ModelError::ServiceUnavailable { code, message },
        ConverseStreamError::ModelStreamErrorException(_) => {
            ModelError::StreamInterrupted { message: format!("ModelStreamErrorException: {message}") }
        }
        // A model-side failure processing this input (HTTP 424): retrying sends the same
        // input to the same model.
        ConverseStreamError::ModelErrorException(_) => ModelError::Validation { message },
        _ => from_unmodelled(&code, message, status),
    }
}

/// Errors the SDK has no type for, classified by their code, then HTTP status.
fn from_unmodelled(code: &str, message: String, status: Option<u16>) -> ModelError {
    let message = if code.is_empty() { message } else { format!("{code}: {message}") };
    match code {
        "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "ExpiredTokenException"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "InvalidClientTokenId" => {
            return ModelError::Credentials { message };
        }
        _ => {}
    }
    match status {
        Some(429) => ModelError::Throttled { message },
        Some(401) => ModelError::Credentials { message },
        Some(403) => ModelError::AccessDenied { message },
        Some(404) => ModelError::ModelNotFound { model_id: String::new(), message },
        Some(400..=499) => ModelError::Validation { message },
        Some(status @ 500..=599) => ModelError::ServiceUnavailable { code: format!("HTTP {status}"), message },
        _ => ModelError::Protocol { message },
    }
}

/// Classifies a failure that happened before or outside the service's answer (timeouts,
/// connection, construction), shared by every Bedrock operation.
pub(crate) fn from_transport<E, R>(error: &SdkError<E, R>) -> ModelError
where
    E: StdError + 'static,
    R: std::fmt::Debug,
{
    let message = DisplayErrorContext(error).to_string();
    match error {
        SdkError::TimeoutError(_) => ModelError::Timeout { message },
        SdkError::DispatchFailure(failure) if failure.is_timeout() => ModelError::Timeout { message },
        SdkError::DispatchFailure(failure) if failure.is_user() => ModelError::Config { message },
        SdkError::DispatchFailure(_) => ModelError::Connection { message },
        SdkError::ConstructionFailure(_) => ModelError::Config { message },
        SdkError::ResponseError(_) => ModelError::Protocol { message },
        _ => ModelError::Protocol { message },
    }
}

pub(crate) fn message_of(error: &impl ProvideErrorMetadata) -> String {
    error.message().unwrap_or("no message given").to_owned()
}

/// The message of a credentials failure anywhere in the error's source chain.
pub(crate) fn find_credentials_error(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(credentials) = e.downcast_ref::<CredentialsError>() {
            return Some(DisplayErrorContext(credentials).to_string());
        }
        current = e.source();
    }
    None
}
