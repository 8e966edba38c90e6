//! One bounded question to a judging model: the machinery the scenario tests' judged
//! expectations (`switchboard_scenario::judge`) and the record's analysis of every session
//! (`switchboard_record::analysis`) share. Deterministic settings (temperature 0), a cap on
//! what the model writes, and a deadline; the whole reply, with its token usage, comes back
//! for the caller to read (a verdict, a set of fields).

use std::time::Duration;

use crate::{CollectedReply, Message, ModelError, ModelRequest, TextModel, collect_reply};

/// What to ask.
#[derive(Clone, Debug)]
pub struct Question<'a> {
    /// The model (a Bedrock model or inference profile id).
    pub model_id: &'a str,
    /// The judge's instructions (the system prompt).
    pub instructions: &'a str,
    /// What it reads (one user message).
    pub prompt: String,
    /// The most tokens it may write.
    pub max_tokens: u32,
    /// How long the answer may take.
    pub timeout: Duration,
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The model refused or failed.
    #[error("the judge model {model} failed: {source}")]
    Failed {
        /// The model id.
        model: String,
        /// Why.
        #[source]
        source: ModelError,
    },
    /// No answer in time.
    #[error("the judge model {model} gave no answer within {} s", timeout.as_secs())]
    Timeout {
        /// The model id.
        model: String,
        /// The deadline.
        timeout: Duration,
    },
}

impl JudgeError {
    /// A label for metrics: `model_error` or `timeout`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Failed { .. } => "model_error",
            Self::Timeout { .. } => "timeout",
        }
    }
}

/// Asks `model` the `question` and gathers its whole reply.
pub async fn ask(model: &dyn TextModel, question: Question<'_>) -> Result<CollectedReply, JudgeError> {
    let mut request = ModelRequest::new(question.model_id.to_owned(), vec![Message::user_text(question.prompt)]);
    request.system = question.instructions.to_owned();
    request.max_tokens = question.max_tokens;
    request.temperature = 0.0;
    match tokio::time::timeout(question.timeout, collect_reply(model.stream(&request))).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(source)) => Err(JudgeError::Failed { model: question.model_id.to_owned(), source }),
        Err(_) => Err(JudgeError::Timeout { model: question.model_id.to_owned(), timeout: question.timeout }),
    }
}
