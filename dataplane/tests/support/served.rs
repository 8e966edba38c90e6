//! Ports without a race: a `switchboard` server the tests start listens on port 0 and the
//! test reads the address it bound from its own log line (`gateway serving /v1/session
//! addr=...`, `runtime serving /v1/session ... addr=...`), instead of choosing a free port,
//! releasing it and hoping no other process takes it before the server binds it. The line
//! comes from the process itself once it holds the socket, so whatever answers there is
//! that process. And a port where nothing listens, held so that nothing can.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The log filter that keeps `level` for everything and `info` for the lines that say
/// where a server serves (the binary's `cli` module).
pub fn log_filter(level: &str) -> String {
    format!("{level},switchboard::cli=info")
}

/// The address in a text or JSON log line that contains `marker` (`addr=127.0.0.1:port`
/// or `"addr":"127.0.0.1:port"`).
pub fn served_addr(line: &str, marker: &str) -> Option<SocketAddr> {
    if !line.contains(marker) {
        return None;
    }
    let text = line.split_once("addr=").or_else(|| line.split_once("\"addr\":\""))?.1;
    text.split(|c: char| c.is_whitespace() || c == '"' || c == ',').next()?.parse().ok()
}

/// Spawns `command` (a server told to listen on port 0, its log on stderr as text) and
/// waits up to `patience` for its line containing `marker`; returns the process and the
/// address that line names. Every other line goes to `each` (on the reading thread). Panics
/// with what the process wrote when it exits or stays silent.
pub fn spawn_serving(
    mut command: Command,
    marker: &str,
    patience: Duration,
    mut each: impl FnMut(&str) + Send + 'static,
) -> (Child, SocketAddr) {
    // RUST_LOG would replace the filter that lets the serving line through.
    let mut child = command.env_remove("RUST_LOG").stderr(Stdio::piped()).spawn().expect("starts the server");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let wanted = marker.to_owned();
    std::thread::spawn(move || {
        let mut early = Vec::new();
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && let Some(addr) = served_addr(&line, &wanted) {
                let _ = tx.send(Ok(addr));
                sent = true;
            } else if !sent {
                early.push(line.clone());
            }
            each(&line);
        }
        let _ = tx.send(Err(early.join("\n")));
    });
    match rx.recv_timeout(patience) {
        Ok(Ok(addr)) => (child, addr),
        Ok(Err(log)) => {
            let status = child.wait().ok();
            panic!("the server exited ({status:?}) before `{marker}`:\n{log}")
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no `{marker}` line in {patience:?}")
        }
    }
}

/// Spawns `switchboard gateway` (its further arguments in `command`, which must include
/// `--listen 127.0.0.1:0`) logging at `warn` as text, its stdout dropped; returns the
/// process and the address it bound. Its other log lines go to the test's stderr.
pub fn spawn_gateway(mut command: Command) -> (Child, SocketAddr) {
    command
        .env("SWITCHBOARD_LOG", log_filter("warn"))
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null());
    let marker = "gateway serving /v1/session";
    spawn_serving(command, marker, Duration::from_secs(30), move |line| {
        if !line.contains(marker) {
            eprintln!("{line}");
        }
    })
}

/// A TCP port on 127.0.0.1 bound and not listening, for as long as the value lives: a
/// connection there is refused (nothing listens), and no other process can take the port
/// meanwhile (a port chosen free and released could be anyone's a moment later).
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    addr: SocketAddr,
}

impl ClosedPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("binds");
        let addr = socket.local_addr().expect("its address");
        Self { _socket: socket, addr }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}
