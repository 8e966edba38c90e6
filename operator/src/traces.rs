//! What runtime pods are told about OpenTelemetry traces: the operator's flags become the
//! standard `OTEL_*` variables of every runtime container (the runtime reads nothing else),
//! and each pod's resource names its Agent and namespace, so a trace backend can tell the
//! agents apart. Without an endpoint, runtime pods get none of them and trace nothing.

use k8s_openapi::api::core::v1::EnvVar;
use kube::ResourceExt;
use switchboard_crds::Agent;

/// Trace settings of runtime pods (the Helm chart's `telemetry.otlp.*`).
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct RuntimeTraces {
    /// The OTLP/HTTP endpoint runtime pods export traces to: a collector's base URL
    /// (`/v1/traces` is appended), e.g. `http://otel-collector.observability:4318`; given to
    /// them as `OTEL_EXPORTER_OTLP_ENDPOINT`. Unset: runtime pods export no traces.
    #[arg(long = "runtime-otlp-endpoint", env = "SWITCHBOARD_RUNTIME_OTLP_ENDPOINT")]
    pub endpoint: Option<String>,
    /// The sampler of runtime pods (`OTEL_TRACES_SAMPLER`). Unset: the SDK's default,
    /// `parentbased_always_on`, which follows the gateway's decision for each session.
    #[arg(
        long = "runtime-otel-traces-sampler",
        env = "SWITCHBOARD_RUNTIME_OTEL_TRACES_SAMPLER",
        requires = "endpoint"
    )]
    pub sampler: Option<String>,
    /// The sampler's argument (`OTEL_TRACES_SAMPLER_ARG`), e.g. `0.1` for a ratio.
    #[arg(
        long = "runtime-otel-traces-sampler-arg",
        env = "SWITCHBOARD_RUNTIME_OTEL_TRACES_SAMPLER_ARG",
        requires = "endpoint"
    )]
    pub sampler_arg: Option<String>,
}

impl RuntimeTraces {
    /// The variables of `agent`'s runtime container: none without an endpoint.
    pub fn env(&self, agent: &Agent) -> Vec<EnvVar> {
        let Some(endpoint) = &self.endpoint else { return Vec::new() };
        let env = |name: &str, value: String| EnvVar { name: name.to_owned(), value: Some(value), value_from: None };
        let namespace = agent.namespace().unwrap_or_default();
        let mut vars = vec![
            env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            env("OTEL_SERVICE_NAME", "switchboard-runtime".to_owned()),
            // Kubernetes names hold no `,` or `=`: nothing to escape.
            env(
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("k8s.namespace.name={namespace},switchboard.agent={}", agent.name_any()),
            ),
        ];
        if let Some(sampler) = &self.sampler {
            vars.push(env("OTEL_TRACES_SAMPLER", sampler.clone()));
        }
        if let Some(arg) = &self.sampler_arg {
            vars.push(env("OTEL_TRACES_SAMPLER_ARG", arg.clone()));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> Agent {
        serde_yaml::from_str(
            "apiVersion: switchboard.dev/v1alpha1\nkind: Agent\nmetadata: {name: banking, namespace: bank}\n\
             spec: {mode: text, personaRef: {name: clerk}, workflowRef: {name: desk}}\n",
        )
        .expect("an Agent")
    }

    fn vars(traces: &RuntimeTraces) -> Vec<(String, String)> {
        traces.env(&agent()).into_iter().map(|v| (v.name, v.value.unwrap_or_default())).collect()
    }

    #[test]
    fn runtime_pods_get_the_standard_variables_only_with_an_endpoint() {
        assert!(vars(&RuntimeTraces::default()).is_empty());
        let traces = RuntimeTraces {
            endpoint: Some("http://collector.observability:4318".into()),
            sampler: Some("parentbased_traceidratio".into()),
            sampler_arg: Some("0.25".into()),
        };
        let got = vars(&traces);
        let expect = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.observability:4318"),
            ("OTEL_SERVICE_NAME", "switchboard-runtime"),
            ("OTEL_RESOURCE_ATTRIBUTES", "k8s.namespace.name=bank,switchboard.agent=banking"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ];
        assert_eq!(got, expect.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
}
