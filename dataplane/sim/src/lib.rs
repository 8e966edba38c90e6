//! A local Bedrock Runtime simulator: an HTTPS (or plain HTTP) server that speaks the
//! service's wire protocol, so the real `aws-sdk-bedrockruntime` client works against it
//! unchanged apart from its endpoint and trusted certificate. It never needs AWS
//! credentials and ignores SigV4 signatures.
//!
//! Served operations: ConverseStream and Converse ([`converse`]), and Nova Sonic's
//! InvokeModelWithBidirectionalStream ([`sonic`]). Replies come from a [`Script`] of
//! rules with pacing and fault injection. Besides Bedrock, Amazon Polly's SynthesizeSpeech
//! ([`polly`]) renders a text as a phrase tone its Nova Sonic side then hears as that text.
//! `GET /stats` ([`STATS_PATH`]) answers its counters.
//!
//! ```no_run
//! # async fn demo() -> Result<(), switchboard_sim::SimError> {
//! use switchboard_sim::{SimConfig, Simulator, Script};
//! let handle = Simulator::start(SimConfig::new(Script::echo())).await?;
//! println!("endpoint {} trusting {:?}", handle.endpoint_url(), handle.ca_cert_path());
//! handle.shutdown().await;
//! # Ok(()) }
//! ```

pub mod converse;
pub mod engine;
mod http;
pub mod polly;
pub mod script;
mod server;
pub mod service_error;
pub mod sonic;
pub mod state;
pub mod template;
pub mod tls;
pub mod tokens;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use script::{BANKING_SCRIPT_YAML, Script, ScriptError, banking_script};
pub use state::{Operation, SimStats};
pub use tls::DEFAULT_CERT_NAMES;

use state::SimState;

/// `GET` here answers the simulator's counters as JSON: `operations` ([`SimStats`]: requests
/// per operation, model calls, faults) and `sonic` ([`sonic::SonicCounters`]: streams,
/// utterances heard, replies sent, ...), so a load test run against a gateway whose models
/// are this simulator can compare what it reports with what the models saw.
pub const STATS_PATH: &str = "/stats";

/// How to run a simulator.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Address to listen on; port 0 picks a free port. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated self-signed certificate (default), or plain HTTP.
    pub tls: bool,
    /// Where to write the certificate (PEM) clients must trust; `None` writes it to a
    /// file in the system's temporary directory, removed at shutdown.
    pub cert_out: Option<PathBuf>,
    /// Names the certificate is valid for. Default: localhost, 127.0.0.1, ::1.
    pub cert_names: Vec<String>,
    /// A certificate (PEM chain, leaf first) and its private key (PEM) to serve instead
    /// of generating one; `cert_names` is then unused.
    pub identity: Option<(String, String)>,
    /// The behaviour.
    pub script: Script,
    /// Most connections open at once; more are refused. Default 1024.
    pub max_connections: usize,
    /// Largest request body, in bytes. Default 20 MiB.
    pub max_request_bytes: usize,
}

impl SimConfig {
    /// Defaults with `script`.
    pub fn new(script: Script) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            cert_out: None,
            cert_names: DEFAULT_CERT_NAMES.iter().map(|n| (*n).to_owned()).collect(),
            identity: None,
            script,
            max_connections: 1024,
            max_request_bytes: 20 * 1024 * 1024,
        }
    }
}

