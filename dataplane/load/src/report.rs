//! What a load run found: each caller's [`CallerOutcome`] folded into one [`Report`] —
//! sessions, turns and handoffs counted, time to first audio, time to first token and
//! handoff gaps as percentiles, every error counted by its code and the sessions that
//! ended on each — rendered as text for a person and as JSON (`--json`) for a script.
//!
//! Codes are strings, counted as they come, so a code this version does not know (a
//! gateway's newer refusal) is counted like any other; [`is_capacity`] says which mean the
//! system was full (the session was refused or throttled, not broken), and server messages
//! of a type this version does not know (e.g. a gateway's "queued") are counted by type.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// What one caller saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallerOutcome {
    /// The session opened (`bidi_connection_start` came).
    pub opened: bool,
    /// Every turn of its conversation was answered and the session closed as asked.
    pub completed: bool,
    /// Turns answered: spoken and typed.
    pub spoken_turns: u64,
    /// Typed turns answered.
    pub typed_turns: u64,
    /// Handoffs (`handoff` messages).
    pub handoffs: u64,
    /// End of the caller's speech to the first reply audio, per spoken turn, in ms.
    pub first_audio_ms: Vec<f64>,
    /// Typed input sent to the first reply text, per typed turn, in ms.
    pub first_token_ms: Vec<f64>,
    /// A `handoff` message to the next agent's first reply (audio, or text in a text
    /// session), in ms.
    pub handoff_gap_ms: Vec<f64>,
    /// Every error seen, by code (`bidi_error <code>`, `close <code>`, `connect refused`, ...).
    pub errors: Vec<String>,
    /// The code that ended the session before its conversation was done.
    pub failure: Option<String>,
    /// Server messages of a type this version does not know, by type.
    pub unknown_messages: BTreeMap<String, u64>,
}

/// Whether an error code means the system was at capacity: the session was refused or
/// throttled (try later, elsewhere, or size the cluster up), not broken. Besides the codes
/// this version knows, any `bidi_error` code whose name speaks of capacity, a queue, a
/// quota, throttling or a retry counts, so refusals a newer gateway adds are counted too.
pub fn is_capacity(code: &str) -> bool {
    const KNOWN: [&str; 10] = [
        "close 1013",
        "close 4429",
        "close 4503",
        "http 429",
        "http 503",
        "bidi_error at_capacity",
        "bidi_error key_sessions",
        "bidi_error no_ready_pod",
        "bidi_error model_throttled",
        "bidi_error key_rate",
    ];
    // Not `session_rate` or close 1008: those say the client sent too fast.
    const WORDS: [&str; 5] = ["capacity", "queue", "quota", "throttl", "retry"];
    KNOWN.contains(&code) || (code.starts_with("bidi_error ") && WORDS.iter().any(|w| code.contains(w)))
}

/// Percentiles of a sample, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// The value at quantile `p` (0..=1) of `sorted` (ascending), nearest rank; NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

impl Percentiles {
    /// Of `samples` (any order); all zero when there are none.
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |p| (percentile(&samples, p) * 10.0).round() / 10.0;
        Self { count: samples.len(), p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1.0) }
    }
}

/// Sessions by what became of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sessions {
    /// Callers that tried to start one.
    pub started: u64,
    /// Sessions that opened.
    pub opened: u64,
    /// Sessions whose whole conversation was answered.
    pub completed: u64,
    /// Sessions that did not complete.
    pub failed: u64,
    /// Of those, refused or ended for want of capacity ([`is_capacity`]).
    pub refused_for_capacity: u64,
}

/// Turns answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Turns {
    /// Spoken turns.
    pub spoken: u64,
    /// Typed turns.
    pub typed: u64,
}

/// How the run was set up, as the report repeats it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunSettings {
    /// The session URL.
    pub target: String,
    /// `voice` or `text`.
    pub mode: String,
    /// Callers.
    pub callers: u64,
    /// New sessions a second.
    pub rate: f64,
    /// Most sessions at once.
    pub concurrency: u64,
}

/// A load run's findings.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// How it ran.
    pub settings: RunSettings,
    /// How long, in seconds.
    pub duration_s: f64,
    /// Sessions.
    pub sessions: Sessions,
    /// Turns answered.
    pub turns: Turns,
    /// Handoffs.
    pub handoffs: u64,
    /// End of speech to first reply audio, spoken turns.
    pub time_to_first_audio_ms: Percentiles,
    /// Typed input to first reply text, typed turns.
    pub time_to_first_token_ms: Percentiles,
    /// A handoff to the next agent's first reply.
    pub handoff_gap_ms: Percentiles,
    /// Every error, by code.
    pub errors: BTreeMap<String, u64>,
    /// Sessions that did not complete, by the code that ended them.
    pub failed_by_code: BTreeMap<String, u64>,
    /// Of [`Report::failed_by_code`], the capacity refusals ([`is_capacity`]).
    pub capacity_refusals: BTreeMap<String, u64>,
    /// Server messages of types this version does not know, by type.
    pub unknown_messages: BTreeMap<String, u64>,
}

