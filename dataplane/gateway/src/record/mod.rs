//! The conversation record as the gateway keeps it: the record itself (entries, the
//! session log, the writer, the store, prices, summaries, the end-of-call webhook) is the
//! `switchboard-record` crate, re-exported here under the paths it always had; this module
//! adds the gateway's side of it — the HTTP API that serves the record to a credential
//! allowed to read it ([`api`]), and restoring a verified caller's memory from it when the
//! gateway opens a runtime session ([`callers`]).

pub mod api;
pub mod callers;

use std::sync::Arc;

pub use switchboard_record::*;
use tokio::sync::watch;

use crate::directory::Directory;

/// Where the gateway serves an Agent's variants compared ([`api::compare`]).
pub const VARIANTS_PATH: &str = "/v1/variants";

/// The analysis settings of the Agents in the gateway's routing table, as it is now: the
/// record's analyst reads them when a session ends ([`analysis::AnalysisBook`]).
#[derive(Debug)]
pub struct RoutedAnalyses(pub watch::Receiver<Directory>);

impl analysis::AnalysisSource for RoutedAnalyses {
    fn of(&self, agent: &str) -> Option<switchboard_crds::agent::AnalysisSettings> {
        let (namespace, name) = agent.split_once('/')?;
        let directory = self.0.borrow();
        let route = directory.table().routes.iter().find(|r| r.namespace == namespace && r.name == name)?;
        route.analysis.clone()
    }

    fn any(&self) -> bool {
        self.0.borrow().table().routes.iter().any(|r| r.analysis.is_some())
    }
}

/// Analyses the sessions of `recorder` by the Agents `directory` routes.
pub fn analyse_by_routes(recorder: &Recorder, directory: watch::Receiver<Directory>) {
    recorder.analyses.set(Arc::new(RoutedAnalyses(directory)));
}