/// The simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The listen address is not usable.
    #[error("cannot listen on {addr}: {message}; pick another address or port")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
    /// The certificate could not be made or served.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    /// The certificate file could not be written.
    #[error("cannot write the certificate to {path}: {message}; check that the directory exists and is writable")]
    CertOut {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The script is not valid.
    #[error(transparent)]
    Script(#[from] ScriptError),
}

/// Starts simulators.
#[derive(Debug)]
pub struct Simulator;

impl Simulator {
    /// Binds, writes the certificate (when TLS is on) and starts serving in the
    /// background. The returned handle stops the server when shut down or dropped.
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        config.script.validate()?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| SimError::Listen { addr: config.listen, message: e.to_string() })?;
        let local_addr =
            listener.local_addr().map_err(|e| SimError::Listen { addr: config.listen, message: e.to_string() })?;
        let (tls, cert) = if config.tls {
            let generated = match &config.identity {
                Some((cert, key)) => tls::from_pem(cert, key)?,
                None => tls::self_signed(&config.cert_names)?,
            };
            let (path, temporary) = match &config.cert_out {
                Some(path) => (path.clone(), false),
                None => (temp_cert_path(local_addr), true),
            };
            write_cert(&path, &generated.cert_pem).await?;
            (Some(generated.acceptor), Some(CertFile { path, pem: generated.cert_pem, temporary }))
        } else {
            (None, None)
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let host = if local_addr.ip().is_unspecified() { "localhost".to_owned() } else { local_addr.ip().to_string() };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let endpoint_url = format!("{scheme}://{host}:{}", local_addr.port());
        let state = Arc::new(SimState::new(config.script, config.max_request_bytes));
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let server = server::Server {
            listener,
            tls,
            state: state.clone(),
            shutdown: shutdown.clone(),
            tracker: tracker.clone(),
            max_connections: config.max_connections,
        };
        let accept = tokio::spawn(server.run());
        tracing::info!(%endpoint_url, cert = ?cert.as_ref().map(|c| &c.path), "Bedrock simulator listening");
        Ok(SimHandle { endpoint_url, local_addr, cert, state, shutdown, tracker, accept: Some(accept) })
    }
}

#[derive(Debug)]
struct CertFile {
    path: PathBuf,
    pem: String,
    temporary: bool,
}

fn temp_cert_path(addr: SocketAddr) -> PathBuf {
    std::env::temp_dir().join(format!("switchboard-sim-{}-{}.pem", std::process::id(), addr.port()))
}

async fn write_cert(path: &Path, pem: &str) -> Result<(), SimError> {
    tokio::fs::write(path, pem)
        .await
        .map_err(|e| SimError::CertOut { path: path.display().to_string(), message: e.to_string() })
}

/// A running simulator.
#[derive(Debug)]
pub struct SimHandle {
    endpoint_url: String,
    local_addr: SocketAddr,
    cert: Option<CertFile>,
    state: Arc<SimState>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    accept: Option<tokio::task::JoinHandle<()>>,
}

impl SimHandle {
    /// The URL to give the SDK as its endpoint, e.g. `https://127.0.0.1:40123`.
    pub fn endpoint_url(&self) -> &str {
        &self.endpoint_url
    }

    /// The address the simulator listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The PEM file of the certificate clients must trust (`None` over plain HTTP).
    pub fn ca_cert_path(&self) -> Option<&Path> {
        self.cert.as_ref().map(|c| c.path.as_path())
    }

    /// The certificate clients must trust, PEM (`None` over plain HTTP).
    pub fn ca_cert_pem(&self) -> Option<&str> {
        self.cert.as_ref().map(|c| c.pem.as_str())
    }

    /// The counters now.
    pub fn stats(&self) -> SimStats {
        self.state.stats()
    }

    /// The texts SynthesizeSpeech rendered so far, by the phrase id it gave them.
    pub fn spoken_phrases(&self) -> std::collections::BTreeMap<u32, String> {
        self.state.spoken.snapshot()
    }

    /// The bidirectional (Nova Sonic) operation's counters now.
    pub fn sonic_stats(&self) -> sonic::SonicStats {
        self.state.sonic.snapshot()
    }

    /// Stops accepting, lets open connections finish (up to a few seconds), and removes
    /// a temporary certificate file.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(accept) = self.accept.take()
            && let Err(error) = accept.await
        {
            tracing::warn!(%error, "the simulator's accept loop failed");
        }
        self.tracker.close();
        if tokio::time::timeout(Duration::from_secs(10), self.tracker.wait()).await.is_err() {
            tracing::warn!("simulator connections did not finish in time");
        }
        if let Some(cert) = self.cert.take().filter(|c| c.temporary)
            && let Err(error) = tokio::fs::remove_file(&cert.path).await
        {
            tracing::debug!(%error, path = %cert.path.display(), "cannot remove the temporary certificate");
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(cert) = self.cert.as_ref().filter(|c| c.temporary) {
            // Best effort: the file is in the temporary directory either way.
            let _ = std::fs::remove_file(&cert.path);
        }
    }
}
