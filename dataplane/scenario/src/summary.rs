//! The short summary of a suite that `switchboard test --summary-file` writes: the counts
//! and the first divergence, in the shape an AgentTest's Job hands the operator through its
//! termination message ([`switchboard_crds::agent_test_summary`]).

use switchboard_crds::agent_test_summary::TestSummary;

use super::report::{Totals, step_name};
use super::run::{Outcome, ScenarioResult};

/// The summary of `results`.
pub fn of(results: &[ScenarioResult]) -> TestSummary {
    let totals = Totals::of(results);
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    TestSummary {
        passed: count(totals.passed),
        failed: count(totals.failed + totals.broken),
        total: count(totals.total),
        first_divergence: first_divergence(results),
        error: None,
    }
}

/// The summary of a suite that did not run: `error` says why.
pub fn refused(error: &dyn std::fmt::Display) -> TestSummary {
    TestSummary { error: Some(error.to_string()), ..TestSummary::default() }
}

/// The first failing scenario's name, step and first divergence (or why it could not run).
pub fn first_divergence(results: &[ScenarioResult]) -> Option<String> {
    results.iter().find_map(|result| match &result.outcome {
        Outcome::Passed => None,
        Outcome::Broken(error) => Some(format!("{}: could not run: {error}", result.name)),
        Outcome::Failed(failure) => {
            let step = step_name(result, failure);
            Some(match failure.divergences.first() {
                Some(d) => {
                    format!("{}, {step}: {}: expected {}, got {}", result.name, d.expectation, d.expected, d.actual)
                }
                None => format!("{}, {step}: did not hold", result.name),
            })
        }
    })
}
