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
    /// The test's own handle on the listening socket: the port stays this test's when the
    /// server stops, for [`McpServer::start_on`].
    listener: std::net::TcpListener,
}

impl McpServer {
    /// Starts `mcp_server.py` on a free port and waits until it answers HTTP.
    pub async fn start() -> Self {
        Self::serve(std::net::TcpListener::bind("127.0.0.1:0").expect("binds a free port")).await
    }

    /// Starts it on `listener`, the socket a stopped server gave back ([`McpServer::stop`]):
    /// a restarted server on its old address, which no other process could take meanwhile.
    pub async fn start_on(listener: std::net::TcpListener) -> Self {
        Self::serve(listener).await
    }

    /// The test binds the listener and hands it to the server as its standard input: no
    /// other process can take the port between choosing it and serving on it.
    async fn serve(listener: std::net::TcpListener) -> Self {
        let addr = listener.local_addr().expect("the listener's address");
        let kept = listener.try_clone().expect("a handle on the listener");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tools/mcp_server.py");
        let mut child = Command::new(mcp_python())
            .arg(script)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starts the MCP server");
        // Connections queue on the listener from now on; one request answered means served.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("the MCP server's status") {
                panic!("the MCP server exited before serving on {addr}: {status}");
            }
            assert!(Instant::now() < deadline, "the MCP server did not answer on {addr}");
            if answers_http(addr).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { addr, child, listener: kept }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Kills the server; returns its listening socket (still bound and listening:
    /// connections wait there for [`McpServer::start_on`]).
    pub fn stop(mut self) -> std::net::TcpListener {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.listener.try_clone().expect("a handle on the listener")
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

/// Whether `addr` answers an HTTP request within a few seconds (any status will do).
async fn answers_http(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream.write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.ok()?;
        let mut head = [0_u8; 8];
        stream.read_exact(&mut head).await.ok()?;
        Some(head.starts_with(b"HTTP/1."))
    };
    tokio::time::timeout(Duration::from_secs(5), attempt).await.ok().flatten().unwrap_or(false)
}
