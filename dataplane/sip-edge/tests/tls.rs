//! The edge's SIP over TLS on real sockets, with a rustls client trusting a test CA (no
//! gateway needed: what is tested is answered by the endpoint itself): a request over TLS is
//! answered on its connection with TLS in its Via and a keep-alive gets its CRLF; a peer
//! that sends no TLS, one that never finishes its handshake and one address's connections
//! past its bound are closed, logged and counted, while an established connection and UDP
//! go on answering.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use switchboard_sip_edge::{Edge, Metrics, TlsConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A test CA and a certificate it issued for 127.0.0.1 and localhost: the leaf's PEM, its
/// key's PEM and the CA's certificate (what clients trust).
fn certificates() -> (String, String, rustls::pki_types::CertificateDer<'static>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).expect("the CA");
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("params");
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = leaf.signed_by(&key, &ca).expect("the edge's certificate");
    (cert.pem(), key.serialize_pem(), ca.der().clone())
}

struct Running {
    udp: SocketAddr,
    tls: SocketAddr,
    metrics: Metrics,
    connector: TlsConnector,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

async fn edge(handshake_timeout: Duration, max_per_address: usize) -> Running {
    let (cert, key, ca) = certificates();
    let listen = "127.0.0.1:0".parse().expect("addr");
    let mut tls = TlsConfig::from_pem(listen, cert.as_bytes(), key.as_bytes()).expect("the certificate serves");
    tls.handshake_timeout = handshake_timeout;
    tls.max_per_address = max_per_address;
    let config = common::config(listen, false, Some(tls));
    let edge = Edge::bind(config).await.expect("the edge binds");
    let (udp, tls, metrics) = (edge.local_addr(), edge.tls_addr().expect("a TLS address"), edge.metrics());
    assert_ne!(udp.port(), tls.port(), "TLS listens on a port of its own");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(edge.run(async move {
        let _ = stopped.await;
    }));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("the test CA");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Running { udp, tls, metrics, connector: TlsConnector::from(Arc::new(client)), stop, task }
}

impl Running {
    /// A TLS connection to the edge, its certificate checked against the test CA.
    async fn connect(&self) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.tls).await.expect("the edge takes TCP on its TLS port");
        let name = ServerName::try_from("127.0.0.1").expect("a name");
        tokio::time::timeout(Duration::from_secs(5), self.connector.connect(name, tcp))
            .await
            .expect("a handshake in time")
            .expect("the handshake completes with the CA's certificate")
    }

    /// `switchboard_sip_tls_connections_total{outcome}` now.
    fn counted(&self, outcome: &str) -> f64 {
        let series = format!("switchboard_sip_tls_connections_total{{outcome=\"{outcome}\"}} ");
        self.metrics.render().lines().find_map(|l| l.strip_prefix(&series)?.parse().ok()).unwrap_or(0.0)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.task).await.expect("the edge stops").expect("cleanly");
    }
}

fn options(via: &str, call_id: &str) -> String {
    format!(
        "OPTIONS sip:triage@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/{via};branch=z9hG4bK{call_id}\r\n\
         From: <sip:probe@127.0.0.1>;tag=p1\r\nTo: <sip:triage@127.0.0.1>\r\nCall-ID: {call_id}\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    )
}

async fn read_some(stream: &mut (impl AsyncRead + Unpin)) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("an answer in time")
        .expect("read");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Asks over `stream` and expects the 200 on it, with TLS in its Via.
async fn ask(stream: &mut TlsStream<TcpStream>, call_id: &str) {
    let local = stream.get_ref().0.local_addr().expect("addr");
    stream.write_all(options(&format!("TLS {local}"), call_id).as_bytes()).await.expect("write");
    let answer = read_some(stream).await;
    assert!(answer.starts_with("SIP/2.0 200"), "{answer}");
    assert!(answer.contains(&format!("Call-ID: {call_id}")) && answer.contains("SIP/2.0/TLS"), "{answer}");
}

/// Waits until the edge closes `stream` (it reads the end, or a reset) within `limit`;
/// returns how long that took.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the edge closed the connection within {limit:?}");
    started.elapsed()
}

