//! What the scenarios talk to: a gateway already running (a cluster's, given by URL), or
//! local mode started in this process for a folder of agents — the same
//! [`switchboard_local::start`] that `switchboard local` runs, against the Bedrock simulator by
//! default, on a free loopback port, stopped when the scenarios are done.

use std::path::{Path, PathBuf};

/// A target could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Local mode did not start.
    #[cfg(feature = "local")]
    #[error("local mode for {dir} did not start: {source}")]
    Local {
        /// The folder of agents.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<switchboard_local::LocalError>,
    },
    /// This build has no local mode, so scenarios need a gateway URL.
    #[error(
        "this switchboard was built without local mode (the `local` feature): pass --gateway ws://.../v1/session \
         to run {0}'s scenarios against a running gateway"
    )]
    NoLocalMode(PathBuf),
}

/// How local mode runs models.
#[derive(Clone, Debug, Default)]
pub struct LocalSettings {
    /// Real Amazon Bedrock (the default AWS credential chain) instead of the simulator.
    pub bedrock: bool,
    /// The simulator's script; `None`: the bundled Example Bank script.
    pub sim_script: Option<PathBuf>,
}

/// A running local mode.
#[derive(Debug)]
pub struct LocalTarget {
    /// Its session URL.
    pub url: String,
    #[cfg(feature = "local")]
    stop: tokio::sync::oneshot::Sender<()>,
    #[cfg(feature = "local")]
    done: tokio::task::JoinHandle<Result<(), switchboard_local::LocalError>>,
    #[cfg(feature = "local")]
    sim: Option<switchboard_sim::SimHandle>,
    #[cfg(feature = "local")]
    _demo_tools: Vec<(String, switchboard_demo_tools::DemoTools)>,
}

impl LocalTarget {
    /// Starts local mode for `dir` on a free loopback port.
    #[cfg(feature = "local")]
    pub async fn start(dir: &Path, settings: &LocalSettings) -> Result<Self, TargetError> {
        use switchboard_local::{self as local, LocalOptions};
        use switchboard_runtime::ServerConfig;
        let options = LocalOptions {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            bedrock: settings.bedrock,
            sim_script: settings.sim_script.clone(),
            transcripts: None,
            server: ServerConfig { drain_timeout: std::time::Duration::from_secs(2), ..ServerConfig::default() },
            ca_file: None,
            gateway_key: None,
            capacity: Default::default(),
            // No WebRTC client here: UDP alone.
            webrtc_tcp: None,
            call_webhooks: None,
        };
        let error = |source| TargetError::Local { dir: dir.to_owned(), source: Box::new(source) };
        let local = local::start(dir, options).await.map_err(error)?;
        let addr = local.server.local_addr().map_err(error)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(local.server.run(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            url: format!("ws://{addr}{}", switchboard_crds::contract::SESSION_PATH),
            stop,
            done,
            sim: local.sim,
            _demo_tools: local.demo_tools,
        })
    }

    /// Without local mode in the build: an error saying to pass a gateway URL.
    #[cfg(not(feature = "local"))]
    pub async fn start(dir: &Path, _settings: &LocalSettings) -> Result<Self, TargetError> {
        Err(TargetError::NoLocalMode(dir.to_owned()))
    }

    /// Stops local mode: its sessions are over, so the drain is immediate.
    pub async fn stop(self) {
        #[cfg(feature = "local")]
        {
            let _ = self.stop.send(());
            match self.done.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!("local mode stopped with an error: {error}"),
                Err(error) => tracing::warn!("local mode's task failed: {error}"),
            }
            if let Some(sim) = self.sim {
                sim.shutdown().await;
            }
        }
    }
}

/// The session URL for `--gateway`: the URL as given, with `/v1/session` added when it
/// has no path.
pub fn session_url(gateway: &str) -> String {
    let trimmed = gateway.trim_end_matches('/');
    let after_scheme = trimmed.split_once("://").map_or(trimmed, |(_, rest)| rest);
    if after_scheme.contains('/') {
        gateway.to_owned()
    } else {
        format!("{trimmed}{}", switchboard_crds::contract::SESSION_PATH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_gateway_address_gets_the_session_path() {
        assert_eq!(session_url("ws://10.0.0.1:80"), "ws://10.0.0.1:80/v1/session");
        assert_eq!(session_url("ws://10.0.0.1:80/"), "ws://10.0.0.1:80/v1/session");
        assert_eq!(session_url("wss://gw.example/v1/session?agent=x"), "wss://gw.example/v1/session?agent=x");
    }
}
