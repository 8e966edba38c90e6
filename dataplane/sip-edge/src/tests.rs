//! Unit tests of binding the SIP address.

use super::*;

#[tokio::test]
async fn port_zero_gets_udp_and_tcp_on_one_port() {
    let (socket, local, tcp) = bind_sip("127.0.0.1:0".parse().unwrap(), true).await.expect("binds");
    assert_eq!(socket.local_addr().unwrap(), local);
    assert_eq!(tcp.expect("TCP asked for").local_addr().unwrap(), local);
}

#[tokio::test]
async fn a_numbered_port_whose_tcp_is_taken_is_a_bind_error_naming_it() {
    // A port held for TCP whose UDP twin is free (another pick while it is not).
    let (_held, asked) = (0..64)
        .find_map(|_| {
            let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let asked = held.local_addr().unwrap();
            std::net::UdpSocket::bind(asked).ok().map(|_| (held, asked))
        })
        .expect("a TCP port whose UDP twin is free");
    match bind_sip(asked, true).await {
        Err(EdgeError::Bind { address, source }) => {
            assert_eq!(address, asked);
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        Ok(_) => panic!("TCP {asked} is held, the bind must fail"),
        Err(other) => panic!("not a bind error: {other}"),
    }
}
