//! `switchboard-operator render`: resolves the Agents in a set of YAML files (the same files
//! `kubectl apply` takes) and prints, as multi-document YAML, the exact children the
//! controller would apply for each (the same [`crate::build`] code), or every validation
//! problem. Agents read from files have no uid, so the children carry no owner reference.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use kube::ResourceExt;
use switchboard_crds::Catalog;
use switchboard_crds::catalog::namespace_of;

use crate::build::{Desired, build};
use crate::settings::BuildSettings;

/// Arguments of `render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// YAML files or folders (read recursively) with Agents, Personas and Workflows.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// What every Agent's children share (the same flags as `run`).
    #[command(flatten)]
    pub build: BuildSettings,
}

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// An object could not be serialised.
    #[error("cannot serialise {what}: {source}")]
    Serialise {
        /// Which object.
        what: String,
        /// The cause.
        source: serde_yaml::Error,
    },
}

impl RenderError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            RenderError::Serialise { .. } => "serialise",
        }
    }
}

/// The multi-document YAML of `desired` (ConfigMap, Deployment, Service, then the HPA).
pub fn to_yaml(desired: &Desired) -> Result<String, RenderError> {
    let Desired { config_map, deployment, service, hpa } = desired;
    let mut docs = vec![
        yaml("ConfigMap", &typed_value(config_map))?,
        yaml("Deployment", &typed_value(deployment))?,
        yaml("Service", &typed_value(service))?,
    ];
    if let Some(hpa) = hpa {
        docs.push(yaml("HorizontalPodAutoscaler", hpa)?);
    }
    Ok(docs.into_iter().map(|d| format!("---\n{d}")).collect())
}

fn typed_value<K: k8s_openapi::Resource + serde::Serialize>(obj: &K) -> serde_json::Value {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), K::API_VERSION.into());
        map.insert("kind".into(), K::KIND.into());
    }
    value
}

fn yaml<T: serde::Serialize>(what: &str, obj: &T) -> Result<String, RenderError> {
    serde_yaml::to_string(obj).map_err(|source| RenderError::Serialise { what: what.to_owned(), source })
}

/// Prints the children of every valid Agent on stdout; problems go to stderr and make the
/// exit code 1 (2 when the files cannot be read).
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
                let text = match to_yaml(&build(agent, &spec, &args.build)) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("error: Agent {id}: {e}");
                        return ExitCode::from(2);
                    }
                };
                if write!(out, "# Agent {id}\n{text}").is_err() {
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
