//! `switchboard`: the data plane's single binary. Each subcommand lives in its own module
//! under `cli/`; this file only parses arguments, sets up logging (and traces, when the
//! `OTEL_*` variables ask for them) and runs one.
//!
//! The subcommands are thin: what they run lives in crates of its own, each named after its
//! concept — `switchboard-runtime` (`runtime`: the runtime server and its tool executors),
//! `switchboard-gateway` (`gateway`, and the record behind `sessions`, `callers`),
//! `switchboard-console` (`gateway --console`), `switchboard-demo-tools` (`demo-tools`),
//! `switchboard-scenario` (`test`) and, with the default `local` feature, `switchboard-local`
//! (`local`) and `switchboard-sim` (`sim`); the shipping build (`--no-default-features`)
//! leaves those two out. The one piece kept here is [`jwks`], the gateway command's fetch of
//! its JWT issuer's key set.

mod cli;
mod jwks;

use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

/// mimalloc instead of glibc's malloc: a text turn allocates and frees many small blocks
/// (the request, its SDK copy, JSON, HTTP/2 frames); with glibc, malloc and free were up to
/// a quarter of the runtime's CPU in a profile (sessions with long histories). Measured in
/// benchmarks/HISTORY.md ("Session 4"): about 16 % less CPU per text turn, ~9 KiB more RSS per
/// text session.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let matches = cli::Cli::command().get_matches();
    let args = match cli::Cli::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(error) => error.exit(),
    };
    // A subcommand may log less by default (`test` prints its report on stdout).
    let log = match (matches.value_source("log"), args.command.default_log()) {
        (Some(ValueSource::DefaultValue), Some(quieter)) => quieter,
        _ => args.log.as_str(),
    };
    // Traces name the service after the subcommand (`switchboard-runtime`, `-gateway`,
    // `-local`) unless OTEL_SERVICE_NAME says otherwise; the guard exports what is left
    // when the process ends.
    let service = format!("switchboard-{}", matches.subcommand_name().unwrap_or("cli"));
    let telemetry = switchboard_telemetry::init_for(&service, log, args.log_format);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = args.worker_threads {
        builder.worker_threads(usize::from(threads));
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(args.command.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    };
    drop(telemetry);
    code
}
