//! Operator-wide settings: what every Agent's children share (runtime image, default
//! resources, drain margin) and where the controller keeps its own objects (routing table,
//! leader Lease). Each is a `clap` flag with an environment variable and a default.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use switchboard_crds::agent::RedactRule;
use switchboard_crds::gateway_key::PublicKeys;
use switchboard_telemetry::LogFormat;

/// The runtime image used when `--runtime-image` is not given.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/switchboard-dev/switchboard:", env!("CARGO_PKG_VERSION"));

/// Settings that shape the children of every Agent (used by `build`, so shared by `run`
/// and `render`).
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct BuildSettings {
    /// Container image of the runtime pods (runs `switchboard runtime`).
    #[arg(long, env = "SWITCHBOARD_RUNTIME_IMAGE", default_value = DEFAULT_IMAGE)]
    pub runtime_image: String,
    /// CPU request of a runtime container whose Agent sets no `resources`.
    #[arg(long, env = "SWITCHBOARD_DEFAULT_CPU_REQUEST", default_value = "100m")]
    pub default_cpu_request: String,
    /// Memory request of a runtime container whose Agent sets no `resources`.
    #[arg(long, env = "SWITCHBOARD_DEFAULT_MEMORY_REQUEST", default_value = "128Mi")]
    pub default_memory_request: String,
    /// Memory limit of a runtime container whose Agent sets no `resources` (no CPU limit is
    /// set, so voice sessions are never throttled).
    #[arg(long, env = "SWITCHBOARD_DEFAULT_MEMORY_LIMIT", default_value = "512Mi")]
    pub default_memory_limit: String,
    /// Seconds added to an Agent's `sessions.drainTimeoutSeconds` to make the pods'
    /// `terminationGracePeriodSeconds`, so the runtime can finish draining and exit cleanly.
    #[arg(long, env = "SWITCHBOARD_DRAIN_MARGIN_SECONDS", default_value_t = 15)]
    pub drain_margin_seconds: u32,
    /// The HorizontalPodAutoscaler API version to write (`autoscaling/v2`, or
    /// `autoscaling/v2beta2` for Kubernetes before 1.23). `run` picks it by API discovery
    /// when this is not given; `render` writes `autoscaling/v2` by default.
    #[arg(long, env = "SWITCHBOARD_HPA_API_VERSION")]
    pub hpa_api_version: Option<String>,
    /// Log format of the runtime pods (`json` or `text`), given to them as
    /// `SWITCHBOARD_LOG_FORMAT`.
    #[arg(long, env = "SWITCHBOARD_RUNTIME_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub runtime_log_format: LogFormat,
    /// The session gateway's Ed25519 public key (64 hex digits or PEM; the gateway logs it
    /// at start), given to runtime pods as `SWITCHBOARD_GATEWAY_PUBLIC_KEY`: they accept
    /// session context (memory, history, handoff) only when the gateway signed it. Several
    /// keys, separated by commas or newlines, are all trusted: give the old and the new
    /// while the gateway's key is rotated (SECURITY.md, "Key rotation"). `run` can instead
    /// follow the key the gateway publishes (`--gateway-key-config-map`). Without either,
    /// runtime pods accept no session context, so cross-pod handoffs cannot carry any.
    #[arg(long, env = switchboard_crds::contract::env::GATEWAY_PUBLIC_KEY)]
    pub gateway_public_key: Option<PublicKeys>,
    /// The Bedrock endpoint URL of runtime pods whose Agent sets no `model.endpoint` (a
    /// VPC interface endpoint, a proxy, or a simulator), given to them as
    /// `SWITCHBOARD_BEDROCK_ENDPOINT`. Unset: the region's public endpoint.
    #[arg(long, env = "SWITCHBOARD_RUNTIME_BEDROCK_ENDPOINT", value_parser = parse_endpoint)]
    pub runtime_bedrock_endpoint: Option<String>,
    /// A PEM file of CA certificates that runtime pods trust for Bedrock instead of the
    /// public roots (a private endpoint behind your own CA, or a simulator). The operator
    /// reads it at start and puts it in every Agent's ConfigMap as `bedrock-ca.pem`; a
    /// change rolls the pods. AgentTest Jobs trust it too for a judge or Amazon Polly with an
    /// `endpointUrl` (the run's ConfigMap holds it, `--judge-ca-file`, `--speech-ca-file`).
    #[arg(long = "runtime-bedrock-ca-file", env = "SWITCHBOARD_RUNTIME_BEDROCK_CA_FILE", value_parser = read_ca_bundle)]
    pub runtime_bedrock_ca: Option<CaBundle>,
    /// The NetworkPolicy that closes runtime pods to all but the gateway.
    #[command(flatten)]
    pub network_policy: NetworkPolicySettings,
    /// Where runtime pods export OpenTelemetry traces.
    #[command(flatten)]
    pub traces: crate::traces::RuntimeTraces,
    /// A redaction rule `name=regex` of the platform, given to runtime pods
    /// (`SWITCHBOARD_RECORD_REDACT`): what is said, when it goes into traces (opted in), is
    /// redacted with these after the built-in detectors and before the Agent's own rules,
    /// as the gateway's record is (the chart passes `gateway.record.redact` to both).
    /// Checked at start. Repeatable; one per line in the variable.
    #[arg(
        long = "runtime-record-redact",
        env = "SWITCHBOARD_RUNTIME_RECORD_REDACT",
        value_delimiter = '\n',
        value_parser = parse_redact_rule
    )]
    pub runtime_record_redact: Vec<RedactRule>,
    /// The session gateway's URL for AgentTest Jobs (`ws://`, e.g.
    /// `ws://sb-switchboard-gateway.sb.svc:80`): they run `switchboard test` in the runtime
    /// image against it. Unset: AgentTests are not accepted (reason `NoGateway`).
    #[arg(long, env = "SWITCHBOARD_AGENT_TEST_GATEWAY", value_parser = parse_gateway_url)]
    pub agent_test_gateway: Option<String>,
}

