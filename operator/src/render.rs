//! `switchboard-operator render`: resolves the Agents in a set of YAML files (the same files
//! `kubectl apply` takes) and prints their RuntimeSpecs, or every validation problem.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use kube::ResourceExt;
use switchboard_crds::Catalog;
use switchboard_crds::catalog::namespace_of;

/// Arguments of `render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// YAML files or folders (read recursively) with Agents, Personas and Workflows.
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
}

/// Prints the resolved agents as multi-document YAML on stdout; problems go to stderr and
/// make the exit code 1.
pub fn run(args: &RenderArgs) -> ExitCode {
    let catalog = match Catalog::load_paths(&args.files) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for agent in catalog.agents() {
        let id = format!("{}/{}", namespace_of(agent), agent.name_any());
        match catalog.resolve_agent(agent) {
            Ok(spec) => {
                let yaml = serde_yaml::to_string(&spec).unwrap_or_else(|e| format!("# cannot serialise: {e}\n"));
                if writeln!(out, "---\n# Agent {id}\n{yaml}").is_err() {
                    return ExitCode::from(2);
                }
            }
            Err(problems) => {
                failed = true;
                eprintln!("Agent {id} is not valid:");
                for p in problems {
                    eprintln!("  - {p}");
                }
            }
        }
    }
    for skipped in catalog.skipped() {
        eprintln!("note: skipped {skipped} (not a Switchboard object)");
    }
    if catalog.agents().next().is_none() {
        eprintln!("error: no Agent found in {:?}", args.files);
        return ExitCode::from(2);
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
