//! Classification of the SDK's errors of the bidirectional operation into
//! [`ModelError`]: retryable (throttling, service failures, broken streams, timeouts,
//! connection failures) or fatal (credentials, access, unknown model, invalid input).

use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::invoke_model_with_bidirectional_stream::InvokeModelWithBidirectionalStreamError as StartError;
use aws_sdk_bedrockruntime::types::error::InvokeModelWithBidirectionalStreamOutputError as OutputError;

use crate::model::ModelError;
use crate::model::bedrock::errors::{find_credentials_error, from_transport, message_of};

/// Maps the error of opening a stream (`send()`).
pub fn from_start_error<R: std::fmt::Debug + Send + Sync + 'static>(
    error: SdkError<StartError, R>,
    model_id: &str,
) -> ModelError {
    if let Some(message) = find_credentials_error(&error) {
        return ModelError::Credentials { message };
    }
    match error {
        SdkError::ServiceError(context) => {
            let exception = context.into_err();
            let message = message_of(&exception);
            let code = exception.code().unwrap_or_default().to_owned();
            match exception {
                StartError::ThrottlingException(_) | StartError::ServiceQuotaExceededException(_) => {
                    ModelError::Throttled { message }
                }
                StartError::AccessDeniedException(_) => ModelError::AccessDenied { message },
                StartError::ValidationException(_) | StartError::ModelErrorException(_) => {
                    ModelError::Validation { message }
                }
                StartError::ResourceNotFoundException(_) => {
                    ModelError::ModelNotFound { model_id: model_id.to_owned(), message }
                }
                StartError::ModelTimeoutException(_) => ModelError::Timeout { message },
                StartError::InternalServerException(_)
                | StartError::ServiceUnavailableException(_)
                | StartError::ModelNotReadyException(_) => ModelError::ServiceUnavailable { code, message },
                StartError::ModelStreamErrorException(_) => {
                    ModelError::StreamInterrupted { message: format!("ModelStreamErrorException: {message}") }
                }
                _ => from_code(&code, message),
            }
        }
        other => from_transport(&other),
    }
}

/// Maps an error that arrived on an open stream.
pub fn from_stream_error<R: std::fmt::Debug>(error: SdkError<OutputError, R>) -> ModelError {
    match error {
        SdkError::ServiceError(context) => {
            let exception = context.into_err();
            let message = message_of(&exception);
            match exception {
                OutputError::ThrottlingException(_) => ModelError::Throttled { message },
                OutputError::ValidationException(_) => ModelError::Validation { message },
                OutputError::InternalServerException(_) => {
                    ModelError::ServiceUnavailable { code: "InternalServerException".into(), message }
                }
                OutputError::ServiceUnavailableException(_) => {
                    ModelError::ServiceUnavailable { code: "ServiceUnavailableException".into(), message }
                }
                OutputError::ModelTimeoutException(_) => ModelError::Timeout { message },
                OutputError::ModelStreamErrorException(_) => {
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

fn from_code(code: &str, message: String) -> ModelError {
    let message = if code.is_empty() { message } else { format!("{code}: {message}") };
    match code {
        "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "ExpiredTokenException"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "InvalidClientTokenId" => ModelError::Credentials { message },
        _ => ModelError::Protocol { message },
    }
}
