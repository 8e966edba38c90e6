//! `switchboard demo-tools`: serves the Example Bank demo tool server on its own.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
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
}

/// Serves until Ctrl-C.
pub async fn run(args: DemoToolsArgs) -> anyhow::Result<()> {
    let DemoToolsArgs { data, listen } = args;
    let tools = DemoTools::start(Accounts::load(&data)?, listen).await?;
    println!("Demo tool server on http://{} (POST /idv /balance /transactions /disputes)", tools.addr);
    super::shutdown_signal().await?;
    tools.stop();
    Ok(())
}
