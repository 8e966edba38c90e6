//! SIP over TLS: a phone calls the edge over TLS (`sip:triage@<edge>:<tls port>;transport=tls`,
//! trusting the test's own CA, made here with rcgen) and hears the agent; the edge's answer
//! names TLS and its TLS port in its Contact, and the edge's own BYE (the agent's side
//! ending) reaches the phone on its connection. Meanwhile peers that send no TLS, that never
//! finish their handshake, and that finish it and then send garbage are closed and counted
//! without disturbing the call.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::phone::{Options, Phone};
use crate::stack::{Stack, stack_with, wait_for, wait_for_edge_sample};

/// A test CA and the edge's certificate (127.0.0.1, localhost) it issued, as PEM files in
/// `dir`: `ca.crt`, `tls.crt`, `tls.key`. Returns the CA's certificate.
pub(crate) fn certificates(dir: &Path) -> rustls::pki_types::CertificateDer<'static> {
    std::fs::create_dir_all(dir).expect("a folder");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "Switchboard test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().expect("a key")).expect("the CA");
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("params");
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = leaf.signed_by(&key, &ca).expect("the edge's certificate");
    std::fs::write(dir.join("ca.crt"), ca.pem()).expect("ca.crt");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("tls.key");
    ca.der().clone()
}

/// `switchboard sip` listening for TLS too (a 2 s handshake timeout), with the
/// certificates in `certs` and `more` flags; returns the stack and its TLS address.
pub(crate) fn tls_stack_with(name: &str, certs: &Path, more: &[&str]) -> (Stack, SocketAddr) {
    let (cert, key) = (certs.join("tls.crt"), certs.join("tls.key"));
    let mut args = vec!["--tls-listen", "127.0.0.1:0", "--tls-cert", cert.to_str().expect("a path"), "--tls-key"];
    args.extend([key.to_str().expect("a path"), "--tls-handshake-timeout-seconds", "2"]);
    args.extend(more);
    let stack = stack_with(name, &args);
    let log = stack.edge.log_text();
    let tls = log
        .lines()
        .find_map(|l| l.split_once("SIP over TLS on ").and_then(|(_, a)| a.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| panic!("the edge logs its TLS address:\n{log}"));
    (stack, tls)
}

/// [`tls_stack_with`] with no more flags.
fn tls_stack(name: &str, certs: &Path) -> (Stack, SocketAddr) {
    tls_stack_with(name, certs, &[])
}

/// A phone that dials `sip:<user>@<tls>;transport=tls`, trusting the test CA, with its SIP
/// trace on (the messages in its log).
fn dial_tls(stack: &Stack, tls: SocketAddr, certs: &Path, user: &str, silence: u32, quit: u32) -> Phone {
    let dial = format!("/dial sip:{user}@{tls};transport=tls");
    let config = format!("sip_cafile {}\n", certs.join("ca.crt").display());
    let options = Options { trace: true, ..Options::default() };
    let (phone, _) = Phone::start_with(
        &stack.dir,
        &stack.tools,
        "caller",
        "caller",
        silence,
        quit,
        "tls",
        "",
        &config,
        Some(&dial),
        options,
    );
    phone
}

/// A rustls client trusting only the test CA.
fn client(ca: rustls::pki_types::CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("the test CA");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// Reads until the edge closes `stream` (or 5 s pass); what it sent.
fn until_closed(stream: &mut impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

/// Hostile peers on the TLS port: one that speaks no TLS (random bytes), one that finishes
/// the handshake and sends garbage, and one that says nothing (returned open: the edge
/// closes it at its handshake timeout). Returns the silent one and what the edge said to
/// the one that sent garbage over TLS.
fn hostile(tls: SocketAddr, config: Arc<rustls::ClientConfig>) -> (TcpStream, String) {
    let timeout = Some(Duration::from_secs(5));
    let silent = TcpStream::connect(tls).expect("connects");
    let mut plain = TcpStream::connect(tls).expect("connects");
    plain.set_read_timeout(timeout).expect("timeout");
    let mut state = 0x2545_f491_u32;
    let junk: Vec<u8> = (0..600)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect();
    let _ = plain.write_all(&junk);
    until_closed(&mut plain);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    let connection = rustls::ClientConnection::new(config, name).expect("a client");
    let socket = TcpStream::connect(tls).expect("connects");
    socket.set_read_timeout(timeout).expect("timeout");
    let mut secure = rustls::StreamOwned::new(connection, socket);
    secure.write_all(b"NOT SIP AT ALL \x00\x01\x02\r\n\r\n").expect("the handshake completes, then garbage");
    let answer = String::from_utf8_lossy(&until_closed(&mut secure)).into_owned();
    (silent, answer)
}

pub(crate) fn certs_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("switchboard-sip-tls-{name}-{}", std::process::id()))
}

#[test]
fn a_call_over_tls_hears_the_agent_survives_hostile_peers_and_is_hung_up_on_its_connection() {
    let certs = certs_dir("call");
    let ca = certificates(&certs);
    let (stack, tls) = tls_stack("tls", &certs);
    let phone = dial_tls(&stack, tls, &certs, "triage", 30, 60);
    let context = || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log());
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let sent_at = answered.elapsed().as_secs_f64();
    let (silent, answer) = hostile(tls, client(ca));
    assert!(
        answer.is_empty() || answer.starts_with("SIP/2.0 4"),
        "garbage over TLS is answered 4xx or not at all: {answer:?}"
    );

    // The agent's reply is heard; then the agent's side ends (local mode stops): the edge's
    // BYE goes to the phone on its TLS connection and the phone hangs up.
    std::thread::sleep(Duration::from_secs(8).saturating_sub(answered.elapsed()));
    stack.local.terminate().expect("SIGTERM");
    // Its drain (5 s), then the edge's resume of the session (5 s), then the BYE.
    wait_for("the phone is hung up", Duration::from_secs(30), || phone.log().contains("terminated"), context);
    drop(silent);
    std::thread::sleep(Duration::from_millis(300));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}");
    // The edge's answer named its TLS address and transport as where the dialogue goes on.
    let contact = format!("Contact: <sip:switchboard@{tls};transport=tls>");
    assert!(log.contains(&contact), "the 200's Contact is {contact}:\n{log}");
    let via = format!("Via: SIP/2.0/TLS {tls};branch=");
    assert!(log.contains(&via), "the edge's BYE says TLS and its TLS address in its Via ({via}):\n{log}");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the session ended (1001"#), "the session's close ended the call:\n{edge}");
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let after = ((sent_at + 0.5) * 4.0) as usize;
    let voiced = windows.iter().skip(after).filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the phone heard the agent after the hostile peers: {voiced} voiced windows: {windows:?}");

    // The edge logged and counted each hostile peer: the silent one at its 2 s timeout.
    let counted =
        wait_for_edge_sample(&stack, r#"switchboard_sip_tls_connections_total{outcome="handshake_timeout"}"#, 1.0);
    let series = |outcome: &str| {
        crate::stack::sample(&counted, &format!("switchboard_sip_tls_connections_total{{outcome=\"{outcome}\"}}"))
    };
    assert_eq!(series("handshake_failed"), Some(1.0), "the peer with no TLS: {counted}");
    assert_eq!(series("established"), Some(2.0), "the phone and the garbage's connection: {counted}");
    assert!(edge.contains("SIP TLS handshake failed"), "{edge}");
    assert!(edge.contains("SIP TLS handshake not finished in time"), "{edge}");
    let _ = std::fs::remove_dir_all(&certs);
}
