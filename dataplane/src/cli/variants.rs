//! `switchboard variants compare`: an Agent's variants side by side from the conversation
//! record ([`switchboard_record::compare`]) — the SQLite file local mode writes, or a
//! cluster's PostgreSQL (`--record-database-url`, as the gateway's). The gateway's
//! `GET /v1/variants` answers the same JSON to a credential allowed to read the record.

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use switchboard_record::compare::{CompareQuery, Comparison, VariantFigures};

/// Options of `switchboard variants`.
#[derive(Debug, Args)]
pub struct VariantsArgs {
    /// The record's database: `postgres://…` or `sqlite:<file>`. Default: the file local
    /// mode writes (`$XDG_DATA_HOME/switchboard/record.db` or `~/.local/share/switchboard/record.db`).
    #[arg(long = "record-database-url", env = "SWITCHBOARD_RECORD_DATABASE_URL", global = true)]
    database_url: Option<String>,

    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: VariantsCommand,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum VariantsCommand {
    /// The variants of one Agent compared over the sessions that reached it (started there
    /// or were handed to it), each under the variant it ran at that Agent: sessions,
    /// resolution rate (the analysis's `resolved` field), transfers to a person, duration,
    /// cost, and each analysis field's answers.
    Compare {
        /// The Agent (`namespace/name`).
        #[arg(long)]
        agent: String,
        /// Sessions started since: an RFC 3339 time (`2026-11-24T09:00:00Z`) or an age (`30m`, `24h`, `7d`).
        #[arg(long, default_value = "7d")]
        since: String,
        /// Started before: the same forms. Default: now.
        #[arg(long)]
        until: Option<String>,
    },
}

/// Runs `variants`.
pub async fn run(args: VariantsArgs) -> anyhow::Result<()> {
    let VariantsCommand::Compare { agent, since, until } = args.command;
    anyhow::ensure!(
        agent.split_once('/').is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/')),
        "--agent must be namespace/name (e.g. bank/triage); got {agent:?}"
    );
    let store = super::record::open_existing(args.database_url).await?;
    let query = CompareQuery {
        agent,
        since: Some(super::sessions::parse_time(&since)?),
        until: until.as_deref().map(super::sessions::parse_time).transpose()?,
    };
    let comparison = store.compare_variants(&query).await?;
    let out = if args.json { serde_json::to_string_pretty(&comparison)? } else { text(&comparison) };
    println!("{}", out.trim_end());
    Ok(())
}

/// The comparison as a table, then each variant's analysis answers.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    if c.variants.is_empty() {
        let _ = writeln!(out, "no recorded sessions started at {} in that time", c.agent);
        return out;
    }
    let _ = writeln!(
        out,
        "{}: {} sessions{}",
        c.agent,
        c.sessions,
        if c.truncated { " (the newest; more in that time)" } else { "" }
    );
    let _ = writeln!(
        out,
        "{:<16} {:>8} {:>8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "VARIANT", "SESSIONS", "FINISHED", "RESOLVED", "TO PERSON", "MEAN S", "P50 S", "P90 S", "MEAN USD"
    );
    let percent = |rate: Option<f64>| rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0));
    let seconds = |ms: Option<f64>| ms.map_or_else(|| "-".to_owned(), |ms| format!("{:.1}", ms / 1000.0));
    for v in &c.variants {
        let d = v.duration_ms;
        let _ = writeln!(
            out,
            "{:<16} {:>8} {:>8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>12}",
            name(v),
            v.sessions,
            v.finished,
            percent(v.resolution_rate),
            percent(v.transfer_rate),
            seconds(d.map(|d| d.mean)),
            seconds(d.map(|d| d.p50 as f64)),
            seconds(d.map(|d| d.p90 as f64)),
            v.mean_cost_usd.map_or_else(|| "-".to_owned(), |c| format!("{c:.6}")),
        );
    }
    for v in c.variants.iter().filter(|v| v.analysed > 0 || v.analysis_errors > 0) {
        let _ = writeln!(out, "\n{}: {} analysed, {} failed", name(v), v.analysed, v.analysis_errors);
        for (field, figures) in &v.fields {
            let counts: Vec<String> = figures.counts.iter().map(|(value, n)| format!("{value} {n}")).collect();
            let mean = figures.mean.map(|m| format!("mean {m:.2} of {}", figures.numbers));
            let _ = writeln!(out, "  {field:<20} {}", counts.into_iter().chain(mean).collect::<Vec<_>>().join(", "));
        }
    }
    out
}

fn name(v: &VariantFigures) -> &str {
    v.variant.as_deref().unwrap_or("(none)")
}
