//! The process around `run`: logging, the tokio runtime, the Kubernetes client, and
//! SIGTERM / Ctrl-C as graceful shutdown.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::settings::RunArgs;

/// Runs the operator process; the exit code is 1 on any error (message on stderr).
pub fn run(args: RunArgs) -> ExitCode {
    switchboard_telemetry::init("info", args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn main(args: RunArgs) -> anyhow::Result<()> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| anyhow::anyhow!("cannot configure a Kubernetes client (kubeconfig or in-cluster): {e}"))?;
    let client = crate::client::build(config)
        .map_err(|e| anyhow::anyhow!("cannot configure a Kubernetes client (kubeconfig or in-cluster): {e}"))?;
    let metrics = Metrics::new()?;
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            wait_for_signal().await;
            tracing::info!("shutting down");
            shutdown.cancel();
        }
    });
    crate::run::run(args, client, metrics, shutdown).await?;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
