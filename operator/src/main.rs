//! `switchboard-operator`: the Switchboard control plane. `run` is the controller; `render`
//! prints, with no cluster, the objects it would create.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchboard_operator::render::{self, RenderArgs};
use switchboard_operator::settings::RunArgs;

/// The Switchboard operator.
#[derive(Debug, Parser)]
#[command(name = "switchboard-operator", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller against the cluster of the current kubeconfig (or in-cluster).
    ///
    /// On glibc it first re-executes itself with `GLIBC_TUNABLES=glibc.malloc.arena_max=1`
    /// (one malloc arena: about a quarter less memory), unless `GLIBC_TUNABLES` is set
    /// already (an empty value keeps glibc's defaults).
    Run(Box<RunArgs>),
    /// Print, without a cluster, the objects the operator would create for the Agents in
    /// some YAML files (multi-document YAML), or every validation problem.
    Render(Box<RenderArgs>),
}

fn main() -> ExitCode {
    let Args { command } = Args::parse();
    match command {
        Command::Run(args) => {
            switchboard_operator::malloc::tune();
            switchboard_operator::cli::run(*args)
        }
        Command::Render(args) => render::run(&args),
    }
}
