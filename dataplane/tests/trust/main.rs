//! Who the shipped servers answer, tried with the real `switchboard` binary over real
//! sockets: the Example Bank's demo tool server serves only callers the gateway vouches for
//! from the namespaces it trusts, and will not serve account calls without the gateway's key;
//! local mode answers its record, agent list, metrics and page only to requests that name it
//! by address or as `localhost`, not to a web page that pointed its own name at 127.0.0.1.

mod demo_tools;
mod local_hosts;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A `switchboard` command run from the repository's root.
fn switchboard(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command.args(args).current_dir(root()).env("RUST_LOG", "warn").env_remove("NO_COLOR");
    command
}

/// A child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` and waits (30 s at most) for a line of its stdout that `found` picks a
/// value from; the rest of its output is read too, so that its prints never meet a closed pipe.
fn start_until<T: Send + 'static>(
    mut command: Command,
    found: impl Fn(&str) -> Option<T> + Send + 'static,
) -> (Running, T) {
    let mut child =
        Running(command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("switchboard starts"));
    let stdout = child.0.stdout.take().expect("stdout");
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(value) = found(&line) {
                let _ = send.send(value);
            }
        }
    });
    let value = receive.recv_timeout(Duration::from_secs(60)).expect("switchboard prints where it listens");
    (child, value)
}

/// Runs `command` to its end (30 s at most); (exit success, stderr).
fn run_to_end(mut command: Command) -> (bool, String) {
    let mut child = Running(command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("starts"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("waits") {
            break status;
        }
        assert!(Instant::now() < deadline, "{command:?} still runs after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    let _ = child.0.stderr.take().expect("stderr").read_to_string(&mut stderr);
    (status.success(), stderr)
}

/// One HTTP/1.1 request to `addr` with `Host: host`; (status, body).
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    stream.write_all(request.as_bytes()).expect("writes");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("reads");
    let response = String::from_utf8_lossy(&response);
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}
