//! A real MCP server process (Python SDK) on a free port, stopped on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_crds::agent::ToolSpec;
use switchboard_runtime::tools::{Executor, ExecutorOptions};

/// The interpreter with the `mcp` package, from tests/tools/install.sh.
pub fn mcp_python() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
    let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
    assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default().trim()).join("mcp-python")
}

pub struct McpServer {
    pub addr: SocketAddr,
    child: Child,
}

impl McpServer {
    /// Starts `mcp_server.py` on a free port and waits until it accepts connections.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        Self::start_on(port).await
    }

    pub async fn start_on(port: u16) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tools/mcp_server.py");
        let child = Command::new(mcp_python())
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the MCP server");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "the MCP server did not start listening on {addr}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { addr, child }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn stop(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.addr.port()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A ToolSpec calling MCP tool `name` at `url`.
pub fn mcp_tool(name: &str, url: &str, timeout_ms: u32) -> ToolSpec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "description": "test tool",
        "mcp": { "url": url, "timeoutMs": timeout_ms },
    }))
    .expect("a tool spec")
}

pub fn executor() -> Executor {
    Executor::new(ExecutorOptions::default()).expect("an executor")
}
