//! `switchboard gateway` as a process of its own, routing to the fleet's runtimes by a
//! routes file (as on a VM), for the tests that need what only a process has: its RSS,
//! or a SIGKILL.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use switchboard_crds::routing::{RoutingTable, SESSION_PATH};

use crate::client::get;
use crate::fleet::{Fleet, KEY};
use crate::served;

/// A gateway process, killed (and waited for) when dropped.
pub struct GatewayProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl GatewayProcess {
    /// Starts a gateway with the routes file and key in `dir` (see [`write_routes`]) and
    /// the extra `args`; returns once it is ready.
    pub async fn start(dir: &Path, args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        // Port 0: the gateway binds a free port itself and logs it (no port to race for).
        command
            .args(["gateway", "--listen", "127.0.0.1:0"])
            .arg("--gateway-key-file")
            .arg(dir.join("gateway.pem"))
            .arg("--routes-file")
            .arg(dir.join("routes.json"))
            .args(args);
        let (child, addr) = served::spawn_gateway(command);
        let process = Self { child, addr };
        // The address is the one this process bound; ready when its /readyz says so.
        for _ in 0..200 {
            if get(addr, "/readyz").await.0 == 200 {
                return process;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gateway did not become ready");
    }

    /// Its sessions' URL.
    pub fn url(&self) -> String {
        format!("ws://{}{SESSION_PATH}", self.addr)
    }

    /// Kills it at once (SIGKILL): no drain, no park; the kernel resets its sockets.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fresh folder with the fleet gateway's key and a routes file naming the fleet's
/// runtimes for the Example Bank agents; `via` may put another address (a proxy) in front
/// of an agent's.
pub fn write_routes(fleet: &Fleet, via: impl Fn(&str, SocketAddr) -> SocketAddr) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-gateway-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let directory = fleet.directory.borrow().clone();
    let routes = ["triage", "idv", "banking", "disputes"]
        .into_iter()
        .map(|name| {
            let target = directory.lookup("bank", name, switchboard_gateway::Reach::Live).expect("a route");
            let addr = via(name, target.ready[0]);
            let mut route = target.route.clone();
            route.service = addr.ip().to_string();
            route.port = addr.port();
            route
        })
        .collect();
    std::fs::write(dir.join("routes.json"), RoutingTable::new(routes).to_json()).expect("routes");
    let key = switchboard_core::grant::GatewaySigner::from_seed(&KEY).to_pem().expect("pem");
    std::fs::write(dir.join("gateway.pem"), key).expect("key");
    dir
}