/// The NetworkPolicy the operator keeps in every namespace with Agents (see
/// [`crate::build::network_policy`]).
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct NetworkPolicySettings {
    /// Keep, in every namespace with Agents, the NetworkPolicy `switchboard-agent-ingress`:
    /// runtime pods take traffic on their port (8080) only from the session gateway's pods
    /// and from `--network-policy-extra-peers`. It is applied before an Agent's pods, owned by
    /// the namespace's Agents (the garbage collector removes it with the last one), and never
    /// written over a NetworkPolicy of that name that the operator did not make (such Agents
    /// get `Accepted=False`, reason `NetworkPolicyNameTaken`). `false` writes none and leaves
    /// those written before to their Agents. Enforced only where the cluster's network plugin
    /// enforces NetworkPolicy. (`run` only: `render` prints each Agent's own children.)
    #[arg(
        long = "network-policy",
        env = "SWITCHBOARD_NETWORK_POLICY",
        default_value_t = true,
        action = clap::ArgAction::Set,
    )]
    pub enabled: bool,
    /// Namespace of the session gateway's pods (default: the routing table's namespace, which
    /// the gateway reads). In that namespace the policy admits the gateway's pods by label
    /// alone; elsewhere by the namespace's `kubernetes.io/metadata.name` label, which
    /// Kubernetes sets from 1.21 on (label the gateway's namespace yourself before that).
    #[arg(long = "network-policy-gateway-namespace", env = "SWITCHBOARD_NETWORK_POLICY_GATEWAY_NAMESPACE")]
    pub gateway_namespace: Option<String>,
    /// Labels of the session gateway's pods, comma-separated `key=value` (the Helm chart
    /// sets its gateway's).
    #[arg(
        long = "network-policy-gateway-labels",
        env = "SWITCHBOARD_NETWORK_POLICY_GATEWAY_LABELS",
        value_delimiter = ',',
        value_parser = parse_label,
        default_value = DEFAULT_GATEWAY_LABEL,
    )]
    pub gateway_labels: Vec<(String, String)>,
    /// More sources runtime pods take traffic from, such as Prometheus: a YAML or JSON list
    /// of NetworkPolicy peers (`podSelector`, `namespaceSelector`, `ipBlock`), e.g.
    /// `[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]`.
    /// A field a peer does not have (a typo) is an error at start.
    #[arg(
        long = "network-policy-extra-peers",
        env = "SWITCHBOARD_NETWORK_POLICY_EXTRA_PEERS",
        value_parser = parse_peers,
        default_value = "[]",
    )]
    pub extra_peers: Peers,
}

