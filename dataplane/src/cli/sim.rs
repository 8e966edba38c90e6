//! `switchboard sim`: runs the Bedrock Runtime simulator until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use switchboard_sim::{DEFAULT_CERT_NAMES, Script, SimConfig, Simulator, banking_script};

/// Options of `switchboard sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, env = "SWITCHBOARD_SIM_LISTEN", default_value = "127.0.0.1:8443")]
    listen: SocketAddr,

    /// Script file (YAML or JSON) with timing, faults and reply rules. Default: the
    /// bundled Example Bank script (dataplane/sim/banking.yaml).
    #[arg(long, env = "SWITCHBOARD_SIM_SCRIPT")]
    script: Option<PathBuf>,

    /// Where to write the generated certificate (PEM) that clients must trust. Default: a
    /// file in the temporary directory, printed at start and removed at exit.
    #[arg(long, env = "SWITCHBOARD_SIM_CERT_OUT")]
    cert_out: Option<PathBuf>,

    /// Names (DNS or IP) the certificate is valid for; repeat or comma-separate.
    #[arg(long = "cert-name", env = "SWITCHBOARD_SIM_CERT_NAMES", value_delimiter = ',',
          default_values_t = DEFAULT_CERT_NAMES.map(String::from))]
    cert_names: Vec<String>,

    /// A PEM certificate (chain, leaf first) to serve instead of a generated one, e.g. one
    /// your own CA issued for the address pods reach this machine on. Needs --tls-key.
    #[arg(long, env = "SWITCHBOARD_SIM_TLS_CERT", requires = "tls_key", conflicts_with = "plain_http")]
    tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "SWITCHBOARD_SIM_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Serve plain HTTP instead of HTTPS (no certificate is generated).
    #[arg(long, env = "SWITCHBOARD_SIM_PLAIN_HTTP")]
    plain_http: bool,

    /// Most connections open at once.
    #[arg(long, env = "SWITCHBOARD_SIM_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
}

/// Runs the simulator until a shutdown signal.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let SimArgs { listen, script, cert_out, cert_names, tls_cert, tls_key, plain_http, max_connections } = args;
    let script: Script = match &script {
        Some(path) => Script::load(path)?,
        None => banking_script().context("the bundled banking script is broken")?,
    };
    let mut config = SimConfig::new(script);
    config.listen = listen;
    config.tls = !plain_http;
    config.cert_out = cert_out;
    config.cert_names = cert_names;
    if let (Some(cert), Some(key)) = (&tls_cert, &tls_key) {
        let read =
            |path: &PathBuf| std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()));
        config.identity = Some((read(cert)?, read(key)?));
    }
    config.max_connections = max_connections;
    let stop = super::shutdown_signal()?;
    let handle = Simulator::start(config).await?;
    match handle.ca_cert_path() {
        Some(cert) => println!("Bedrock simulator on {} (trust {})", handle.endpoint_url(), cert.display()),
        None => println!("Bedrock simulator on {}", handle.endpoint_url()),
    }
    stop.await;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}
