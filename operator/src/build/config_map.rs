//! The ConfigMap child: the resolved RuntimeSpec as `runtime.json`, which the runtime pods
//! mount read-only at `/etc/switchboard`.

use k8s_openapi::api::core::v1::ConfigMap;
use switchboard_crds::contract::RUNTIME_SPEC_FILE;
use switchboard_crds::{Agent, RuntimeSpec};

use super::child_meta;

/// The ConfigMap of `agent` holding `spec`.
pub fn build(agent: &Agent, spec: &RuntimeSpec) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(agent),
        data: Some([(RUNTIME_SPEC_FILE.to_owned(), spec.to_canonical_json())].into()),
        ..Default::default()
    }
}