impl Report {
    /// Folds the callers' outcomes.
    pub fn of(settings: RunSettings, duration: Duration, outcomes: Vec<CallerOutcome>) -> Self {
        let mut report =
            Self { settings, duration_s: (duration.as_secs_f64() * 10.0).round() / 10.0, ..Self::default() };
        let (mut audio, mut token, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
        for outcome in outcomes {
            let s = &mut report.sessions;
            s.started += 1;
            s.opened += u64::from(outcome.opened);
            s.completed += u64::from(outcome.completed);
            if !outcome.completed {
                s.failed += 1;
                let code = outcome.failure.clone().unwrap_or_else(|| "unknown".into());
                if is_capacity(&code) {
                    s.refused_for_capacity += 1;
                    *report.capacity_refusals.entry(code.clone()).or_default() += 1;
                }
                *report.failed_by_code.entry(code).or_default() += 1;
            }
            report.turns.spoken += outcome.spoken_turns;
            report.turns.typed += outcome.typed_turns;
            report.handoffs += outcome.handoffs;
            audio.extend(outcome.first_audio_ms);
            token.extend(outcome.first_token_ms);
            gaps.extend(outcome.handoff_gap_ms);
            for code in outcome.errors {
                *report.errors.entry(code).or_default() += 1;
            }
            for (kind, n) in outcome.unknown_messages {
                *report.unknown_messages.entry(kind).or_default() += n;
            }
        }
        report.time_to_first_audio_ms = Percentiles::of(audio);
        report.time_to_first_token_ms = Percentiles::of(token);
        report.handoff_gap_ms = Percentiles::of(gaps);
        report
    }

    /// Whether every session completed.
    pub fn ok(&self) -> bool {
        self.sessions.failed == 0 && self.sessions.started > 0
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let st = &self.settings;
        let _ = writeln!(
            out,
            "Load: {} {} caller(s) at {}/s, at most {} at once, against {} ({:.1} s)",
            st.callers, st.mode, st.rate, st.concurrency, st.target, self.duration_s
        );
        let s = &self.sessions;
        let _ = writeln!(
            out,
            "sessions: {} started, {} opened, {} completed, {} failed ({} refused for capacity)",
            s.started, s.opened, s.completed, s.failed, s.refused_for_capacity
        );
        let _ = writeln!(
            out,
            "turns: {} answered ({} spoken, {} typed); handoffs: {}",
            self.turns.spoken + self.turns.typed,
            self.turns.spoken,
            self.turns.typed,
            self.handoffs
        );
        let _ = writeln!(out, "{:<24} {:>7} {:>9} {:>9} {:>9} {:>9}", "ms", "count", "p50", "p95", "p99", "max");
        for (name, p) in [
            ("time to first audio", &self.time_to_first_audio_ms),
            ("time to first token", &self.time_to_first_token_ms),
            ("handoff gap", &self.handoff_gap_ms),
        ] {
            let _ =
                writeln!(out, "{name:<24} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}", p.count, p.p50, p.p95, p.p99, p.max);
        }
        let counts = |out: &mut String, title: &str, map: &BTreeMap<String, u64>| {
            if !map.is_empty() {
                let list: Vec<String> = map.iter().map(|(code, n)| format!("{code}: {n}")).collect();
                let _ = writeln!(out, "{title}: {}", list.join(", "));
            }
        };
        counts(&mut out, "errors by code", &self.errors);
        counts(&mut out, "failed sessions by code", &self.failed_by_code);
        counts(&mut out, "capacity refusals", &self.capacity_refusals);
        counts(&mut out, "server messages of unknown types", &self.unknown_messages);
        if self.ok() {
            let _ = writeln!(out, "ok: every session completed");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_of_capacity_are_told_from_failures_including_codes_this_version_does_not_know() {
        for code in ["close 1013", "close 4429", "bidi_error at_capacity", "bidi_error queue_full", "bidi_error quota"]
        {
            assert!(is_capacity(code), "{code}");
        }
        for code in ["close 1011", "close 1008", "bidi_error session_rate", "connect refused", "timeout turn"] {
            assert!(!is_capacity(code), "{code}");
        }
    }

    #[test]
    fn outcomes_fold_into_counts_percentiles_and_codes() {
        let done = CallerOutcome {
            opened: true,
            completed: true,
            spoken_turns: 2,
            handoffs: 1,
            first_audio_ms: vec![100.0, 300.0],
            handoff_gap_ms: vec![50.0],
            ..CallerOutcome::default()
        };
        let refused = CallerOutcome {
            errors: vec!["bidi_error at_capacity".into(), "close 1013".into()],
            failure: Some("close 1013".into()),
            unknown_messages: [("queued".to_owned(), 1)].into(),
            ..CallerOutcome::default()
        };
        let broken = CallerOutcome { failure: Some("connect refused".into()), ..CallerOutcome::default() };
        let report =
            Report::of(RunSettings::default(), Duration::from_secs(3), vec![done.clone(), done, refused, broken]);
        assert_eq!(
            report.sessions,
            Sessions { started: 4, opened: 2, completed: 2, failed: 2, refused_for_capacity: 1 }
        );
        assert_eq!((report.turns.spoken, report.handoffs), (4, 2));
        assert_eq!(report.time_to_first_audio_ms.count, 4);
        assert_eq!((report.time_to_first_audio_ms.p50, report.time_to_first_audio_ms.max), (300.0, 300.0));
        assert_eq!(report.errors.get("close 1013"), Some(&1));
        assert_eq!(report.failed_by_code.get("connect refused"), Some(&1));
        assert_eq!(report.capacity_refusals.len(), 1);
        assert_eq!(report.unknown_messages.get("queued"), Some(&1));
        assert!(!report.ok());
        let text = report.render();
        assert!(
            text.contains("sessions: 4 started, 2 opened, 2 completed, 2 failed (1 refused for capacity)"),
            "{text}"
        );
        assert!(text.contains("capacity refusals: close 1013: 1"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(json["sessions"]["completed"], 2);
        assert_eq!(json["time_to_first_audio_ms"]["p99"], 300.0);
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.count, p.p50, p.p95, p.p99, p.max), (100, 51.0, 95.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
    }
}
