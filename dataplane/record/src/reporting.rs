//! What follows a session's end: its summary ([`super::summary`]), then its end-of-call
//! report ([`super::webhook`]), each a task of its own fed by the one before; the writer
//! tells the first which sessions ended once their end is written.

use std::sync::Arc;

use switchboard_models::TextModel;
use tokio::sync::mpsc;

use super::summary::{Summarizer, SummaryConfig};
use super::webhook::{self, Webhook, WebhookConfig};
use super::{Recorder, Store};

/// Starts the summariser (with `summary`) and the report's sender (with `webhook`) for
/// `recorder`'s sessions in `store`, chained in that order; the queue the writer reports
/// ended sessions to ([`super::writer::Writer::reporting_to`]), when either runs.
pub fn start(
    recorder: &Recorder,
    store: &Store,
    webhook: Option<(WebhookConfig, webhook::Client)>,
    summary: Option<(Arc<dyn TextModel>, SummaryConfig)>,
) -> Option<mpsc::Sender<String>> {
    let mut next = webhook.map(|(config, client)| {
        let (sender, ended) = Webhook::new(config, client, store.clone(), recorder.metrics.webhook.clone());
        tokio::spawn(sender.run());
        ended
    });
    if let Some((model, config)) = summary {
        let (summarizer, ended) = Summarizer::new(
            model,
            config,
            store.clone(),
            recorder.redactor.clone(),
            recorder.metrics.summaries.clone(),
        );
        let summarizer = match next.take() {
            Some(then) => summarizer.reporting_to(then),
            None => summarizer,
        };
        tokio::spawn(summarizer.run());
        next = Some(ended);
    }
    next
}