/// The gateway pod label the operator assumes when none are given.
pub const DEFAULT_GATEWAY_LABEL: &str = "app.kubernetes.io/name=switchboard-gateway";

/// NetworkPolicy peers given at start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Peers(pub Vec<NetworkPolicyPeer>);

impl Default for NetworkPolicySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            gateway_namespace: None,
            gateway_labels: vec![parse_label(DEFAULT_GATEWAY_LABEL).unwrap_or_default()],
            extra_peers: Peers::default(),
        }
    }
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.trim().split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.trim().to_owned())),
        _ => Err(format!("{text:?} is not a `key=value` label")),
    }
}

/// A YAML (or JSON) list of NetworkPolicy peers; each must name at least one source, and
/// have no field a peer does not have (which would otherwise be dropped without a word).
pub(crate) fn parse_peers(text: &str) -> Result<Peers, String> {
    let value: serde_json::Value = match text.trim() {
        "" => serde_json::Value::Null,
        text => serde_yaml::from_str(text).map_err(|e| format!("the extra peers are not YAML or JSON: {e}"))?,
    };
    if value.is_null() {
        return Ok(Peers::default());
    }
    let peers: Vec<NetworkPolicyPeer> = serde_json::from_value(value.clone())
        .map_err(|e| format!("the extra peers are not a list of NetworkPolicy peers: {e}"))?;
    if let Some(i) =
        peers.iter().position(|p| p.pod_selector.is_none() && p.namespace_selector.is_none() && p.ip_block.is_none())
    {
        return Err(format!("extra peer {i} names no podSelector, namespaceSelector or ipBlock"));
    }
    if serde_json::to_value(&peers).ok().as_ref() != Some(&value) {
        return Err(format!("the extra peers have a field a NetworkPolicy peer does not have (a typo?): {text}"));
    }
    Ok(Peers(peers))
}

/// PEM CA certificates, read from a file when the operator starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaBundle(pub String);

/// Largest CA bundle: it goes into every Agent's ConfigMap (1 MiB in all).
const MAX_CA_BUNDLE_BYTES: usize = 256 * 1024;

fn read_ca_bundle(path: &str) -> Result<CaBundle, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the CA bundle {path}: {e}"))?;
    if bytes.len() > MAX_CA_BUNDLE_BYTES {
        return Err(format!("the CA bundle {path} has {} bytes; at most {MAX_CA_BUNDLE_BYTES} fit", bytes.len()));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("the CA bundle {path} is not PEM text"))?;
    parse_ca_bundle(&text).map_err(|why| format!("the CA bundle {path} {why}"))
}

/// Checks that `text` is PEM holding certificates only (no private key by mistake).
fn parse_ca_bundle(text: &str) -> Result<CaBundle, String> {
    let mut certificates = 0;
    for line in text.lines().map(str::trim).filter(|l| l.starts_with("-----BEGIN ")) {
        if line != "-----BEGIN CERTIFICATE-----" {
            return Err(format!("holds a {line} block; give CA certificates only"));
        }
        certificates += 1;
    }
    if certificates == 0 {
        return Err("holds no -----BEGIN CERTIFICATE----- block".to_owned());
    }
    Ok(CaBundle(text.to_owned()))
}

/// Checks the gateway URL test Jobs use (`--agent-test-gateway`): `ws://` with a host
/// (`switchboard test` speaks plain WebSocket only, as the gateway's in-cluster Service does).
pub fn parse_gateway_url(url: &str) -> Result<String, String> {
    match url.strip_prefix("ws://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') && !rest.contains(char::is_whitespace) => {
            Ok(url.to_owned())
        }
        _ => Err(format!("{url:?} is not a ws:// URL with a host (e.g. ws://sb-switchboard-gateway.sb.svc:80)")),
    }
}

