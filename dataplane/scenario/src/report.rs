//! The report a person reads: one line per scenario (PASS, FAIL or ERROR), then for each
//! failing scenario its first failing step — the file and line, what the caller said, each
//! expectation that did not hold with what was expected and what happened, and the
//! transcript of that turn — then the totals.

use std::fmt::Write as _;
use std::time::Duration;

use super::run::{Failure, Outcome, ScenarioResult};

/// Counts of a suite's results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Scenarios run.
    pub total: usize,
    /// Those that passed.
    pub passed: usize,
    /// Those with a step that did not hold.
    pub failed: usize,
    /// Those that could not run.
    pub broken: usize,
}

impl Totals {
    /// The counts of `results`.
    pub fn of(results: &[ScenarioResult]) -> Self {
        let mut totals = Self { total: results.len(), ..Self::default() };
        for result in results {
            match result.outcome {
                Outcome::Passed => totals.passed += 1,
                Outcome::Failed(_) => totals.failed += 1,
                Outcome::Broken(_) => totals.broken += 1,
            }
        }
        totals
    }

    /// Whether every scenario passed.
    pub fn ok(&self) -> bool {
        self.passed == self.total
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

/// Where a failure is: `file:line`, or the file alone.
fn place(result: &ScenarioResult, failure: &Failure) -> String {
    match failure.line {
        Some(line) => format!("{}:{line}", result.path.display()),
        None => result.path.display().to_string(),
    }
}

/// The step as the report names it: `step 2 of 5 (say: "...")`, or `the opening`.
pub fn step_name(result: &ScenarioResult, failure: &Failure) -> String {
    match failure.step {
        Some(step) => format!("step {} of {} (say: {:?})", step + 1, result.steps, failure.said),
        None => "the opening (before the first step)".to_owned(),
    }
}

/// One line for a scenario.
pub fn summary_line(result: &ScenarioResult) -> String {
    let (verdict, detail) = match &result.outcome {
        Outcome::Passed => ("PASS ", format!("{} steps{}", result.steps, judged(result))),
        Outcome::Failed(failure) => ("FAIL ", step_name(result, failure)),
        Outcome::Broken(_) => ("ERROR", "could not run".to_owned()),
    };
    format!("{verdict} {} — {} ({detail}, {})", result.path.display(), result.name, seconds(result.duration))
}

/// What became of the scenario's judged expectations, marked as judged: `, 1 judged by a
/// model`, `, 1 judged expectation not checked (no --judge-model)`, or nothing.
fn judged(result: &ScenarioResult) -> String {
    let mut out = String::new();
    if result.judged > 0 {
        let _ = write!(out, ", {} judged by a model", result.judged);
    }
    if result.unjudged > 0 {
        let _ = write!(out, ", {} judged expectation(s) not checked (no --judge-model)", result.unjudged);
    }
    out
}

/// The details of one failing or broken scenario; `None` when it passed.
pub fn details(result: &ScenarioResult) -> Option<String> {
    let mut out = String::new();
    match &result.outcome {
        Outcome::Passed => return None,
        Outcome::Broken(error) => {
            let _ = writeln!(out, "{} — {}: could not run: {error}", result.path.display(), result.name);
        }
        Outcome::Failed(failure) => {
            let _ = writeln!(out, "{}: {} — {}", place(result, failure), result.name, step_name(result, failure));
            for (i, divergence) in failure.divergences.iter().enumerate() {
                let first = if i == 0 { " (first divergence)" } else { "" };
                let _ = writeln!(out, "  {}{first}", divergence.expectation);
                let _ = writeln!(out, "    expected: {}", divergence.expected);
                let _ = writeln!(out, "    got:      {}", divergence.actual);
            }
            if failure.lines.is_empty() {
                let _ = writeln!(out, "  (nothing arrived in this turn)");
            } else {
                let _ = writeln!(out, "  transcript of the turn:");
                for line in &failure.lines {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    Some(out)
}

/// The whole report: a line per scenario, the failures' details, the totals.
pub fn render(results: &[ScenarioResult], elapsed: Duration) -> String {
    let mut out = String::new();
    for result in results {
        let _ = writeln!(out, "{}", summary_line(result));
    }
    let failures: Vec<String> = results.iter().filter_map(details).collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\nFailures:\n");
        for failure in failures {
            let _ = writeln!(out, "{failure}");
        }
    }
    let totals = Totals::of(results);
    let verdict = if totals.ok() { "ok" } else { "FAILED" };
    let mut counts = format!("{} passed, {} failed", totals.passed, totals.failed);
    if totals.broken > 0 {
        counts += &format!(", {} could not run", totals.broken);
    }
    let _ = writeln!(out, "\n{verdict}: {} scenario(s), {counts} in {}", totals.total, seconds(elapsed));
    let unchecked: usize = results.iter().map(|r| r.unjudged).sum();
    if unchecked > 0 {
        let _ = writeln!(
            out,
            "{unchecked} judged expectation(s) were not checked: give --judge-model (a model judges them, not a match)"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::Divergence;

    fn result(outcome: Outcome) -> ScenarioResult {
        ScenarioResult {
            path: "tests/balance.yaml".into(),
            name: "Balance".into(),
            duration: Duration::from_millis(1500),
            steps: 3,
            outcome,
            judged: 0,
            unjudged: 0,
        }
    }

    #[test]
    fn a_failure_names_the_step_the_expectation_and_both_sides() {
        let failure = Failure {
            step: Some(1),
            line: Some(9),
            said: "My balance please".into(),
            divergences: vec![Divergence {
                expectation: "tools[0]".into(),
                expected: "a call of check_balance".into(),
                actual: "no tool calls".into(),
            }],
            lines: vec!["   10 ms  > My balance please".into()],
        };
        let results = [result(Outcome::Passed), result(Outcome::Failed(Box::new(failure)))];
        let text = render(&results, Duration::from_secs(2));
        assert!(text.starts_with("PASS  tests/balance.yaml — Balance (3 steps, 1.5 s)\n"), "{text}");
        assert!(text.contains("FAIL  tests/balance.yaml — Balance (step 2 of 3 (say: \"My balance please\"), 1.5 s)"));
        assert!(text.contains("tests/balance.yaml:9: Balance — step 2 of 3"), "{text}");
        assert!(text.contains(
            "  tools[0] (first divergence)\n    expected: a call of check_balance\n    got:      no tool calls\n"
        ));
        assert!(text.contains("    10 ms  > My balance please"), "{text}");
        assert!(text.ends_with("FAILED: 2 scenario(s), 1 passed, 1 failed in 2.0 s\n"), "{text}");
        assert_eq!(Totals::of(&results).failed, 1);
    }

    #[test]
    fn judged_expectations_are_marked_as_judged_or_not_checked() {
        let judged = ScenarioResult { judged: 2, ..result(Outcome::Passed) };
        let unjudged = ScenarioResult { unjudged: 1, ..result(Outcome::Passed) };
        let text = render(&[judged, unjudged], Duration::from_secs(1));
        assert!(text.contains("(3 steps, 2 judged by a model, 1.5 s)"), "{text}");
        assert!(text.contains("(3 steps, 1 judged expectation(s) not checked (no --judge-model), 1.5 s)"), "{text}");
        assert!(
            text.ends_with(
                "1 judged expectation(s) were not checked: give --judge-model (a model judges them, not a match)\n"
            ),
            "{text}"
        );
    }
}
