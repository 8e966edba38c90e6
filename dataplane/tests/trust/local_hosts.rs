//! `switchboard local` on loopback serves its record, agent list, metrics and page without
//! credentials: only to requests that name it by address or as `localhost`. A web page on
//! evil.example whose name resolves to 127.0.0.1 (DNS rebinding) sends `Host:
//! evil.example:<port>` and gets a refusal that says where to go instead.

use std::net::SocketAddr;

use super::{request, root, start_until, switchboard};

#[test]
fn local_mode_answers_its_data_only_to_the_names_of_this_machine() {
    let dir = std::env::temp_dir().join(format!("switchboard-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let examples = root().join("examples/banking");
    let mut command =
        switchboard(&["local", examples.to_str().expect("utf-8"), "--port", "0", "--record-database-url", &record]);
    command.env("HOME", &dir).env_remove("XDG_DATA_HOME");
    let (_local, addr) = start_until(command, |line| {
        let rest = line.strip_prefix("Web page: http://")?;
        rest.trim_end_matches('/').parse::<SocketAddr>().ok()
    });
    let port = addr.port();

    for path in ["/v1/sessions", "/v1/agents", "/metrics", "/"] {
        let rebound = format!("evil.example:{port}");
        let (status, body) = request(addr, "GET", path, &rebound, &[], "");
        assert_eq!(status, 403, "{path} with Host {rebound}: {body}");
        assert!(body.contains("host_not_local"), "{path}: {body}");
        assert!(body.contains(&format!("http://127.0.0.1:{port}/")), "{path} says where to go: {body}");
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
            let (status, body) = request(addr, "GET", path, &host, &[], "");
            assert_eq!(status, 200, "{path} with Host {host}: {body}");
        }
    }
    let (_, sessions) = request(addr, "GET", "/v1/sessions", &format!("127.0.0.1:{port}"), &[], "");
    assert!(sessions.contains("\"sessions\""), "{sessions}");
    let (_, agents) = request(addr, "GET", "/v1/agents", &format!("localhost:{port}"), &[], "");
    assert!(agents.contains("triage"), "{agents}");
    let _ = std::fs::remove_dir_all(&dir);
}
