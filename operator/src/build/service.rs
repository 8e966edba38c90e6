//! The Service child: a stable ClusterIP address for the Agent's runtime pods, port 8080
//! named `http` (the session WebSocket, health and metrics).

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use switchboard_crds::Agent;
use switchboard_crds::catalog::namespace_of;
use switchboard_crds::contract::{PORT_NAME, RUNTIME_PORT};

use super::{child_meta, selector_labels};
use kube::ResourceExt;

/// The Service of `agent`.
pub fn build(agent: &Agent) -> Service {
    Service {
        metadata: child_meta(agent),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector_labels(agent)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_owned()),
                port: i32::from(RUNTIME_PORT),
                target_port: Some(IntOrString::String(PORT_NAME.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The in-cluster DNS name of the Agent's Service, `<name>.<namespace>.svc`.
pub fn host(agent: &Agent) -> String {
    format!("{}.{}.svc", agent.name_any(), namespace_of(agent))
}

/// `host:port` of the Agent's Service, as written in its status.
pub fn endpoint(agent: &Agent) -> String {
    format!("{}:{RUNTIME_PORT}", host(agent))
}
