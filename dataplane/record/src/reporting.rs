//! What follows a session's end: its summary ([`super::summary`]), its analysis
//! ([`super::analysis`]), then its end-of-call report ([`super::webhook`]), each a task of
//! its own fed by the one before; the writer tells the first which sessions ended once their
//! end is written.

use std::sync::Arc;

use switchboard_models::TextModel;
use tokio::sync::mpsc;

use super::analysis::{AnalysisConfig, Analyst};
use super::summary::{Summarizer, SummaryConfig};
use super::webhook::{self, Webhook, WebhookConfig};
use super::{Recorder, Store};

/// What follows a session's end, each when wanted.
#[derive(Debug, Default)]
pub struct Followers {
    /// The end-of-call report's receiver.
    pub webhook: Option<(WebhookConfig, webhook::Client)>,
    /// The summary's model.
    pub summary: Option<(Arc<dyn TextModel>, SummaryConfig)>,
    /// The analysis: its model client (none: Agents that ask for one get an error saying
    /// so) and settings.
    pub analysis: Option<(Option<Arc<dyn TextModel>>, AnalysisConfig)>,
}

/// Starts the summariser, the analyst and the report's sender, those `followers` asks for,
/// for `recorder`'s sessions in `store`, chained in that order; the queue the writer reports
/// ended sessions to ([`super::writer::Writer::reporting_to`]), when any runs.
pub fn start(recorder: &Recorder, store: &Store, followers: Followers) -> Option<mpsc::Sender<String>> {
    let Followers { webhook, summary, analysis } = followers;
    let mut next = webhook.map(|(config, client)| {
        let (sender, ended) = Webhook::new(config, client, store.clone(), recorder.metrics.webhook.clone());
        tokio::spawn(sender.run());
        ended
    });
    if let Some((model, config)) = analysis {
        let (analyst, ended) = Analyst::new(
            model,
            config,
            store.clone(),
            recorder.analyses.clone(),
            recorder.redactor.clone(),
            recorder.prices.clone(),
            recorder.metrics.clone(),
        );
        let analyst = match next.take() {
            Some(then) => analyst.reporting_to(then),
            None => analyst,
        };
        tokio::spawn(analyst.run());
        next = Some(ended);
    }
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
