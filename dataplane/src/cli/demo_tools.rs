//! `switchboard demo-tools`: serves the Example Bank demo tool server on its own.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use switchboard_core::gateway_keys::GatewayKeys;
use switchboard_dataplane::demo_tools::{Accounts, DemoTools};

/// Options of `switchboard demo-tools`.
#[derive(Debug, Args)]
pub struct DemoToolsArgs {
    /// Fixture accounts (YAML), e.g. examples/banking/tools/accounts.yaml.
    #[arg(long, env = "SWITCHBOARD_DEMO_TOOLS_DATA")]
    data: PathBuf,

    /// Address to listen on.
    #[arg(long, env = "SWITCHBOARD_DEMO_TOOLS_LISTEN", default_value = "127.0.0.1:8090")]
    listen: SocketAddr,

    /// The Switchboard gateway's public key (64 hex digits, as its ConfigMap holds it, or
    /// an Ed25519 PEM public key), or several separated by commas or newlines (the old and
    /// the new while the gateway's key is rotated). When set, the account endpoints act only
    /// for the caller the request's X-Switchboard-Identity assertion names, signed by one of
    /// the keys (401 without a valid one, 403 for another account); unset, they trust the
    /// account number in the request.
    #[arg(long, env = "SWITCHBOARD_DEMO_TOOLS_GATEWAY_PUBLIC_KEY")]
    gateway_public_key: Option<GatewayKeys>,
}

/// Serves until Ctrl-C.
pub async fn run(args: DemoToolsArgs) -> anyhow::Result<()> {
    let DemoToolsArgs { data, listen, gateway_public_key } = args;
    let verifying = gateway_public_key.is_some();
    let tools = DemoTools::start_verifying(Accounts::load(&data)?, listen, gateway_public_key).await?;
    println!("Demo tool server on http://{} (POST /idv /balance /transactions /disputes)", tools.addr);
    if verifying {
        println!("Account endpoints act only for the caller the gateway's identity assertion names.");
    }
    super::shutdown_signal().await?;
    tools.stop();
    Ok(())
}
