//! The contract between the operator and the runtime pods it deploys: what the operator's
//! Deployment builder writes (environment variables, the mounted RuntimeSpec's path, the
//! port and its probes, the user the container runs as) and what `switchboard runtime`
//! reads. Both sides, and the tests, use these constants, so neither can drift alone.

/// The data plane's binary in the image, and the subcommand a runtime pod runs.
pub const RUNTIME_COMMAND: [&str; 2] = ["switchboard", "runtime"];

/// Where the RuntimeSpec ConfigMap is mounted in a runtime pod.
pub const CONFIG_DIR: &str = "/etc/switchboard";
/// The ConfigMap key (and so the file name under [`CONFIG_DIR`]) of the resolved RuntimeSpec.
pub const RUNTIME_SPEC_FILE: &str = "runtime.json";
/// [`CONFIG_DIR`]`/`[`RUNTIME_SPEC_FILE`]: the runtime's default spec path.
pub const RUNTIME_SPEC_PATH: &str = "/etc/switchboard/runtime.json";

/// The runtime pods' (and their Service's) port.
pub const RUNTIME_PORT: u16 = 8080;
/// The name of [`RUNTIME_PORT`] on pods and Service.
pub const PORT_NAME: &str = "http";
/// The address a runtime pod listens on: every interface, [`RUNTIME_PORT`].
pub const LISTEN_ADDR: &str = "0.0.0.0:8080";

/// The session WebSocket path, on runtime pods, local mode and the gateway alike.
pub const SESSION_PATH: &str = "/v1/session";
/// Liveness: answers 200 while the process serves.
pub const HEALTH_PATH: &str = "/healthz";
/// Readiness: 200 while the pod takes new sessions, 503 while it drains.
pub const READY_PATH: &str = "/readyz";
/// Prometheus metrics.
pub const METRICS_PATH: &str = "/metrics";

/// The user and group every Switchboard container runs as (non-root; the distroless
/// `nonroot` ids). The image is built with the same user.
pub const RUN_AS: i64 = 65532;

/// `app.kubernetes.io/managed-by` of everything the operator creates for an Agent (its
/// Service's Endpoints carry it too, so the gateway watches exactly those).
pub const MANAGED_BY: &str = "switchboard-operator";
/// The label naming the Agent a child belongs to.
pub const AGENT_LABEL: &str = "switchboard.dev/agent";
/// The label (value `"true"`) on an Agent's candidate children and pods: the spec it is
/// about to roll out, served only to test sessions while its rollout is held until its
/// AgentTests pass.
pub const CANDIDATE_LABEL: &str = "switchboard.dev/candidate";
/// The suffix of an Agent's candidate children's names (`<agent>-candidate`).
pub const CANDIDATE_SUFFIX: &str = "-candidate";

/// Environment variables the operator sets on runtime containers.
pub mod env {
    /// The agent's mode: `voice`, `text` or `hybrid`.
    pub const MODE: &str = "MODE";
    /// The RuntimeSpec file's path.
    pub const RUNTIME_SPEC: &str = "SWITCHBOARD_RUNTIME_SPEC";
    /// The address to listen on.
    pub const LISTEN: &str = "SWITCHBOARD_LISTEN";
    /// The async worker threads, sized from the pod's CPU.
    pub const WORKER_THREADS: &str = "SWITCHBOARD_WORKER_THREADS";
    /// `text` or `json` log lines.
    pub const LOG_FORMAT: &str = "SWITCHBOARD_LOG_FORMAT";
    /// The gateway's private key file (it signs the session context it gives runtimes);
    /// on the gateway only, never on the operator.
    pub const GATEWAY_KEY_FILE: &str = "SWITCHBOARD_GATEWAY_KEY_FILE";
    /// The ConfigMap, beside the routing table, that the gateway publishes its public key in
    /// and the operator reads it from (see [`crate::gateway_key`]); on both.
    pub const GATEWAY_KEY_CONFIG_MAP: &str = "SWITCHBOARD_GATEWAY_KEY_CONFIGMAP";
    /// The gateway's public key, on runtime pods (they verify that context with it).
    pub const GATEWAY_PUBLIC_KEY: &str = "SWITCHBOARD_GATEWAY_PUBLIC_KEY";
    /// A runtime pod's own IP (the downward API's `status.podIP`): it accepts only grants
    /// for it.
    pub const POD_IP: &str = "SWITCHBOARD_POD_IP";
    /// The Bedrock endpoint URL, when the platform sets one and the Agent does not.
    pub const BEDROCK_ENDPOINT: &str = "SWITCHBOARD_BEDROCK_ENDPOINT";
    /// A PEM file of the CA certificates to trust for Bedrock instead of the public roots.
    pub const BEDROCK_CA_FILE: &str = "SWITCHBOARD_BEDROCK_CA_FILE";
    /// Where the runtime reads the Secrets of tools' `secretHeaders`.
    pub const SECRETS_DIR: &str = "SWITCHBOARD_SECRETS_DIR";
    /// The folder of the Agent's model credentials (its `credentials.secretRef`, mounted).
    pub const CREDENTIALS_DIR: &str = "SWITCHBOARD_CREDENTIALS_DIR";
    /// The platform's redaction rules (`name=regex`, one per line), for the gateway's
    /// record and for what runtimes put into traces when opted in.
    pub const RECORD_REDACT: &str = "SWITCHBOARD_RECORD_REDACT";
}

/// Where runtime pods mount the Secret of an Agent's `credentials.secretRef`: one file per
/// key (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`; or
/// `OPENAI_API_KEY`), read again as they age, so a rotated Secret reaches running pods
/// without a restart.
pub const CREDENTIALS_DIR: &str = "/etc/switchboard/credentials";

/// Where runtime pods mount the Secrets of tools' `secretHeaders`: one folder per Secret,
/// one file per key (`<dir>/<secret>/<key>`).
pub const SECRETS_DIR: &str = "/etc/switchboard/secrets";

/// The ConfigMap key (and file name under [`CONFIG_DIR`]) of the platform's Bedrock CA
/// bundle, when the operator is given one.
pub const BEDROCK_CA_FILE: &str = "bedrock-ca.pem";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_constants_agree_with_their_parts() {
        assert_eq!(RUNTIME_SPEC_PATH, format!("{CONFIG_DIR}/{RUNTIME_SPEC_FILE}"));
        assert_ne!(BEDROCK_CA_FILE, RUNTIME_SPEC_FILE);
        assert_eq!(LISTEN_ADDR, format!("0.0.0.0:{RUNTIME_PORT}"));
    }
}