#[tokio::test]
async fn requests_over_tls_are_answered_on_their_connection_and_say_tls() {
    let edge = edge(Duration::from_secs(5), 4).await;
    let mut stream = edge.connect().await;
    ask(&mut stream, "tls-1").await;
    stream.write_all(b"\r\n\r\n").await.expect("a keep-alive");
    assert_eq!(read_some(&mut stream).await, "\r\n", "a keep-alive gets its CRLF");
    // A message split across TLS records is read whole.
    let local = stream.get_ref().0.local_addr().expect("addr");
    let message = options(&format!("TLS {local}"), "tls-2");
    let (head, tail) = message.split_at(50);
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream.write_all(tail.as_bytes()).await.expect("write");
    let answer = read_some(&mut stream).await;
    assert!(answer.starts_with("SIP/2.0 200") && answer.contains("Call-ID: tls-2"), "{answer}");
    assert_eq!(edge.counted("established"), 1.0, "{}", edge.metrics.render());
    edge.stop().await;
}

#[tokio::test]
async fn no_tls_a_stalled_handshake_and_one_addresss_surplus_are_closed_and_counted() {
    let timeout = Duration::from_millis(600);
    let edge = edge(timeout, 2).await;
    let mut first = edge.connect().await;
    ask(&mut first, "first-1").await;

    // Not TLS at all: a plain SIP request on the TLS port. The handshake fails at once.
    let mut plain = TcpStream::connect(edge.tls).await.expect("connects");
    plain.write_all(options("TCP 127.0.0.1:9", "plain-1").as_bytes()).await.expect("write");
    let took = closed_within(&mut plain, Duration::from_secs(3)).await;
    assert!(took < timeout, "a failed handshake is closed at once, not at the timeout: {took:?}");

    // A client that opens a connection and says nothing: closed at the handshake's timeout.
    let mut stalled = TcpStream::connect(edge.tls).await.expect("connects");
    let took = closed_within(&mut stalled, Duration::from_secs(5)).await;
    assert!(took >= timeout - Duration::from_millis(100), "closed at the timeout, not before: {took:?}");

    // One address holds at most two: with `first` and a second open, a third is closed at once.
    let mut waited = 0;
    let mut second = loop {
        // The closed connections leave the edge's count a moment after they close.
        let tcp = TcpStream::connect(edge.tls).await.expect("connects");
        let name = ServerName::try_from("127.0.0.1").expect("a name");
        match tokio::time::timeout(Duration::from_secs(5), edge.connector.connect(name, tcp)).await {
            Ok(Ok(stream)) => break stream,
            _ if waited < 20 => {
                waited += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("a second connection is taken once the failed ones are gone: {other:?}"),
        }
    };
    ask(&mut second, "second-1").await;
    let mut third = TcpStream::connect(edge.tls).await.expect("the kernel accepts");
    let took = closed_within(&mut third, Duration::from_secs(3)).await;
    assert!(took < timeout, "the surplus connection is closed at once: {took:?}");

    // None of it disturbed the established connections, nor UDP.
    ask(&mut first, "first-2").await;
    ask(&mut second, "second-2").await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("a socket");
    let via = format!("UDP {}", udp.local_addr().expect("addr"));
    udp.send_to(options(&via, "udp-1").as_bytes(), edge.udp).await.expect("send");
    let mut buf = vec![0u8; 4096];
    let (n, _) =
        tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf)).await.expect("in time").expect("recv");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("SIP/2.0 200"));

    // Once one closes, the address may connect again.
    drop(second);
    let mut again = None;
    for _ in 0..40 {
        let tcp = TcpStream::connect(edge.tls).await.expect("connects");
        let name = ServerName::try_from("127.0.0.1").expect("a name");
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(5), edge.connector.connect(name, tcp)).await {
            again = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ask(again.as_mut().expect("a connection once the second closed"), "again-1").await;

    let text = edge.metrics.render();
    assert_eq!(edge.counted("handshake_failed"), 1.0, "{text}");
    assert_eq!(edge.counted("handshake_timeout"), 1.0, "{text}");
    assert!(edge.counted("too_many_from_address") >= 1.0, "{text}");
    assert_eq!(edge.counted("established"), 3.0, "{text}");
    edge.stop().await;
}
