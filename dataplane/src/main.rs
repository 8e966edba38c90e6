//! `switchboard`: the data plane's single binary. Each subcommand lives in its own module
//! under `cli/`; this file only parses arguments, sets up logging and runs one.

mod cli;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_tracing(&args.log);
    match args.command.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
