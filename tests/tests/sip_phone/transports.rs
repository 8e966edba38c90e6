//! Outbound calls over TCP and TLS: the edge's trunk is a baresip phone's TCP address
//! (`sip:...;transport=tcp`) or its TLS address (`sips:...`, the phone's certificate issued
//! by the test's own CA, which the edge trusts with `--outbound-ca`). A call placed with
//! `POST /v1/calls` (`switchboard call`) is answered by the phone, which hears the agent; the
//! edge's connection to the trunk carries the dialogue (the phone's BYE comes back on it).
//! A trunk whose certificate the edge does not trust fails the call with that reason, and
//! the edge counts the handshake that failed. With two named trunks (two phones, one over
//! UDP, one over TCP), each call reaches the phone of the trunk it names, a call naming none
//! the default's, and a trunk no edge has is refused (404 `unknown_trunk`). A trunk
//! connection that closes mid-call (a TCP relay the test cuts) is opened again for the
//! edge's BYE, which reaches the phone.

use std::path::Path;
use std::time::Duration;

use std::process::Command;

use crate::outbound::call;
use crate::phone::{Callee, free_phone_port};
use crate::relay::TcpRelay;
use crate::stack::{Stack, gateway_url, sample, stack_with, wait_for, wait_for_edge_sample};

/// The edge with `trunk` as its outbound trunk (and `more` flags), once it takes calls.
fn trunk_stack(name: &str, trunk: &str, more: &[&str]) -> Stack {
    let args = [&["--outbound-trunk", trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", "20"][..], more];
    let stack = stack_with(name, &args.concat());
    stack.taking_outbound_calls()
}

/// A baresip config line naming its TLS certificate and key (`tls.crt` and `tls.key` of
/// `certs`, joined into one PEM as baresip reads them).
fn phone_certificate(certs: &Path) -> String {
    let pem = [certs.join("tls.crt"), certs.join("tls.key")]
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("a PEM"))
        .collect::<String>();
    let file = certs.join("phone.pem");
    std::fs::write(&file, pem).expect("phone.pem");
    format!("sip_certificate {}\n", file.display())
}

/// Places a call to `callee` and checks it was answered, the callee heard the agent, and
/// the edge's connection to the trunk over `transport` was opened once and counted.
fn answered_over(stack: &Stack, callee: &Callee, transport: &str) {
    let placed = call(stack, &callee.uri(), &["customer=Ada"]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the call is answered",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outbound call answered"),
        context,
    );
    std::thread::sleep(Duration::from_secs(10));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains("answered (SIP 200)"), "{printed}\n{}", context());
    assert!(printed.contains("completed"), "the phone's BYE on the connection ended it: {printed}\n{}", context());
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the callee heard the agent: {voiced} voiced windows: {windows:?}\n{}", context());
    let edge = stack.edge.log_text();
    let upper = transport.to_ascii_uppercase();
    assert!(edge.contains(&format!("transport=\"{upper}\"")) || edge.contains(&format!("transport={upper}")), "{edge}");
    assert!(edge.contains("connected to the outbound trunk"), "{edge}");
    let series =
        format!("switchboard_sip_outbound_connections_total{{outcome=\"established\",transport=\"{transport}\"}}");
    wait_for_edge_sample(stack, &series, 1.0);
}

#[test]
fn an_outbound_call_over_tcp_is_answered_by_a_phone_that_hears_the_agent() {
    let port = free_phone_port();
    let stack = trunk_stack("out-tcp", &format!("sip:127.0.0.1:{port};transport=tcp"), &[]);
    let callee = Callee::listen_over(&stack, "callee", port, "tcp", "");
    answered_over(&stack, &callee, "tcp");
}

#[test]
fn an_outbound_call_over_tls_verifies_the_trunk_and_is_answered_and_an_untrusted_trunk_fails() {
    let port = free_phone_port();
    // Not the stack's own folder (switchboard-sip-out-tls-<pid>), which it empties as it starts.
    let certs = std::env::temp_dir().join(format!("switchboard-sip-certs-out-tls-{}", std::process::id()));
    crate::tls::certificates(&certs);
    let ca = certs.join("ca.crt");
    let trunk = format!("sips:127.0.0.1:{}", port + 1);
    let stack = trunk_stack("out-tls", &trunk, &["--outbound-ca", ca.to_str().expect("a path")]);
    let callee = Callee::listen_over(&stack, "callee", port, "tls", &phone_certificate(&certs));
    answered_over(&stack, &callee, "tls");
    drop(callee);
    drop(stack);

    // The same phone's certificate, but the edge trusts another CA: no call, and why.
    let other = certs.join("other");
    crate::tls::certificates(&other);
    let port = free_phone_port();
    let trunk = format!("sip:127.0.0.1:{};transport=tls", port + 1);
    let other_ca = other.join("ca.crt");
    let stack = trunk_stack("out-tls-untrusted", &trunk, &["--outbound-ca", other_ca.to_str().expect("a path")]);
    let callee = Callee::listen_over(&stack, "callee", port, "tls", &phone_certificate(&certs));
    let (ok, printed) = call(&stack, &callee.uri(), &[]).join().expect("switchboard call");
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    assert!(!ok, "{printed}\n{}", context());
    assert!(printed.contains("failed"), "{printed}\n{}", context());
    assert!(
        printed.contains("the TLS handshake failed") && printed.contains("invalid peer certificate"),
        "the reason names the certificate: {printed}\n{}",
        context()
    );
    assert!(!callee.phone.log().contains("call: answering call"), "nothing reached the phone:\n{}", context());
    let metrics = wait_for_edge_sample(
        &stack,
        r#"switchboard_sip_outbound_connections_total{outcome="handshake_failed",transport="tls"}"#,
        1.0,
    );
    let established = r#"switchboard_sip_outbound_connections_total{outcome="established",transport="tls"}"#;
    assert_eq!(sample(&metrics, established), None, "{metrics}");
    let _ = std::fs::remove_dir_all(&certs);
}