/// `name=regex`, checked as an Agent's `spec.record.redact` rules are.
fn parse_redact_rule(text: &str) -> Result<RedactRule, String> {
    let (name, pattern) =
        text.split_once('=').ok_or_else(|| format!("{text:?} is not name=regex (e.g. account=\\b\\d{{8}}\\b)"))?;
    let rule = RedactRule { name: name.trim().to_owned(), pattern: pattern.to_owned() };
    let problems = switchboard_crds::validate::redact_rule_problems(&rule);
    if problems.is_empty() {
        return Ok(rule);
    }
    let problems: Vec<String> = problems.into_iter().map(|(part, message)| format!("its {part} {message}")).collect();
    Err(format!("the redaction rule {:?}: {}", rule.name, problems.join("; ")))
}

fn parse_endpoint(url: &str) -> Result<String, String> {
    let parsed: http::Uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match (parsed.scheme_str(), parsed.host()) {
        (Some("https" | "http"), Some(_)) => Ok(url.trim_end_matches('/').to_owned()),
        _ => Err(format!("{url:?} is not an http(s) URL with a host")),
    }
}

impl Default for BuildSettings {
    fn default() -> Self {
        Self {
            runtime_image: DEFAULT_IMAGE.to_owned(),
            default_cpu_request: "100m".to_owned(),
            default_memory_request: "128Mi".to_owned(),
            default_memory_limit: "512Mi".to_owned(),
            drain_margin_seconds: 15,
            hpa_api_version: None,
            runtime_log_format: LogFormat::Json,
            gateway_public_key: None,
            runtime_bedrock_endpoint: None,
            runtime_bedrock_ca: None,
            network_policy: NetworkPolicySettings::default(),
            traces: crate::traces::RuntimeTraces::default(),
            runtime_record_redact: Vec::new(),
            agent_test_gateway: None,
        }
    }
}

impl BuildSettings {
    /// These settings with `key` as the gateway's public keys (borrowed when they are already).
    pub fn with_gateway_key(&self, key: Option<PublicKeys>) -> std::borrow::Cow<'_, Self> {
        if self.gateway_public_key == key {
            return std::borrow::Cow::Borrowed(self);
        }
        std::borrow::Cow::Owned(Self { gateway_public_key: key, ..self.clone() })
    }

    /// The resources of a runtime container whose Agent sets none.
    pub fn default_resources(&self) -> ResourceRequirements {
        ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_owned(), Quantity(self.default_cpu_request.clone())),
                    ("memory".to_owned(), Quantity(self.default_memory_request.clone())),
                ]
                .into(),
            ),
            limits: Some([("memory".to_owned(), Quantity(self.default_memory_limit.clone()))].into()),
            ..Default::default()
        }
    }

    /// The HPA apiVersion to write.
    pub fn hpa_api_version(&self) -> &str {
        self.hpa_api_version.as_deref().unwrap_or(crate::build::hpa::HPA_V2)
    }
}

#[cfg(test)]
mod ca_tests {
    use super::*;

