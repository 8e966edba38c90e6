//! The ConfigMap child: the resolved RuntimeSpec as `runtime.json`, which the runtime pods
//! mount read-only at `/etc/switchboard`, with the platform's Bedrock CA bundle as
//! `bedrock-ca.pem` when the operator has one.

use k8s_openapi::api::core::v1::ConfigMap;
use switchboard_crds::contract::{BEDROCK_CA_FILE, RUNTIME_SPEC_FILE};
use switchboard_crds::{Agent, RuntimeSpec};

use super::child_meta;
use crate::settings::BuildSettings;

/// The ConfigMap of `agent` holding `spec`.
pub fn build(agent: &Agent, spec: &RuntimeSpec, settings: &BuildSettings) -> ConfigMap {
    let mut data = std::collections::BTreeMap::from([(RUNTIME_SPEC_FILE.to_owned(), spec.to_canonical_json())]);
    if let Some(ca) = &settings.runtime_bedrock_ca {
        data.insert(BEDROCK_CA_FILE.to_owned(), ca.0.clone());
    }
    ConfigMap { metadata: child_meta(agent), data: Some(data), ..Default::default() }
}
