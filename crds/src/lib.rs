//! Switchboard's API: the `Agent`, `Workflow` and `Persona` custom resources (group
//! `switchboard.dev`, version `v1alpha1`), the resolved [`RuntimeSpec`] that the operator
//! hands to runtime pods, and the pure functions both the operator and the local runner use
//! to check and resolve them ([`Catalog`], [`validate`], [`resolve`](mod@resolve)).
//!
//! Nothing in this crate does I/O: no tokio, no HTTP, no Kubernetes client.

pub mod agent;
pub mod agent_test;
pub mod agent_test_summary;
pub mod catalog;
pub mod common;
pub mod contract;
pub mod gateway_key;
pub mod manifests;
pub mod persona;
pub mod reference;
pub mod resolve;
pub mod routing;
pub mod runtime;
pub mod template;
pub mod validate;
pub mod workflow;

pub use agent::{Agent, AgentSpec, AgentStatus, Mode};
pub use agent_test::{AgentTest, AgentTestSpec, AgentTestStatus};
pub use catalog::{Catalog, LoadError};
pub use common::{ObjectRef, ResourceStatus};
pub use persona::{Persona, PersonaSpec};
pub use resolve::resolve;
pub use runtime::RuntimeSpec;
pub use validate::{Problem, Reason};
pub use workflow::{Workflow, WorkflowSpec};

/// The API group of every Switchboard resource.
pub const GROUP: &str = "switchboard.dev";
/// The API version of every Switchboard resource.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "switchboard.dev/v1alpha1";
