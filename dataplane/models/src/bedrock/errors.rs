//! One classification of Amazon Bedrock's errors into [`ModelError`], for every operation
//! the clients call: ConverseStream ([`super`]) and Nova Sonic's bidirectional stream
//! ([`crate::sonic`]). Both operations' exceptions — modelled by the SDK or not — carry the
//! service's error code (`x-amzn-errortype` on a request, `:exception-type` in a stream), so
//! one table keyed by that code decides, then the HTTP status for codes it does not know;
//! failures outside the service's answer are classified by their kind.

use std::error::Error as StdError;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::types::error::{ConverseStreamOutputError, InvokeModelWithBidirectionalStreamOutputError};

use crate::ModelError;

/// Maps the error of starting a call (ConverseStream's or the bidirectional stream's
/// `send()`).
pub fn from_start_error<E>(error: SdkError<E, HttpResponse>, model_id: &str) -> ModelError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    if let Some(message) = find_credentials_error(&error) {
        return ModelError::Credentials { message };
    }
    match error {
        SdkError::ServiceError(context) => {
            let status = Some(context.raw().status().as_u16());
            let exception = context.into_err();
            from_exception(exception.code().unwrap_or_default(), message_of(&exception), status, model_id)
        }
        other => from_transport(&other),
    }
}

/// An exception that arrives inside a reply stream. The SDK leaves the error metadata's
/// code empty for exceptions it decodes from an event stream, so the variant names it.
pub trait StreamException: ProvideErrorMetadata + StdError + Send + Sync + 'static {
    /// The service's error code (`ThrottlingException`, ...), if the SDK models it.
    fn exception_code(&self) -> Option<&'static str>;
}

/// Implements [`StreamException`] for an SDK stream-error enum from its modelled variants.
macro_rules! stream_exception_codes {
    ($error:ty: $($variant:ident),+) => {
        impl StreamException for $error {
            fn exception_code(&self) -> Option<&'static str> {
                match self {
                    $(Self::$variant(_) => Some(stringify!($variant)),)+
                    _ => None,
                }
            }
        }
    };
}

stream_exception_codes!(ConverseStreamOutputError:
    InternalServerException, ModelStreamErrorException, ValidationException, ThrottlingException,
    ServiceUnavailableException);
stream_exception_codes!(InvokeModelWithBidirectionalStreamOutputError:
    InternalServerException, ModelStreamErrorException, ValidationException, ThrottlingException,
    ModelTimeoutException, ServiceUnavailableException);

/// Maps an error that arrived on an open reply stream. Whatever is not a known, more
/// specific failure counts as an interrupted stream (retryable): the call was accepted.
pub fn from_stream_error<E, R>(error: SdkError<E, R>) -> ModelError
where
    E: StreamException,
    R: std::fmt::Debug,
{
    let classified = match error {
        SdkError::ServiceError(context) => {
            let exception = context.into_err();
            let code = exception.exception_code().or(exception.code()).unwrap_or("unknown exception").to_owned();
            from_exception(&code, message_of(&exception), None, "")
        }
        other => from_transport(&other),
    };
    match classified {
        ModelError::Protocol { message } | ModelError::Connection { message } => {
            ModelError::StreamInterrupted { message }
        }
        classified => classified,
    }
}

/// The one table: a service exception by its error code, then by the HTTP status (`None`
/// inside a stream). Codes of modelled exceptions keep the service's message as it is;
/// others are prefixed with their code, so the log says what the service answered.
pub fn from_exception(code: &str, message: String, status: Option<u16>, model_id: &str) -> ModelError {
    let model_not_found = |message| ModelError::ModelNotFound { model_id: model_id.to_owned(), message };
    match code {
        "ThrottlingException" | "ServiceQuotaExceededException" => ModelError::Throttled { message },
        "AccessDeniedException" => ModelError::AccessDenied { message },
        // ModelErrorException (HTTP 424) is a model-side failure on this input: retrying
        // sends the same input to the same model.
        "ValidationException" | "ModelErrorException" => ModelError::Validation { message },
        "ResourceNotFoundException" => model_not_found(message),
        "ModelTimeoutException" => ModelError::Timeout { message },
        "InternalServerException" | "ServiceUnavailableException" | "ModelNotReadyException" => {
            ModelError::ServiceUnavailable { code: code.to_owned(), message }
        }
        "ModelStreamErrorException" => ModelError::StreamInterrupted { message: format!("{code}: {message}") },
        "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "ExpiredTokenException"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "InvalidClientTokenId" => ModelError::Credentials { message: format!("{code}: {message}") },
        _ => {
            let message = if code.is_empty() { message } else { format!("{code}: {message}") };
            match status {
                Some(429) => ModelError::Throttled { message },
                Some(401) => ModelError::Credentials { message },
                Some(403) => ModelError::AccessDenied { message },
                Some(404) => model_not_found(message),
                Some(400..=499) => ModelError::Validation { message },
                Some(status @ 500..=599) => ModelError::ServiceUnavailable { code: format!("HTTP {status}"), message },
                _ => ModelError::Protocol { message },
            }
        }
    }
}

/// Classifies a failure that happened before or outside the service's answer (timeouts,
/// connection, construction), shared by every Bedrock operation.
fn from_transport<E, R>(error: &SdkError<E, R>) -> ModelError
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

fn message_of(error: &impl ProvideErrorMetadata) -> String {
    error.message().unwrap_or("no message given").to_owned()
}

/// The message of a credentials failure anywhere in the error's source chain.
fn find_credentials_error(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(credentials) = e.downcast_ref::<CredentialsError>() {
            return Some(DisplayErrorContext(credentials).to_string());
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retryable(error: &ModelError) -> bool {
        error.is_retryable()
    }

    #[test]
    fn unmodelled_codes_fall_back_to_the_http_status() {
        let throttled = from_exception("SlowDownException", "busy".into(), Some(429), "m");
        assert!(matches!(&throttled, ModelError::Throttled { message } if message == "SlowDownException: busy"));
        assert!(retryable(&throttled));
        let failed = from_exception("", "gateway".into(), Some(502), "m");
        assert!(matches!(&failed, ModelError::ServiceUnavailable { code, .. } if code == "HTTP 502"));
        assert!(retryable(&failed));
        let not_found = from_exception("", "no".into(), Some(404), "amazon.nova-2-sonic-v1:0");
        assert!(
            matches!(not_found, ModelError::ModelNotFound { model_id, .. } if model_id == "amazon.nova-2-sonic-v1:0")
        );
        assert!(matches!(from_exception("Odd", "x".into(), Some(418), "m"), ModelError::Validation { .. }));
        assert!(matches!(from_exception("Odd", "x".into(), None, "m"), ModelError::Protocol { .. }));
    }

    #[test]
    fn modelled_codes_decide_before_the_status() {
        let cases = [
            ("ThrottlingException", true),
            ("ServiceQuotaExceededException", true),
            ("InternalServerException", true),
            ("ServiceUnavailableException", true),
            ("ModelNotReadyException", true),
            ("ModelTimeoutException", true),
            ("ModelStreamErrorException", true),
            ("ValidationException", false),
            ("ModelErrorException", false),
            ("AccessDeniedException", false),
            ("ResourceNotFoundException", false),
            ("ExpiredTokenException", false),
        ];
        for (code, expected) in cases {
            // A status that would say the opposite, to prove the code wins.
            let status = if expected { 400 } else { 503 };
            let error = from_exception(code, "m".into(), Some(status), "model");
            assert_eq!(retryable(&error), expected, "{code}: {error:?}");
        }
    }
}
