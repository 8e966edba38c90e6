//! `switchboard sip`'s own checks: its metrics server, its flags' validation.

use super::{port_range, serve_metrics, srtp_needs_tls, tls};
use std::time::Duration;

#[tokio::test]
async fn the_metrics_are_served_and_a_taken_address_is_refused_by_name() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let metrics = switchboard_sip_edge::Metrics::new().expect("metrics");
    metrics.refused_not_found();
    let stop = tokio_util::sync::CancellationToken::new();
    let any = "127.0.0.1:0".parse().expect("addr");
    let (at, served) = serve_metrics(any, metrics.clone(), stop.clone()).await.expect("served");
    let mut stream = tokio::net::TcpStream::connect(at).await.expect("connects");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n").await.expect("asks");
    let mut text = String::new();
    stream.read_to_string(&mut text).await.expect("reads");
    assert!(text.starts_with("HTTP/1.1 200") && text.contains("text/plain; version=0.0.4"), "{text}");
    assert!(text.contains(r#"switchboard_sip_calls_refused_total{reason="not_found"} 1"#), "{text}");
    for probe in ["/healthz", "/readyz"] {
        let mut stream = tokio::net::TcpStream::connect(at).await.expect("connects");
        let ask = format!("GET {probe} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n");
        stream.write_all(ask.as_bytes()).await.expect("asks");
        let mut text = String::new();
        stream.read_to_string(&mut text).await.expect("reads");
        assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("ok"), "{probe}: {text}");
    }
    let error = serve_metrics(at, metrics, stop.clone()).await.expect_err("the address is taken");
    assert!(error.to_string().contains(&format!("on {at}: pick another --metrics-listen")), "{error}");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), served).await.expect("stops").expect("the task");
}

#[test]
fn the_outbound_trunk_needs_a_caller_id_and_readable_credentials() {
    use super::super::sip_outbound::{OutboundFlags, outbound};
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let ring = Duration::from_secs(30);
    let with = |trunk: &str, ids: &[&str], creds: &[&str], cas: &[&str]| {
        let (trunks, ids, creds, cas) = (strings(&[trunk]), strings(ids), strings(creds), strings(cas));
        let flags = OutboundFlags {
            trunks: &trunks,
            caller_ids: &ids,
            credentials: &creds,
            cas: &cas,
            default: None,
            ring_timeout: ring,
            ..OutboundFlags::default()
        };
        outbound(&flags)
    };
    assert!(outbound(&OutboundFlags::default()).expect("none").is_none());
    let error = with("sip:trunk.example.com", &[], &[], &[]).expect_err("no caller-id");
    assert!(error.to_string().contains("--caller-id"), "{error}");
    let error = with("trunk.example.com", &["+4930123"], &[], &[]).expect_err("not a URI");
    assert!(error.to_string().contains("not a SIP URI"), "{error}");
    let tcp = with("sip:10.0.0.1;transport=tcp", &["+4930123"], &[], &[]).expect("TCP").expect("some");
    assert!(tcp.tls.is_none() && tcp.trunk.transport == switchboard_sip_edge::Transport::Tcp);
    let error = with("sips:10.0.0.1", &["+4930123"], &[], &["/nonexistent/ca.pem"]).expect_err("no CA");
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
    let error = with("sip:10.0.0.1", &["+4930123"], &[], &["/nonexistent/ca.pem"]).expect_err("not TLS");
    assert!(error.to_string().contains("a CA file is for a TLS trunk"), "{error}");
    let found = with("sip:10.0.0.1:5070", &["+4930123"], &[], &[]).expect("valid").expect("some");
    assert_eq!((found.trunk.host.as_str(), found.trunk.port), ("10.0.0.1", 5070));
    let dir = std::env::temp_dir().join(format!("sb-outbound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("username"), "acme\n").expect("write");
    let path = dir.to_str().expect("a path");
    let error = with("sip:trunk", &["+4930123"], &[path], &[]).expect_err("no password");
    assert!(error.to_string().contains("password"), "{error}");
    std::fs::write(dir.join("password"), "pw\n").expect("write");
    let found = with("sip:trunk", &["+4930123"], &[path], &[]).expect("valid").expect("some");
    assert_eq!(found.trunk.credentials.expect("credentials").username, "acme");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trunk_uri_with_parameters_stays_one_value_and_trunks_repeat() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sip: super::SipArgs,
    }
    let args = [
        "sip",
        "--gateway",
        "ws://gateway:8080/v1/session",
        "--outbound-trunk",
        "sip:10.0.0.1;transport=tcp",
        "--outbound-trunk",
        "pbx=sips:pbx.example.com;transport=tcp,carrier=sip:10.0.0.2",
        "--caller-id",
        "+4930123",
    ];
    let cli = Cli::try_parse_from(args).expect("parses");
    let expected = ["sip:10.0.0.1;transport=tcp", "pbx=sips:pbx.example.com;transport=tcp", "carrier=sip:10.0.0.2"];
    assert_eq!(cli.sip.outbound_trunks, expected);
}

#[test]
fn the_tls_listener_needs_a_readable_certificate_and_key() {
    let timeout = Duration::from_secs(10);
    assert!(tls(None, None, None, timeout, 16).expect("none").is_none());
    let listen = Some("127.0.0.1:0".parse().expect("addr"));
    let error = tls(listen, None, None, timeout, 16).expect_err("no files");
    assert!(error.to_string().contains("--tls-cert and --tls-key"), "{error}");
    let dir = std::env::temp_dir().join(format!("sb-sip-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, "not a certificate").expect("write");
    std::fs::write(&key, "not a key").expect("write");
    let error = tls(listen, Some(&cert), Some(&key), timeout, 16).expect_err("unreadable");
    assert!(error.to_string().contains("certificate PEM"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn srtp_required_needs_tls() {
    use switchboard_sip_edge::SrtpPolicy;
    let error = srtp_needs_tls(SrtpPolicy::Required, false).expect_err("no TLS");
    assert!(error.to_string().contains("--srtp required needs --tls-listen"), "{error}");
    assert!(srtp_needs_tls(SrtpPolicy::Required, true).is_ok());
    assert!(srtp_needs_tls(SrtpPolicy::Optional, false).is_ok(), "optional without TLS: plain RTP");
}

#[test]
fn port_ranges_read_first_to_last() {
    assert_eq!(port_range("20000-20999"), Ok(20000..=20999));
    for bad in ["20000", "0-10", "10-5", "a-b", "1-70000"] {
        assert!(port_range(bad).is_err(), "{bad}");
    }
}
