//! The HorizontalPodAutoscaler child, written only when the Agent sets `autoscaling`.
//!
//! Built as `autoscaling/v2` (the version current Kubernetes serves). Kubernetes before
//! 1.23 serves only `autoscaling/v2beta2`, whose fields for what is written here (scale
//! target, bounds, one CPU utilisation metric) are identical, so the same body is written
//! under whichever apiVersion `run` found by discovery ([`crate::settings::BuildSettings`]).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use switchboard_crds::Agent;
use switchboard_crds::agent::Autoscaling;

use super::child_meta;

/// `autoscaling/v2`.
pub const HPA_V2: &str = "autoscaling/v2";
/// `autoscaling/v2beta2`, served by Kubernetes 1.12 to 1.25.
pub const HPA_V2BETA2: &str = "autoscaling/v2beta2";
/// The kind.
pub const HPA_KIND: &str = "HorizontalPodAutoscaler";

/// The typed (v2) HPA of `agent`.
pub fn build_typed(agent: &Agent, scaling: &Autoscaling) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: child_meta(agent),
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".to_owned()),
                kind: "Deployment".to_owned(),
                name: agent.name_any(),
            },
            min_replicas: Some(scaling.min_replicas),
            max_replicas: scaling.max_replicas,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".to_owned(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".to_owned(),
                    target: MetricTarget {
                        type_: "Utilization".to_owned(),
                        average_utilization: Some(scaling.target_cpu_utilization_percentage),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The API resource of HPAs at `api_version` (`autoscaling/v2` or `autoscaling/v2beta2`).
pub fn api_resource(api_version: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("autoscaling", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, HPA_KIND), "horizontalpodautoscalers")
}

/// The HPA of `agent` as an object of `api_version`.
pub fn build(agent: &Agent, scaling: &Autoscaling, api_version: &str) -> DynamicObject {
    let typed = build_typed(agent, scaling);
    let data = serde_json::json!({ "spec": typed.spec });
    let mut obj = DynamicObject::new(&agent.name_any(), &api_resource(api_version)).data(data);
    obj.metadata = typed.metadata;
    obj
}
