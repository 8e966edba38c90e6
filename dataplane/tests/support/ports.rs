//! Ports for the programs the tests start that can only be told a number (Redis,
//! Prometheus, coturn, baresip, kamailio, etcd and the API server, local mode in the book's
//! pages). A program that can listen on port 0 and say which port it got is started so
//! instead (the `switchboard` processes, whose `serving ... addr=` lines the harnesses read:
//! dataplane/tests/support/served.rs, tests/src/switchboard.rs and tests/src/process.rs),
//! and a socket the test binds itself is kept bound or handed over open.
//!
//! One file for every test crate: the `tests` crate's library includes it as
//! `switchboard_tests::ports` (its unit tests are there, tests/src/ports_tests.rs), the
//! data plane's test binaries and the SIP edge's tests by `#[path]`.
//!
//! A port chosen by binding port 0 and releasing it lies in the kernel's ephemeral range,
//! where any socket of any process bound to port 0, or connecting out, may take it before
//! the program binds it (CI runs failed so). A port from here is
//! - in a band nothing takes by itself: below the ephemeral range
//!   (`net.ipv4.ip_local_port_range`), below Kubernetes' NodePort range (30000-32767), above
//!   10999 (a node's components listen at 102xx), off tests/cluster's fixed ports;
//! - picked at random there and reserved for the life of this process by a lock on a file
//!   named after it, in a folder every test process on the machine shares: the kernel
//!   drops the lock when the process ends, however it ends, so no two test processes
//!   (nextest runs each test in one) hand out one port while both live, whether or not its
//!   program has bound it yet (a range the SIP edge binds call by call, a restart);
//! - free now for the protocols its program binds, on every address.
//!
//! What is left — a program of some other kind binding that very number in the moment
//! before ours — shows as our program's bind error: [`address_in_use`] recognises it; a
//! harness then picks again where the number is still its own to change, and says so
//! where it was already given out.
//!
//! Programs that choose their own ports at random and retry a taken one (baresip's RTP)
//! are given [`above_ephemeral`], where they keep out of this band and the kernel's range.

use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::ops::RangeInclusive;
use std::sync::Mutex;

/// A protocol a program binds its port for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
}

/// UDP only.
pub const UDP: &[Protocol] = &[Protocol::Udp];
/// TCP only.
pub const TCP: &[Protocol] = &[Protocol::Tcp];
/// UDP and TCP on the same number (a SIP phone, baresip's console).
pub const UDP_TCP: &[Protocol] = &[Protocol::Udp, Protocol::Tcp];

/// The band's floor: the node's components (kubelet 10248/10250, kube-proxy 10249/10256,
/// the scheduler's and controller manager's 10251-10259) sit just below it.
const FLOOR: u16 = 11_000;

/// Kubernetes' NodePort range starts here; a real node may open ports there.
const NODE_PORTS: u16 = 30_000;

/// Ports kept out of the band: those tests/cluster's scripts use by default (`up.sh`: the
/// API server, etcd's client and peer ports; `e2e-smoke.sh`: its simulator, Redis,
/// PostgreSQL, SIP and its TLS, the edge's 20 RTP ports, WebRTC and its balancer), and the
/// RTP range `switchboard sip` and local mode take by default. Unit tests
/// (tests/src/ports_tests.rs) hold this list to those defaults.
pub(crate) const FIXED: &[RangeInclusive<u16>] = &[
    20000..=20999,
    23478..=23479,
    23790..=23791,
    25060..=25061,
    25070..=25070,
    25100..=25119,
    25300..=25319,
    25432..=25432,
    26379..=26379,
    26443..=26443,
    28443..=28443,
];

/// How many picks before giving up: the band holds ~18,000 ports.
const PICKS: usize = 2000;

/// One port, free now for `protocols`, reserved for this process.
pub fn free_port(protocols: &[Protocol]) -> u16 {
    free_ports(1, protocols)
}

/// The first of `count` ports in a row (the first even, as RTP wants), each free now for
/// `protocols` on every address and reserved for this process.
pub fn free_ports(count: u16, protocols: &[Protocol]) -> u16 {
    assert!(count > 0, "free_ports(0)");
    let (floor, ceiling) = band();
    let span = u32::from(ceiling.saturating_sub(floor)).saturating_sub(u32::from(count));
    assert!(span > 1000, "no room for ports in {floor}-{ceiling} (ephemeral range {:?})", ephemeral_range());
    for _ in 0..PICKS {
        let first = (floor + random_below(span) as u16) & !1;
        let row = first..first + count;
        if row.clone().any(|p| FIXED.iter().any(|fixed| fixed.contains(&p))) {
            continue;
        }
        let Some(locks) = row.clone().map(reserve).collect::<Option<Vec<File>>>() else { continue };
        if row.clone().all(|p| free_now(p, protocols)) {
            HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(locks);
            return first;
        }
    }
    panic!("no {count} free ports in a row for {protocols:?} in {floor}-{ceiling} after {PICKS} picks")
}

/// Whether a program's output says it could not bind its port: `EADDRINUSE` in the words
/// of libc (`Address already in use`: baresip, kamailio, Redis, coturn, ours), Go (`address
/// already in use`: Prometheus, etcd, the API server) or its number (`errno=98`).
pub fn address_in_use(output: &str) -> bool {
    let output = output.to_ascii_lowercase();
    output.contains("address already in use") || output.contains("errno=98") || output.contains("eaddrinuse")
}

/// The ports above the kernel's ephemeral range, for a program that picks its own ports
/// at random and retries a taken one (baresip's RTP): there it takes none of the ports
/// handed out here nor any the kernel gives. None when the ephemeral range reaches the top.
pub fn above_ephemeral() -> Option<(u16, u16)> {
    let (_, high) = ephemeral_range();
    let low = high.checked_add(2)? & !1;
    (u32::from(low) + 100 < 65_535).then_some((low, 65_534))
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`; Linux's default
/// when it cannot be read).
pub fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut ports = text.split_whitespace().filter_map(|p| p.parse().ok());
    match (ports.next(), ports.next()) {
        (Some(low), Some(high)) => (low, high),
        _ => (32768, 60999),
    }
}

/// `FLOOR` up to the lower of the ephemeral range's start and the NodePort range's.
pub(crate) fn band() -> (u16, u16) {
    (FLOOR, ephemeral_range().0.min(NODE_PORTS))
}

/// The locks this process holds (each file open, locked, until the process ends).
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// The lock on `port`'s file, when no other live process holds it.
pub(crate) fn reserve(port: u16) -> Option<File> {
    let dir = std::env::temp_dir().join("switchboard-test-ports");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("the ports' lock folder {}: {e}", dir.display()));
    let path = dir.join(port.to_string());
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("the port's lock file {}: {e}", path.display()));
    file.try_lock().ok().map(|()| file)
}

/// Whether `port` binds now for each of `protocols` on 0.0.0.0 (which fails when any
/// address holds it).
pub(crate) fn free_now(port: u16, protocols: &[Protocol]) -> bool {
    protocols.iter().all(|protocol| match protocol {
        Protocol::Udp => UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok(),
        Protocol::Tcp => TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok(),
    })
}

/// A number below `n`, from the standard library's randomly keyed hasher.
fn random_below(n: u32) -> u32 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() % u64::from(n.max(1))) as u32
}