/// `switchboard call <to> --trunk <trunk>` (none: the default) on a thread: whether it was
/// answered, and what it printed.
fn call_through(stack: &Stack, to: &str, trunk: Option<&str>) -> std::thread::JoinHandle<(bool, String)> {
    let mut command = Command::new(&stack.binary);
    command.args(["call", to, "--agent", "triage", "--gateway", &gateway_url(stack), "--follow-seconds", "60"]);
    if let Some(trunk) = trunk {
        command.args(["--trunk", trunk]);
    }
    std::thread::spawn(move || {
        let out = command.output().expect("switchboard call runs");
        let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), printed)
    })
}

#[test]
fn two_named_trunks_each_get_the_calls_meant_for_them_and_an_unknown_trunk_is_refused() {
    let (north_port, south_port) = (free_phone_port(), free_phone_port());
    let north = format!("north=sip:127.0.0.1:{north_port}");
    let south = format!("south=sip:127.0.0.1:{south_port};transport=tcp");
    let more = ["--outbound-trunk", &south, "--default-outbound-trunk", "south", "--caller-id", "south=+4930999"];
    let stack = trunk_stack("out-two", &north, &more);
    let north = Callee::listen_over(&stack, "north", north_port, "udp", "");
    let south = Callee::listen_over(&stack, "south", south_port, "tcp", "");
    let context = || {
        format!(
            "--- edge ---\n{}\n--- north ---\n{}\n--- south ---\n{}",
            stack.edge.log_text(),
            north.phone.log(),
            south.phone.log()
        )
    };
    // The same URI both ways: only the trunk decides which phone rings.
    let to = "sip:callee@127.0.0.1:9";
    let answered = |n: usize| stack.edge.log_text().matches("outbound call answered").count() >= n;
    let placed = call_through(&stack, to, Some("north"));
    wait_for("north's phone answers", Duration::from_secs(40), || answered(1), context);
    std::thread::sleep(Duration::from_secs(3));
    north.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains(" through north "), "{printed}\n{}", context());
    assert!(north.phone.log().contains("call: answering call"), "{}", context());
    assert!(!south.phone.log().contains("call: answering call"), "south's phone did not ring: {}", context());

    // No trunk named: the default (south, over TCP), from its own caller-id.
    let placed = call_through(&stack, to, None);
    wait_for("south's phone answers", Duration::from_secs(40), || answered(2), context);
    std::thread::sleep(Duration::from_secs(3));
    south.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains("completed"), "{printed}\n{}", context());
    assert!(south.phone.log().contains("call: answering call"), "{}", context());
    assert!(south.phone.log().contains("+4930999"), "south's caller-id: {}", context());
    assert_eq!(north.phone.log().matches("call: answering call").count(), 1, "north rang once: {}", context());

    let (ok, refused) = call_through(&stack, to, Some("west")).join().expect("switchboard call");
    assert!(!ok && refused.contains("404 unknown_trunk"), "{refused}");
    assert!(refused.contains("the trunks are: north, south"), "names the trunks: {refused}");
}

#[test]
fn a_trunk_connection_that_closes_mid_call_is_opened_again_for_the_edges_bye() {
    let port = free_phone_port();
    let relay = TcpRelay::to(port);
    let stack = trunk_stack("out-reopen", &format!("sip:127.0.0.1:{};transport=tcp", relay.port), &[]);
    let callee = Callee::listen_over(&stack, "callee", port, "tcp", "");
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    let placed = call(&stack, &callee.uri(), &[]);
    wait_for(
        "the call is answered",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outbound call answered"),
        context,
    );
    std::thread::sleep(Duration::from_secs(2));
    relay.cut();
    std::thread::sleep(Duration::from_secs(2));
    let over = |log: &str| log.contains("terminated") || log.contains("session closed");
    assert!(!over(&callee.phone.log()), "the call outlives its connection: {}", context());
    assert_eq!(relay.accepted(), 1, "one connection so far: {}", context());
    // Local mode stops: its gateway closes the session, and the edge's BYE must go to the
    // trunk on a connection opened again.
    stack.local.terminate().expect("SIGTERM");
    // Its drain (5 s), then the edge's resume of the session (5 s), then the BYE.
    callee.phone.wait_over(Duration::from_secs(30));
    let _ = placed.join();
    let edge = stack.edge.log_text();
    assert!(edge.contains("the connection to the trunk closed: opening it again"), "{}", context());
    assert!(edge.contains("the connection to the trunk is open again"), "{}", context());
    assert_eq!(relay.accepted(), 2, "the BYE came on a second connection: {}", context());
    let series = r#"switchboard_sip_outbound_connections_total{outcome="established",transport="tcp"}"#;
    wait_for_edge_sample(&stack, series, 2.0);
}
