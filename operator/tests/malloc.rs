//! `switchboard-operator run` re-executes itself with glibc's malloc tunables (see
//! `src/malloc.rs`), keeping its PID, unless `GLIBC_TUNABLES` is set already. The binary runs
//! against an "API server" that accepts connections and never answers, so it stays up
//! (waiting for its first request) while the test reads its environment from `/proc`.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_operator::malloc::{ENV, TUNABLES};

/// Starts `run` against a silent server; `tunables` is `GLIBC_TUNABLES` to start it with.
fn start(dir: &std::path::Path, server: &TcpListener, tunables: Option<&str>) -> Child {
    let addr = server.local_addr().expect("address");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{addr}\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )
    .expect("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard-operator"));
    cmd.args(["run", "--namespace", "ns", "--metrics-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove(ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(t) = tunables {
        cmd.env(ENV, t);
    }
    cmd.spawn().expect("operator")
}

/// The process's `GLIBC_TUNABLES` once it has connected to the server (so past any exec).
fn tunables_of(child: &Child, server: &TcpListener) -> Option<String> {
    server.set_nonblocking(true).expect("nonblocking");
    let start = Instant::now();
    let _conn = loop {
        match server.accept() {
            Ok((conn, _)) => break conn,
            Err(_) if start.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the operator did not connect: {e}"),
        }
    };
    let environ = std::fs::read(format!("/proc/{}/environ", child.id())).expect("environ");
    let prefix = format!("{ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|v| std::str::from_utf8(v).ok())
        .find_map(|v| v.strip_prefix(prefix.as_str()).map(str::to_owned))
}

#[test]
fn run_reexecutes_itself_with_the_malloc_tunables_unless_they_are_set() {
    let dir = std::env::temp_dir().join(format!("switchboard-malloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for (given, expected) in
        [(None, Some(TUNABLES)), (Some(""), Some("")), (Some("glibc.malloc.check=0"), Some("glibc.malloc.check=0"))]
    {
        let server = TcpListener::bind("127.0.0.1:0").expect("listener");
        let mut child = start(&dir, &server, given);
        let seen = tunables_of(&child, &server);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen.as_deref(), expected, "GLIBC_TUNABLES given: {given:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
