//! `switchboard sessions list|show`: reads the conversation record — the SQLite file local
//! mode writes, or a cluster's PostgreSQL (`--record-database-url`, as the gateway's).

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use switchboard_record::store::{EventRow, Filter, SessionRecord, Summary};

/// Options of `switchboard sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// The record's database: `postgres://…` or `sqlite:<file>`. Default: the file local
    /// mode writes (`$XDG_DATA_HOME/switchboard/record.db` or `~/.local/share/switchboard/record.db`).
    #[arg(long = "record-database-url", env = "SWITCHBOARD_RECORD_DATABASE_URL", global = true)]
    database_url: Option<String>,

    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: SessionsCommand,
}

/// What to read.
#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Recorded sessions, newest first.
    List {
        /// Started since: an RFC 3339 time (`2026-11-24T09:00:00Z`) or an age (`30m`, `24h`, `7d`).
        #[arg(long)]
        since: Option<String>,
        /// Started before: the same forms.
        #[arg(long)]
        until: Option<String>,
        /// Reached this Agent (`namespace/name`).
        #[arg(long)]
        agent: Option<String>,
        /// The verified caller, or the credential (API key name, `jwt:<subject>`).
        #[arg(long)]
        caller: Option<String>,
        /// `ended`, `live`, `parked` (the client went; it may still resume), `abandoned` (it never
        /// did) or `lost` (its gateway died while it was live).
        #[arg(long)]
        outcome: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// One session: everything that happened in it, in order.
    Show {
        /// Its id (`gw-…`, from `list` or the client's `bidi_connection_start`).
        id: String,
    },
}

/// Runs `sessions`.
pub async fn run(args: SessionsArgs) -> anyhow::Result<()> {
    let store = super::record::open_existing(args.database_url).await?;
    let mut out = String::new();
    match args.command {
        SessionsCommand::List { since, until, agent, caller, outcome, limit } => {
            let filter = Filter {
                since: since.as_deref().map(parse_time).transpose()?,
                until: until.as_deref().map(parse_time).transpose()?,
                agent,
                caller,
                outcome,
                limit: Some(limit),
                // The database's reader reads every namespace.
                namespaces: None,
            };
            let sessions = store.list(&filter).await?;
            if args.json {
                out = serde_json::to_string_pretty(&sessions)?;
            } else {
                list_text(&mut out, &sessions);
            }
        }
        SessionsCommand::Show { id } => {
            let record = store
                .show(&id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no recorded session {id} in {}", store.display))?;
            if args.json {
                out = serde_json::to_string_pretty(&record)?;
            } else {
                show_text(&mut out, &record);
            }
        }
    }
    println!("{}", out.trim_end());
    Ok(())
}

/// Unix ms of an RFC 3339 time or of now minus an age (`90s`, `30m`, `24h`, `7d`).
pub(super) fn parse_time(text: &str) -> anyhow::Result<i64> {
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(at.as_millisecond());
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    let number: i64 = number.parse().unwrap_or(-1);
    anyhow::ensure!(
        seconds > 0 && number >= 0,
        "{text:?} is neither an RFC 3339 time (2026-11-24T09:00:00Z) nor an age (30m, 24h, 7d)"
    );
    Ok(jiff::Timestamp::now().as_millisecond() - number * seconds * 1000)
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map_or_else(|_| ms.to_string(), |t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
}

fn list_text(out: &mut String, sessions: &[Summary]) {
    if sessions.is_empty() {
        out.push_str("no recorded sessions match\n");
        return;
    }
    let _ = writeln!(
        out,
        "{:<40} {:<19} {:>7} {:<8} {:>5} {:>9} {:<16} AGENTS",
        "SESSION", "STARTED (UTC)", "SECONDS", "OUTCOME", "TURNS", "COST USD", "CALLER"
    );
    for s in sessions {
        let seconds =
            s.ended_at.map_or_else(|| "-".to_owned(), |end| format!("{:.0}", (end - s.started_at) as f64 / 1000.0));
        let caller =
            s.caller.clone().unwrap_or_else(|| if s.credential.is_empty() { "-".into() } else { s.credential.clone() });
        let _ = writeln!(
            out,
            "{:<40} {:<19} {:>7} {:<8} {:>5} {:>9.6} {:<16} {}",
            s.id,
            time(s.started_at),
            seconds,
            s.outcome,
            s.turns,
            s.cost_usd,
            caller,
            s.agents.join(" -> ")
        );
    }
}

fn show_text(out: &mut String, record: &SessionRecord) {
    let s = &record.summary;
    let _ = writeln!(out, "session   {}", s.id);
    let ended = s.ended_at.map_or_else(|| "-".to_owned(), time);
    let _ = writeln!(
        out,
        "started   {} UTC, ended {ended}, {} ({}){}",
        time(s.started_at),
        s.outcome,
        s.close_code.map_or_else(|| "no close".into(), |c| format!("close {c}")),
        s.hung_up_by.as_deref().map_or_else(String::new, |by| format!(", hung up by {by}"))
    );
    let credential = if s.credential.is_empty() { "-" } else { &s.credential };
    let _ =
        writeln!(out, "who       credential {credential}, caller {}", s.caller.as_deref().unwrap_or("not verified"));
    let _ = writeln!(out, "agents    {}", s.agents.join(" -> "));
    let _ = writeln!(
        out,
        "usage     {} turns, {} tokens in, {} out, {:.6} USD",
        s.turns, s.input_tokens, s.output_tokens, s.cost_usd
    );
    if let Some(summary) = &s.summary {
        let _ = writeln!(out, "summary   {summary}");
    }
    // Each Agent's variant when the session reached more than the one it started at.
    let others = s.variants.keys().any(|agent| *agent != s.first_agent);
    if others {
        let each: Vec<String> = s.variants.iter().map(|(agent, variant)| format!("{variant} at {agent}")).collect();
        let _ = writeln!(out, "variants  {}", each.join(", "));
    } else if let Some(variant) = &s.variant {
        let _ = writeln!(out, "variant   {variant}");
    }
    if s.transferred {
        let _ = writeln!(out, "person    put through to a person");
    }
    if let Some(analysis) = &s.analysis {
        let _ = writeln!(out, "analysis  {}", analysis_text(analysis));
    }
    out.push('\n');
    for event in &record.events {
        let at = jiff::Timestamp::from_microsecond(event.at_us)
            .map_or_else(|_| event.at_us.to_string(), |t| t.strftime("%H:%M:%S%.3f").to_string());
        let _ = writeln!(out, "{at}  {:<14} {:<16} {}", event.agent, event.kind, describe(event));
    }
}

/// A session's analysis in one line: its fields (`name=value`) or its error, and the model.
fn analysis_text(analysis: &serde_json::Value) -> String {
    let model = analysis["model"].as_str().unwrap_or_default();
    let figures = format!(
        "{} tokens in, {} out, {} USD",
        analysis["input_tokens"], analysis["output_tokens"], analysis["cost_usd"]
    );
    match (analysis["fields"].as_object(), analysis["error"].as_str()) {
        (Some(fields), _) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, value)| {
                    format!("{name}={}", value.as_str().map_or_else(|| value.to_string(), str::to_owned))
                })
                .collect();
            format!("{} (by {model}; {figures})", fields.join(", "))
        }
        (None, Some(error)) => format!("FAILED: {error} ({figures})"),
        _ => analysis.to_string(),
    }
}

