//! JUnit XML for CI (`--junit FILE`): one `<testsuite>` for the run, one `<testcase>` per
//! scenario (`classname` its file, `name` its name), a `<failure>` for a scenario whose step
//! did not hold (its message the first divergence, its text the whole report of the step)
//! and an `<error>` for one that could not run — the shape GitHub Actions, GitLab and
//! Jenkins read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::report::{self, Totals};
use super::run::{Outcome, ScenarioResult};

/// The JUnit file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the JUnit report {path}: {source}")]
pub struct JunitError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// `text` escaped for XML attributes and text (control characters XML 1.0 forbids dropped).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\r' | '\t' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML of `results`, run in `elapsed`.
pub fn render(results: &[ScenarioResult], elapsed: Duration) -> String {
    let totals = Totals::of(results);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{:.3}\"",
        totals.total,
        totals.failed,
        totals.broken,
        elapsed.as_secs_f64()
    );
    let _ = writeln!(out, "<testsuites name=\"switchboard test\" {counts}>");
    let _ = writeln!(out, "  <testsuite name=\"switchboard test\" {counts}>");
    for result in results {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(&result.path.display().to_string()),
            escape(&result.name),
            result.duration.as_secs_f64()
        );
        let details = report::details(result).unwrap_or_default();
        match &result.outcome {
            Outcome::Passed => out.push_str("/>\n"),
            Outcome::Failed(failure) => {
                let first = failure.divergences.first().map(ToString::to_string).unwrap_or_default();
                let message = format!("{}: {first}", report::step_name(result, failure));
                let _ = writeln!(
                    out,
                    ">\n      <failure type=\"divergence\" message=\"{}\">{}</failure>\n    </testcase>",
                    escape(&message),
                    escape(&details)
                );
            }
            Outcome::Broken(error) => {
                let _ = writeln!(
                    out,
                    ">\n      <error type=\"broken\" message=\"{}\">{}</error>\n    </testcase>",
                    escape(error),
                    escape(&details)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Writes the JUnit XML of `results` to `path`.
pub fn write(path: &Path, results: &[ScenarioResult], elapsed: Duration) -> Result<(), JunitError> {
    std::fs::write(path, render(results, elapsed)).map_err(|source| JunitError { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(escape(r#"a < b & "c" 'd' >"#), "a &lt; b &amp; &quot;c&quot; &apos;d&apos; &gt;");
        assert_eq!(escape("bell\u{7}line\nnext"), "bellline\nnext");
    }

    #[test]
    fn cases_carry_their_outcome() {
        let result = |name: &str, outcome| ScenarioResult {
            path: "t.yaml".into(),
            name: name.into(),
            duration: Duration::from_millis(250),
            steps: 1,
            outcome,
            judged: 0,
            unjudged: 0,
        };
        let xml = render(
            &[result("ok <1>", Outcome::Passed), result("broken", Outcome::Broken("refused".into()))],
            Duration::from_secs(1),
        );
        assert!(xml.contains(r#"tests="2" failures="0" errors="1""#), "{xml}");
        assert!(xml.contains(r#"<testcase classname="t.yaml" name="ok &lt;1&gt;" time="0.250"/>"#), "{xml}");
        assert!(xml.contains(r#"<error type="broken" message="refused">"#), "{xml}");
    }
}
