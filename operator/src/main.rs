//! `switchboard-operator`: the Switchboard control plane.

mod render;

use clap::{Parser, Subcommand};

/// The Switchboard operator.
#[derive(Debug, Parser)]
#[command(name = "switchboard-operator", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print, without a cluster, what the operator makes of the Agents in some YAML files.
    Render(render::RenderArgs),
}

fn main() -> std::process::ExitCode {
    let Args { command } = Args::parse();
    match command {
        Command::Render(args) => render::run(&args),
    }
}
