//! Unit tests of [`crate::ports`] (dataplane/tests/support/ports.rs): they run once, here,
//! rather than in every test binary that includes the file.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

use crate::ports::*;

#[test]
fn ports_come_from_the_band_in_rows_free_and_reserved_once() {
    let (floor, ceiling) = band();
    let first = free_ports(4, UDP_TCP);
    assert_eq!(first % 2, 0);
    assert!(first >= floor && first + 3 < ceiling, "{first} in {floor}-{ceiling}");
    for port in first..first + 4 {
        assert!(reserve(port).is_none(), "{port} is reserved: a second lock on it fails");
        assert!(UdpSocket::bind(("127.0.0.1", port)).is_ok(), "{port} is free for its program");
    }
    let picks: Vec<u16> = (0..20).map(|_| free_port(TCP)).collect();
    let mut unique = picks.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), picks.len(), "a port is handed out once: {picks:?}");
}

#[test]
fn a_port_bound_on_one_address_is_not_free() {
    // Ports of this test's own: binding them takes none another test was given.
    let first = free_ports(2, UDP_TCP);
    assert!(free_now(first, UDP_TCP));
    let _tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, first)).expect("binds");
    let _udp = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), first + 1)).expect("binds");
    assert!(!free_now(first, TCP), "TCP on 127.0.0.1 holds it");
    assert!(free_now(first, UDP), "UDP is another port space");
    assert!(!free_now(first + 1, UDP), "UDP on 127.0.0.2 holds it");
}

#[test]
fn bind_errors_are_recognised_in_each_programs_words() {
    for line in [
        "ua: SIP Transport failed: Address already in use",
        "udp_init(): bind(3, 0x7f, 16) on 127.0.0.2: Address already in use",
        "Could not create server TCP listening socket 127.0.0.1:15031: bind: Address already in use",
        "err=\"listen tcp 127.0.0.1:9090: bind: address already in use\"",
        "Trying to bind fd 16 to <127.0.0.1:15040>: errno=98",
    ] {
        assert!(address_in_use(line), "{line}");
    }
    assert!(!address_in_use("baresip is ready."));
}

#[test]
fn above_the_ephemeral_range_is_clear_of_the_band_and_the_kernels_range() {
    let (_, high) = ephemeral_range();
    if let Some((low, top)) = above_ephemeral() {
        assert!(low > high && low > band().1 && top == 65_534 && low % 2 == 0, "{low}-{top}");
    }
}

/// Every default port in tests/cluster's scripts (`${VAR:-NNNNN}`) that falls in the
/// band is kept out of it (the ports after some, etcd's peer port and SIP's TLS, are in
/// FIXED by hand).
#[test]
fn the_cluster_scripts_fixed_ports_are_kept_out_of_the_band() {
    let scripts = crate::repo_root().join("tests/cluster");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&scripts).expect("tests/cluster") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "sh") {
            let text = std::fs::read_to_string(&path).expect("a script");
            for (_, rest) in text.match_indices(":-").map(|(i, _)| text.split_at(i + 2)) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if rest[digits.len()..].starts_with('}')
                    && let Ok(port) = digits.parse::<u16>()
                {
                    found.push(port);
                }
            }
        }
    }
    let (floor, ceiling) = band();
    let missing: Vec<u16> = found
        .iter()
        .filter(|p| (floor..ceiling).contains(*p) && !FIXED.iter().any(|fixed| fixed.contains(*p)))
        .copied()
        .collect();
    assert!(found.contains(&26443), "the API server's default port is read: {found:?}");
    assert!(missing.is_empty(), "fixed ports to add to FIXED: {missing:?}");
}

/// The RTP range `switchboard sip` and local mode take by default is kept out of the band.
#[test]
fn the_default_rtp_range_is_kept_out_of_the_band() {
    for file in ["dataplane/src/cli/sip.rs", "dataplane/src/cli/local.rs"] {
        let text = std::fs::read_to_string(crate::repo_root().join(file)).expect("the CLI's source");
        let line = text.lines().find(|l| l.contains("RTP_PORTS\", default_value")).expect("the RTP range's flag");
        let range = line.split("default_value = \"").nth(1).and_then(|r| r.split('"').next()).expect("its default");
        let (first, last) = range.split_once('-').expect("first-last");
        let (first, last): (u16, u16) = (first.parse().expect("a port"), last.parse().expect("a port"));
        assert!(FIXED.contains(&(first..=last)), "{file}: the default RTP range {range} is in FIXED");
    }
}