    #[test]
    fn a_ca_bundle_holds_certificates_and_nothing_else() {
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(parse_ca_bundle(cert), Ok(CaBundle(cert.to_owned())));
        let with_key = format!("{cert}-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
        assert!(parse_ca_bundle(&with_key).unwrap_err().contains("PRIVATE KEY"));
        assert!(parse_ca_bundle("hello").unwrap_err().contains("no -----BEGIN CERTIFICATE"));
        assert_eq!(parse_endpoint("https://10.0.0.1:8443/"), Ok("https://10.0.0.1:8443".to_owned()));
        assert!(parse_endpoint("bedrock.example").is_err());
        assert!(parse_endpoint("ftp://x").is_err());
    }

    #[test]
    fn extra_peers_are_checked_at_start() {
        let yaml = "[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}, \
                    podSelector: {matchLabels: {app: prometheus}}}, {ipBlock: {cidr: 10.0.0.0/8}}]";
        let peers = parse_peers(yaml).expect("valid").0;
        assert_eq!(peers.len(), 2);
        assert_eq!(parse_peers(&serde_json::to_string(&peers).expect("json")), Ok(Peers(peers)), "JSON too");
        for empty in ["", "[]", "null"] {
            assert_eq!(parse_peers(empty), Ok(Peers::default()), "{empty:?}");
        }
        let typo = parse_peers("[{namespaceSelector: {matchLabel: {a: b}}}]").expect_err("typo");
        assert!(typo.contains("a typo?"), "{typo}");
        assert!(parse_peers("[{}]").expect_err("no source").contains("names no podSelector"));
        assert!(parse_peers("{podSelector: {}}").expect_err("not a list").contains("not a list"));
        assert!(parse_peers("[{podSelector: {matchLabels: {tier: 1}}}]").is_err(), "label values are strings");
        assert_eq!(parse_label(" app = x "), Ok(("app".into(), "x".into())));
        assert!(parse_label("app").is_err() && parse_label("=x").is_err());
    }

    #[test]
    fn network_policy_flags_parse_with_their_defaults() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            build: BuildSettings,
        }
        use clap::Parser;
        let default = Cli::try_parse_from(["x"]).expect("defaults").build;
        assert_eq!(default.network_policy, NetworkPolicySettings::default());
        let cli = Cli::try_parse_from([
            "x",
            "--network-policy=false",
            "--network-policy-gateway-namespace=edge",
            "--network-policy-gateway-labels=app.kubernetes.io/name=switchboard-gateway,app.kubernetes.io/instance=sb",
            "--network-policy-extra-peers=[{ipBlock: {cidr: 10.0.0.0/8}}]",
        ])
        .expect("flags");
        let np = cli.build.network_policy;
        assert!(!np.enabled);
        assert_eq!(np.gateway_namespace.as_deref(), Some("edge"));
        assert_eq!(np.gateway_labels.len(), 2);
        assert_eq!(np.extra_peers.0.len(), 1);
        assert!(Cli::try_parse_from(["x", "--network-policy-extra-peers=[{}]"]).is_err());
    }

    #[test]
    fn the_platforms_redaction_rules_are_checked_at_start() {
        let rule = parse_redact_rule(r"account=\b\d{8}\b").expect("a rule");
        assert_eq!((rule.name.as_str(), rule.pattern.as_str()), ("account", r"\b\d{8}\b"));
        assert_eq!(parse_redact_rule("sort-code=a=b").expect("= in the pattern").pattern, "a=b");
        let shape = parse_redact_rule("account").expect_err("no =");
        assert!(shape.contains("is not name=regex"), "{shape}");
        let bad = parse_redact_rule("account=(").expect_err("does not compile");
        assert!(bad.contains("\"account\"") && bad.contains("not a valid regular expression"), "{bad}");
        assert!(parse_redact_rule("x=a*").expect_err("empty match").contains("matches the empty string"));
        assert!(parse_redact_rule("a b=x").expect_err("name").contains("its name"));
    }

    #[test]
    fn gateway_urls_are_checked() {
        assert!(parse_gateway_url("ws://sb-gateway.sb.svc:80").is_ok());
        assert!(parse_gateway_url("ws://gw.example.com/v1/session").is_ok());
        for bad in ["http://gw:80", "wss://gw:443", "ws://", "ws:///x", "gw:80", "ws://a b"] {
            assert!(parse_gateway_url(bad).is_err(), "{bad}");
        }
    }
}

