//! What runtime pods are told about OpenTelemetry traces: the operator's flags become the
//! standard `OTEL_*` variables of every runtime container (the runtime reads nothing else),
//! and each pod's resource names its Agent and namespace, so a trace backend can tell the
//! agents apart. Without an endpoint, runtime pods get none of them and trace nothing.

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
use kube::ResourceExt;
use switchboard_crds::Agent;

/// Trace settings of runtime pods (the Helm chart's `telemetry.otlp.*`).
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct RuntimeTraces {
    /// The OTLP endpoint runtime pods export traces to: a collector's base URL, e.g.
    /// `http://otel-collector.observability:4318` (OTLP/HTTP: `/v1/traces` is appended) or
    /// `…:4317` (gRPC); given to them as `OTEL_EXPORTER_OTLP_ENDPOINT`. Unset: runtime pods
    /// export no traces.
    #[arg(long = "runtime-otlp-endpoint", env = "SWITCHBOARD_RUNTIME_OTLP_ENDPOINT")]
    pub endpoint: Option<String>,
    /// How runtime pods export (`OTEL_EXPORTER_OTLP_PROTOCOL`): `grpc` or `http/protobuf`.
    /// Unset: the runtime's default, `http/protobuf`.
    #[arg(
        long = "runtime-otlp-protocol",
        env = "SWITCHBOARD_RUNTIME_OTLP_PROTOCOL",
        requires = "endpoint",
        value_parser = ["grpc", "http/protobuf"]
    )]
    pub protocol: Option<String>,
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
    /// A Secret in each Agent's namespace whose key holds the exporter's headers
    /// (`OTEL_EXPORTER_OTLP_HEADERS`: `authorization=Bearer%20<token>,...`), as `<name>` or
    /// `<name>/<key>` (key default `headers`). Optional in the pod: a namespace without it
    /// exports without headers.
    #[arg(
        long = "runtime-otlp-headers-secret",
        env = "SWITCHBOARD_RUNTIME_OTLP_HEADERS_SECRET",
        requires = "endpoint",
        value_parser = parse_secret_key
    )]
    pub headers_secret: Option<(String, String)>,
}

/// `<name>` or `<name>/<key>`: a Secret's name (a DNS subdomain) and a data key.
fn parse_secret_key(text: &str) -> Result<(String, String), String> {
    let (name, key) = text.split_once('/').unwrap_or((text, "headers"));
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if name_ok && key_ok {
        Ok((name.to_owned(), key.to_owned()))
    } else {
        Err(format!(
            "{text:?} is not <secret name>[/<key>]: the name a DNS subdomain, the key letters, digits, '-', '_' or '.'"
        ))
    }
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
        if let Some(protocol) = &self.protocol {
            vars.push(env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.clone()));
        }
        if let Some(sampler) = &self.sampler {
            vars.push(env("OTEL_TRACES_SAMPLER", sampler.clone()));
        }
        if let Some(arg) = &self.sampler_arg {
            vars.push(env("OTEL_TRACES_SAMPLER_ARG", arg.clone()));
        }
        if let Some((name, key)) = &self.headers_secret {
            vars.push(EnvVar {
                name: "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: name.clone(),
                        key: key.clone(),
                        optional: Some(true),
                    }),
                    ..EnvVarSource::default()
                }),
            });
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
            endpoint: Some("http://collector.observability:4317".into()),
            protocol: Some("grpc".into()),
            sampler: Some("parentbased_traceidratio".into()),
            sampler_arg: Some("0.25".into()),
            headers_secret: None,
        };
        let got = vars(&traces);
        let expect = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.observability:4317"),
            ("OTEL_SERVICE_NAME", "switchboard-runtime"),
            ("OTEL_RESOURCE_ATTRIBUTES", "k8s.namespace.name=bank,switchboard.agent=banking"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ];
        assert_eq!(got, expect.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }

    #[test]
    fn the_exporters_headers_come_from_a_secret_of_the_agents_namespace_if_it_has_one() {
        let traces = RuntimeTraces {
            endpoint: Some("https://collector.example:4318".into()),
            headers_secret: Some(parse_secret_key("otlp-auth").expect("a name")),
            ..RuntimeTraces::default()
        };
        let env = traces.env(&agent());
        let headers = env.iter().find(|v| v.name == "OTEL_EXPORTER_OTLP_HEADERS").expect("the headers variable");
        assert_eq!(headers.value, None, "never the value itself");
        let from = headers.value_from.as_ref().and_then(|f| f.secret_key_ref.as_ref()).expect("from a Secret");
        assert_eq!((from.name.as_str(), from.key.as_str(), from.optional), ("otlp-auth", "headers", Some(true)));
        assert_eq!(parse_secret_key("otlp-auth/token"), Ok(("otlp-auth".into(), "token".into())));
        for bad in ["", "Otlp", "otlp/", "a/b/c", "-x", "x/k y"] {
            assert!(parse_secret_key(bad).is_err(), "{bad:?} is refused");
        }
    }
}
