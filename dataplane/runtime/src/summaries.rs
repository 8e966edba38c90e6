//! The model summaries a session's compactions ask for ([`Effect::Summarize`]): each is one
//! call of the agent's text model (with the session's retries and fallbacks), run beside
//! the conversation — nothing waits for it — within [`TIMEOUT`]. Its outcome goes back to
//! the core as [`Input::Summary`]; a failure, a timeout or an empty answer leaves the
//! extractive summary in place, and is logged and counted
//! (`switchboard_context_summaries_total{agent,outcome}`).
//!
//! Only the latest compaction's summary is used, so a new request stops the one before
//! it (its turns are in the new request's summary so far).
//!
//! [`Effect::Summarize`]: switchboard_core::Effect::Summarize

use std::time::Duration;

use switchboard_core::Input;
use switchboard_core::model::ModelRequest;
use switchboard_models::{collect_reply, stream_with_retry};
use tokio::task::JoinSet;

use super::agent::{AgentRuntime, Shared};

/// The longest one summary may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A session's summary calls.
#[derive(Debug, Default)]
pub struct Summaries {
    running: JoinSet<(u64, Result<String, String>)>,
}

impl Summaries {
    /// Starts summary `id` of `session_id` with `request` (replacing one still running).
    pub fn start(&mut self, agent: &AgentRuntime, shared: &Shared, session_id: &str, id: u64, request: ModelRequest) {
        self.running.abort_all();
        let stream = stream_with_retry(agent.model.clone(), request, shared.retry.clone());
        let counter = shared.metrics.summaries.clone();
        let (agent, session_id) = (agent.core.name().to_owned(), session_id.to_owned());
        self.running.spawn(async move {
            let (outcome, result) = match tokio::time::timeout(TIMEOUT, collect_reply(stream)).await {
                Ok(Ok(reply)) if !reply.text.trim().is_empty() => ("written", Ok(reply.text)),
                Ok(Ok(_)) => ("empty", Err("the model wrote no summary".to_owned())),
                Ok(Err(error)) => ("failed", Err(error.to_string())),
                Err(_) => ("timeout", Err(format!("the model took over {} s", TIMEOUT.as_secs()))),
            };
            counter.with_label_values(&[agent.as_str(), outcome]).inc();
            if let Err(why) = &result {
                tracing::warn!(agent, session_id, "compacted turns keep their extractive summary: {why}");
            }
            (id, result)
        });
    }

    /// The next summary's outcome; pending while none runs.
    pub async fn next(&mut self) -> Input {
        loop {
            match self.running.join_next().await {
                Some(Ok((id, outcome))) => return Input::Summary { id, outcome },
                // Stopped by a later request.
                Some(Err(_)) => continue,
                None => std::future::pending().await,
            }
        }
    }
}
