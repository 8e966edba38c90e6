//! Playing the kubelet: the test control plane has no scheduler or kubelet, so Pods stay
//! Pending. These helpers mark an Agent's pods Running and Ready through the pods' status
//! subresource, as a kubelet would after the probes pass; the ReplicaSet and Deployment
//! controllers then count them available.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

/// Marks every pod matching `selector` in `namespace` Running and Ready; returns how many.
pub async fn mark_pods_ready(client: &Client, namespace: &str, selector: &str) -> anyhow::Result<usize> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    let now = Timestamp::now().to_string();
    let mut marked = 0;
    for pod in list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let containers: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| {
                serde_json::json!({
                    "name": c.name, "ready": true, "started": true, "restartCount": 0,
                    "image": c.image.clone().unwrap_or_default(), "imageID": "",
                    "state": {"running": {"startedAt": now}},
                })
            })
            .collect();
        let condition = |t: &str| serde_json::json!({"type": t, "status": "True", "lastTransitionTime": now});
        let status = serde_json::json!({"status": {
            "phase": "Running",
            "podIP": "10.244.0.10",
            "startTime": now,
            "conditions": [condition("PodScheduled"), condition("Initialized"), condition("ContainersReady"), condition("Ready")],
            "containerStatuses": containers,
        }});
        pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await?;
        marked += 1;
    }
    Ok(marked)
}

/// The label selector of the pods of Agent `agent`.
pub fn agent_pods(agent: &str) -> String {
    format!("switchboard.dev/agent={agent}")
}
