//! What the edge's socket tests share: an edge configuration with no gateway behind it
//! (what they test is answered by the endpoint itself).

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_sip_edge::{EdgeConfig, GatewayConfig, MediaSettings, RateConfig, TlsConfig};

// The file all test crates share for ports (below the kernel's ephemeral range, reserved
// for the test process).
#[path = "../../../tests/support/ports.rs"]
#[allow(dead_code)]
mod ports;

/// An edge listening for UDP on `listen` (and TCP beside it with `tcp`, TLS with `tls`), its
/// four RTP ports free and reserved for this test, its gateway a closed port.
pub fn config(listen: SocketAddr, tcp: bool, tls: Option<TlsConfig>) -> EdgeConfig {
    let base = ports::free_ports(4, ports::UDP);
    EdgeConfig {
        listen,
        tcp,
        tls,
        advertise: "127.0.0.1".parse().expect("ip"),
        rtp_ports: base..=base + 3,
        gateway: GatewayConfig {
            url: "ws://127.0.0.1:9/v1/session".into(),
            api_key: None,
            open_timeout: Duration::from_secs(1),
            resume_for: Duration::ZERO,
        },
        max_calls: 4,
        rate: RateConfig::default(),
        media: MediaSettings::default(),
        trunks: Default::default(),
        outbound: None,
        transfer: switchboard_sip_edge::TransferMethod::default(),
        srtp: switchboard_sip_edge::SrtpPolicy::default(),
    }
}