/// Settings of `switchboard-operator run`.
#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// Log lines as `text` or `json` (one object per line; the Helm chart sets it).
    /// `RUST_LOG` sets the filter (default `info`).
    #[arg(long, env = switchboard_crds::contract::env::LOG_FORMAT, value_enum, default_value_t)]
    pub log_format: LogFormat,
    /// What every Agent's children share.
    #[command(flatten)]
    pub build: BuildSettings,
    /// Follow the session gateway's public key in this ConfigMap (key `public-key`, 64 hex
    /// digits), in the routing table's namespace, and give it to runtime pods: the gateway
    /// writes it there when it starts (the Helm chart sets both sides). A new key rolls the
    /// pods. Until a well-formed key is there, new Agents get no pods and wait with
    /// `Accepted=False` (reason `GatewayKeyMissing`), running ones stay as they are; once a
    /// key is known, a deleted or malformed ConfigMap keeps it. The operator never holds the
    /// gateway's private key.
    #[arg(long, env = switchboard_crds::contract::env::GATEWAY_KEY_CONFIG_MAP, conflicts_with = "gateway_public_key")]
    pub gateway_key_config_map: Option<String>,
    /// Watch only this namespace (default: every namespace).
    #[arg(long, env = "SWITCHBOARD_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Namespace of the operator's own objects: the routing-table ConfigMap and the leader
    /// Lease. Defaults to `POD_NAMESPACE`, then `switchboard-system`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "switchboard-system")]
    pub operator_namespace: String,
    /// Name of the ConfigMap holding the gateway's routing table (key `routes.json`).
    #[arg(long, env = "SWITCHBOARD_ROUTES_NAME", default_value = switchboard_crds::routing::DEFAULT_ROUTES_NAME)]
    pub routes_name: String,
    /// Namespace of the routing-table ConfigMap (default: `--operator-namespace`).
    #[arg(long, env = "SWITCHBOARD_ROUTES_NAMESPACE")]
    pub routes_namespace: Option<String>,
    /// Name of the coordination Lease replicas elect a leader with.
    #[arg(long, env = "SWITCHBOARD_LEASE_NAME", default_value = "switchboard-operator")]
    pub lease_name: String,
    /// Seconds a leader's Lease is valid without renewal; a standby takes over after it.
    #[arg(long, env = "SWITCHBOARD_LEASE_SECONDS", default_value_t = 15)]
    pub lease_seconds: u32,
    /// ServiceAccounts Agents may run as without the `switchboard.dev/agent-usable: "true"`
    /// annotation on the account: comma-separated `namespace/name` or `namespace/*`. Any
    /// other account named in an Agent's `spec.credentials.serviceAccountName` gets
    /// `Accepted=False` (reason `ServiceAccountNotAllowed`).
    #[arg(long, env = "SWITCHBOARD_AGENT_SERVICE_ACCOUNTS", value_delimiter = ',')]
    pub agent_service_accounts: Vec<String>,
    /// Secrets Agents may name (in `spec.credentials.secretRef` and their tools'
    /// `secretHeaders`): comma-separated `namespace/name` or `namespace/*`. An Agent naming
    /// any other gets `Accepted=False` (reason `SecretNotAllowed`) and no pods.
    #[arg(long, env = "SWITCHBOARD_AGENT_SECRETS", value_delimiter = ',')]
    pub agent_secrets: Vec<String>,
    /// Seconds an API request may take (connecting, the response head and, except for
    /// watches, the whole response); a write may also never outlast the leader's fence.
    #[arg(long, env = "SWITCHBOARD_API_TIMEOUT_SECONDS", default_value_t = 10)]
    pub api_timeout_seconds: u64,
    /// This replica's identity in the Lease (default: `POD_NAME`, then host name, plus a
    /// random suffix).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Address of the `/metrics`, `/healthz` and `/readyz` server.
    #[arg(long, env = "SWITCHBOARD_METRICS_ADDR", default_value = "0.0.0.0:8081")]
    pub metrics_addr: SocketAddr,
    /// Agents are reconciled again after this many seconds even without a change (repairs
    /// drift in children the operator does not watch, such as the HPA).
    #[arg(long, env = "SWITCHBOARD_RESYNC_SECONDS", default_value_t = 600)]
    pub resync_seconds: u64,
    /// How many Agents are reconciled at once (and, each, how many Personas and Workflows
    /// get their status written at once): bounds the operator's concurrent API requests,
    /// hence its connections to the API server and its memory.
    #[arg(long, env = "SWITCHBOARD_CONCURRENCY", default_value_t = 16)]
    pub concurrency: u16,
}

impl RunArgs {
    /// Where the routing table goes: (namespace, name).
    pub fn routes_location(&self) -> (String, String) {
        let ns = self.routes_namespace.clone().unwrap_or_else(|| self.operator_namespace.clone());
        (ns, self.routes_name.clone())
    }

    /// Where the gateway publishes its public key, if the operator follows it: (namespace,
    /// name), beside the routing table.
    pub fn gateway_key_location(&self) -> Option<(String, String)> {
        let (namespace, _) = self.routes_location();
        self.gateway_key_config_map.clone().map(|name| (namespace, name))
    }
}
