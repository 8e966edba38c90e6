//! `switchboard demo-tools`: serves the Example Bank demo tool server on its own. Its account
//! endpoints act only for a caller the gateway vouches for, from the Agents of the namespaces
//! it is told to trust; it will not start without them, unless told to trust every request's
//! account number on this machine (`--insecure-no-identity`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use switchboard_core::gateway_keys::GatewayKeys;
use switchboard_demo_tools::{Accounts, Callers, DemoTools, Trusted};

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
    /// the new while the gateway's key is rotated). The account endpoints act only for the
    /// caller the request's X-Switchboard-Identity assertion names, signed by one of the keys
    /// (401 without a valid one, 403 for another account). Required, with
    /// --trusted-namespace, unless --insecure-no-identity.
    #[arg(long, env = "SWITCHBOARD_DEMO_TOOLS_GATEWAY_PUBLIC_KEY", conflicts_with = "insecure_no_identity")]
    gateway_public_key: Option<GatewayKeys>,

    /// A namespace whose Agents this server serves: assertions from the Agents of any other
    /// namespace are refused (403), since any tenant's identity check gets the gateway to
    /// vouch for whoever it says. Repeatable, or comma-separated in the variable; at least one
    /// with --gateway-public-key.
    #[arg(long = "trusted-namespace", env = "SWITCHBOARD_DEMO_TOOLS_TRUSTED_NAMESPACES", value_delimiter = ',')]
    trusted_namespaces: Vec<String>,

    /// An Agent (by name) this server serves, in the trusted namespaces: when given,
    /// assertions from other Agents are refused (403). Repeatable, or comma-separated in the
    /// variable. Default: every Agent of the trusted namespaces.
    #[arg(long = "trusted-agent", env = "SWITCHBOARD_DEMO_TOOLS_TRUSTED_AGENTS", value_delimiter = ',')]
    trusted_agents: Vec<String>,

    /// Trust the account number in each request, with no identity check: anyone who reaches
    /// the server reads any balance and opens disputes. For a demo on this machine only: a
    /// loopback --listen address is required.
    #[arg(long, env = "SWITCHBOARD_DEMO_TOOLS_INSECURE_NO_IDENTITY")]
    insecure_no_identity: bool,
}

/// Serves until Ctrl-C.
pub async fn run(args: DemoToolsArgs) -> anyhow::Result<()> {
    let DemoToolsArgs { data, listen, gateway_public_key, trusted_namespaces, trusted_agents, insecure_no_identity } =
        args;
    let callers = match gateway_public_key {
        Some(keys) => Callers::Verified(Trusted::new(keys, trusted_namespaces)?.with_agents(trusted_agents)),
        None if insecure_no_identity => Callers::Anyone,
        None => anyhow::bail!(
            "the demo tool server needs the gateway's public key (--gateway-public-key) and the namespaces whose \
             Agents it serves (--trusted-namespace), so that its account endpoints act only for a caller the \
             gateway verified; for a demo on this machine only, --insecure-no-identity trusts any request"
        ),
    };
    let accounts = Accounts::load(&data)?;
    let stop = super::shutdown_signal()?;
    let tools = DemoTools::start(accounts, listen, callers.clone()).await.context("demo tool server")?;
    println!("Demo tool server on http://{} (POST /idv /balance /transactions /disputes)", tools.addr);
    match &callers {
        Callers::Verified(trusted) if trusted.agents().is_empty() => println!(
            "Account endpoints act only for the caller the gateway's identity assertion names, for the Agents of {}.",
            trusted.namespaces().join(", ")
        ),
        Callers::Verified(trusted) => println!(
            "Account endpoints act only for the caller the gateway's identity assertion names, for the Agents {} of {}.",
            trusted.agents().join(", "),
            trusted.namespaces().join(", ")
        ),
        Callers::Anyone => {
            println!("Account endpoints trust the account number in each request (--insecure-no-identity).");
            tracing::warn!("--insecure-no-identity: anyone who reaches this server reads any account");
        }
    }
    stop.await;
    tools.stop();
    Ok(())
}
