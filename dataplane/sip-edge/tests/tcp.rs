//! The edge's SIP over TCP on real sockets (no gateway needed: what is tested is answered
//! by the endpoint itself): a message split across writes is read whole, a keep-alive gets
//! its CRLF, a stream that loses its framing is answered and closed, and the UDP port
//! answers the same as before beside it.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_sip_edge::Edge;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

async fn edge() -> (SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let config = common::config("127.0.0.1:0".parse().expect("addr"), true, None);
    let edge = Edge::bind(config).await.expect("the edge binds");
    let addr = edge.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(edge.run(async move {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

fn options(via: &str, call_id: &str) -> String {
    format!(
        "OPTIONS sip:triage@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/{via};branch=z9hG4bK{call_id}\r\n\
         From: <sip:probe@127.0.0.1>;tag=p1\r\nTo: <sip:triage@127.0.0.1>\r\nCall-ID: {call_id}\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    )
}

async fn read_some(stream: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("an answer in time")
        .expect("read");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn tcp_messages_are_read_whole_answered_on_their_connection_and_bad_streams_closed() {
    let (addr, stop, task) = edge().await;
    let mut stream = TcpStream::connect(addr).await.expect("the edge takes TCP on its SIP port");
    let local = stream.local_addr().expect("addr");
    let message = options(&format!("TCP {local}"), "tcp-1");
    let (head, tail) = message.split_at(40);
    stream.write_all(head.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream.write_all(tail.as_bytes()).await.expect("write");
    let answer = read_some(&mut stream).await;
    assert!(answer.starts_with("SIP/2.0 200"), "{answer}");
    assert!(answer.contains("Call-ID: tcp-1") && answer.contains("SIP/2.0/TCP"), "{answer}");

    stream.write_all(b"\r\n\r\n").await.expect("a keep-alive");
    assert_eq!(read_some(&mut stream).await, "\r\n", "a keep-alive gets its CRLF");

    // A head that reads but a Content-Length past the edge's limit: the framing is lost.
    let bad = options(&format!("TCP {local}"), "tcp-2").replace("Content-Length: 0", "Content-Length: 99999999");
    stream.write_all(bad.as_bytes()).await.expect("write");
    let answer = read_some(&mut stream).await;
    assert!(answer.starts_with("SIP/2.0 4"), "a stream that cannot be read on is answered: {answer}");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(_))), "then closed: {closed:?}");

    // UDP on the same port still answers.
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("a socket");
    let via = format!("UDP {}", udp.local_addr().expect("addr"));
    udp.send_to(options(&via, "udp-1").as_bytes(), addr).await.expect("send");
    let mut buf = vec![0u8; 4096];
    let (n, _) =
        tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf)).await.expect("in time").expect("recv");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("SIP/2.0 200"));

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), task).await.expect("the edge stops").expect("cleanly");
}