/// One line for an event.
fn describe(event: &EventRow) -> String {
    let d = &event.data;
    let s = |key: &str| d.get(key).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).unwrap_or_default();
    match event.kind.as_str() {
        "user" | "assistant" => s("text"),
        "tool_start" => format!("{} {}", s("name"), s("input")),
        "tool_complete" => format!(
            "{} -> {} ({} ms{})",
            s("name"),
            s("result"),
            s("duration_ms"),
            if d["cached"] == true { ", cached" } else { "" }
        ),
        "tool_error" => format!("{} failed: {} ({})", s("name"), s("message"), s("kind")),
        "consent_request" => format!("{} asks consent: {}", s("name"), s("description")),
        "consent_answer" => {
            format!("{} {}", s("tool_use_id"), if d["approved"] == true { "approved" } else { "denied" })
        }
        "handoff" => format!("{} -> {} ({}): {}", s("from"), s("to"), s("kind"), s("reason")),
        "memory" => format!("{} = {}", s("key"), s("value")),
        "turn" => format!(
            "turn {} {} (first reply {} ms, {} ms)",
            s("turn"),
            s("stop_reason"),
            s("first_reply_ms"),
            s("turn_ms")
        ),
        "usage" => {
            format!("{} in, {} out, {} USD ({})", s("input_tokens"), s("output_tokens"), s("cost_usd"), s("model"))
        }
        "error" => format!("{}: {}", s("code"), s("message")),
        "session_end" => match d["hung_up_by"].as_str() {
            Some(by) => format!("{} {} (hung up by {by})", s("close_code"), s("reason")),
            None => format!("{} {}", s("close_code"), s("reason")),
        },
        "analysis" => analysis_text(d),
        "transfer_request" => format!("to {} ({}): {}", s("person"), s("address"), s("reason")),
        "transfer_result" => format!("{} {}", s("outcome"), s("message")),
        _ => d.to_string(),
    }
}
