//! `switchboard callers delete`: forgets a verified caller on request — the memory the
//! gateway keeps for them across sessions (preferences, open tasks) and which sessions they
//! had (their summaries stop coming back) — in the conversation record's database: the
//! SQLite file local mode writes, or a cluster's PostgreSQL (`--record-database-url`, as the
//! gateway's). The sessions' own record stays until the record's retention deletes it.
//!
//! Whoever can reach that database may delete; there is no gateway API for it.

use clap::{Args, Subcommand};
use switchboard_record::store::callers;

/// Options of `switchboard callers`.
#[derive(Debug, Args)]
pub struct CallersArgs {
    /// The record's database: `postgres://…` or `sqlite:<file>`. Default: the file local
    /// mode writes (`$XDG_DATA_HOME/switchboard/record.db` or `~/.local/share/switchboard/record.db`).
    #[arg(long = "record-database-url", env = "SWITCHBOARD_RECORD_DATABASE_URL", global = true)]
    database_url: Option<String>,

    #[command(subcommand)]
    command: CallersCommand,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum CallersCommand {
    /// Forget one caller: everything kept of them across sessions.
    Delete {
        /// The namespace of the Agents that verified them.
        #[arg(long)]
        namespace: String,
        /// The caller's stable id, as the identity assertion's `sub` names it: the
        /// `verifiedUser` value when it is a string or number, else its `id`, else its
        /// `accountNumber` (e.g. `12345678`).
        #[arg(long)]
        caller: String,
    },
}

/// Runs `callers`.
pub async fn run(args: CallersArgs) -> anyhow::Result<()> {
    let store = super::record::open_existing(args.database_url).await?;
    match args.command {
        CallersCommand::Delete { namespace, caller } => {
            anyhow::ensure!(!namespace.trim().is_empty() && !caller.trim().is_empty(), "give --namespace and --caller");
            let id = callers::caller_id_of(&namespace, &caller);
            let deleted = store.delete_caller(&id).await.map_err(|e| anyhow::anyhow!("{e} ({})", store.display))?;
            if deleted {
                println!("deleted everything kept of that caller in namespace {namespace}");
            } else {
                println!("nothing is kept of that caller in namespace {namespace}");
            }
        }
    }
    Ok(())
}
