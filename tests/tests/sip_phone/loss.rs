//! A call whose network loses and reorders packets goes on: everything between a real phone
//! and the edge passes a UDP relay the test controls ([`UdpRelay`]), which drops about one
//! RTP packet in twenty and swaps about one in twenty with the next, both ways, by a seeded
//! generator (the same decisions, packet by packet, every run). The edge advertises the
//! relay's address (`--advertise 127.0.0.2`: its SDP and Contact), the relay listens there
//! on the edge's own ports and forwards to the edge on 127.0.0.1; the edge latches its media
//! to the relay's side as it would to a phone behind NAT. The caller says two phrases and
//! hears the agent answer each, the session goes on to the end of the phone's WAV with both
//! phrases heard by the agent, and the edge's `switchboard_sip_rtp_packets_lost_total`
//! counts about the packets the relay dropped on their way to it; the edge put the swapped
//! packets back in order (few ignored as late) and concealed every gap. Keys pressed through
//! the same relay each reach the agent once, in order.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_tests::ports;

use crate::phone::{Options, Phone, console_config};
use crate::stack::{
    Stack, free_udp_tcp_ports, sample, sessions, stack_with, the_session, wait_for, wait_for_edge_sample,
};

/// Where the relay listens for the phone: the address the edge advertises.
const RELAY_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// The caller's second phrase: 600 Hz, which the simulator hears as "phrase 2".
const SECOND_HZ: u32 = 600;

/// Of every 1000 RTP packets, about this many are dropped, and about as many held back and
/// sent after the next one.
const PER_MILLE: u64 = 50;

/// What one direction of the relay did to the RTP it carried.
#[derive(Default)]
struct Tally {
    forwarded: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
    /// Of those, telephone events (keys).
    events_dropped: AtomicU64,
    events_reordered: AtomicU64,
}

impl Tally {
    fn read(&self) -> (u64, u64, u64) {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        (get(&self.forwarded), get(&self.dropped), get(&self.reordered))
    }
}

/// A UDP relay on [`RELAY_IP`], on the edge's SIP port and every port of its RTP range: what
/// a phone sends to one of them goes to the edge's same port on 127.0.0.1 from a socket of
/// the relay's own, and what the edge sends back to that socket goes to the phone. SIP and
/// RTCP pass untouched; RTP (the even ports of the range) loses and reorders packets.
struct UdpRelay {
    to_edge: Arc<Tally>,
    to_phone: Arc<Tally>,
    stop: Arc<AtomicBool>,
}

impl Drop for UdpRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl UdpRelay {
    fn between(stack: &Stack) -> Self {
        let relay = Self { to_edge: Arc::default(), to_phone: Arc::default(), stop: Arc::default() };
        relay.pass(stack.sip.port(), UdpSocket::bind("127.0.0.1:0").expect("a relay socket"), None);
        for rtp in (stack.rtp.0..stack.rtp.1).step_by(2) {
            // The edge's side as a pair (RTP, RTCP), as a phone's ports are: the edge sends
            // RTCP to the port after the one its media latched to.
            let pair = ports::free_ports(2, ports::UDP);
            // The same seeds every run: by the port's place in the range, not its number.
            let seed = u64::from(rtp - stack.rtp.0) << 1;
            for (port, impaired) in [(rtp, Some(seed)), (rtp + 1, None)] {
                let ours = port - rtp + pair;
                relay.pass(port, UdpSocket::bind(("127.0.0.1", ours)).expect("a relay socket"), impaired);
            }
        }
        relay
    }

    /// Relays [`RELAY_IP`]:`port` to the edge's 127.0.0.1:`port` through `edge_side`,
    /// impairing what passes when `impaired` gives a seed (the seed's way to the edge, the
    /// next one's back).
    fn pass(&self, port: u16, edge_side: UdpSocket, impaired: Option<u64>) {
        let phone_side = UdpSocket::bind((RELAY_IP, port))
            .unwrap_or_else(|e| panic!("the relay binds {RELAY_IP}:{port} (loopback beyond 127.0.0.1): {e}"));
        let edge = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let phone = Arc::new(Mutex::new(None::<SocketAddr>));
        let sides = [
            (phone_side.try_clone().expect("a clone"), edge_side.try_clone().expect("a clone"), &self.to_edge, 0),
            (edge_side, phone_side, &self.to_phone, 1),
        ];
        for (toward_edge, (from, to, tally, way)) in [true, false].into_iter().zip(sides) {
            let (tally, stop, phone) = (Arc::clone(tally), Arc::clone(&self.stop), Arc::clone(&phone));
            from.set_read_timeout(Some(Duration::from_millis(200))).expect("a timeout");
            std::thread::spawn(move || {
                let mut impair = impaired.map(|seed| Impairment::new(seed | way));
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, source)) = from.recv_from(&mut buf) else { continue };
                    let target = if toward_edge {
                        *phone.lock().expect("the phone") = Some(source);
                        edge
                    } else if source != edge {
                        continue;
                    } else if let Some(phone) = *phone.lock().expect("the phone") {
                        phone
                    } else {
                        continue;
                    };
                    let out = match &mut impair {
                        Some(impair) => impair.pass(buf[..n].to_vec(), &tally),
                        None => vec![buf[..n].to_vec()],
                    };
                    for datagram in out {
                        if impair.is_some() {
                            tally.forwarded.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = to.send_to(&datagram, target);
                    }
                }
            });
        }
    }
}

/// One direction's losses and swaps, for audio and for telephone events (RFC 4733, a dynamic
/// payload type beside PCMU's 0) apart: each its own xorshift64 from a fixed seed, so an
/// event packet's fate depends on its place among the events, not on when a key was pressed.
struct Impairment {
    audio: Dice,
    events: Dice,
}

impl Impairment {
    fn new(seed: u64) -> Self {
        Self { audio: Dice::new(seed << 1), events: Dice::new(seed << 1 | 1) }
    }

    /// What goes on now of `datagram`: nothing (dropped, or held for after the next one of
    /// its kind), it, or it and the one held before it.
    fn pass(&mut self, datagram: Vec<u8>, tally: &Tally) -> Vec<Vec<u8>> {
        let event = datagram.get(1).is_some_and(|pt| pt & 0x7f >= 96);
        let dice = if event { &mut self.events } else { &mut self.audio };
        let roll = dice.next() % 1000;
        let count = |all: &AtomicU64, events: &AtomicU64| {
            all.fetch_add(1, Ordering::Relaxed);
            if event {
                events.fetch_add(1, Ordering::Relaxed);
            }
        };
        if roll < PER_MILLE {
            count(&tally.dropped, &tally.events_dropped);
            return Vec::new();
        }
        if roll < 2 * PER_MILLE && dice.held.is_none() {
            count(&tally.reordered, &tally.events_reordered);
            dice.held = Some(datagram);
            return Vec::new();
        }
        let mut out = vec![datagram];
        out.extend(dice.held.take());
        out
    }
}

/// One stream's decisions: xorshift64 from a fixed seed decides each packet.
struct Dice {
    state: u64,
    held: Option<Vec<u8>>,
}

impl Dice {
    fn new(seed: u64) -> Self {
        Self { state: 0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0xbf58_476d_1ce4_e5b9), held: None }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
}

#[test]
fn a_call_through_a_relay_that_loses_and_reorders_its_rtp_goes_on() {
    let stack = stack_with("loss", &["--advertise", &RELAY_IP.to_string()]);
    let relay = UdpRelay::between(&stack);
    // Phrase 1 from 0.5 s to 2 s, 12 s to hear the agent's answer, phrase 2 from 14 s to
    // 16 s, 10 s to hear the answer to it; the phone hangs up at the end of its WAV. It
    // calls the relay: all of its SIP and media pass there.
    let options = Options { then: Some((SECOND_HZ, 2)), after: Some(10), ..Options::default() };
    let dial = format!("/dial sip:triage@{RELAY_IP}:{};transport=udp", stack.sip.port());
    let (phone, _) =
        Phone::start_with(&stack.dir, &stack.tools, "caller", "caller", 12, 90, "udp", "", "", Some(&dial), options);
    let context = || {
        format!(
            "relay to the edge (forwarded, dropped, reordered): {:?}, to the phone: {:?}\n--- edge ---\n{}\n\
             --- local ---\n{}\n--- baresip ---\n{}",
            relay.to_edge.read(),
            relay.to_phone.read(),
            stack.edge.log_text(),
            stack.local.log_text(),
            phone.log()
        )
    };
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = Instant::now();
    phone.wait_over(Duration::from_secs(90));
    let lasted = answered.elapsed().as_secs_f64();
    let edge = stack.edge.log_text();
    assert!(phone.log().contains("Call established"), "{}", context());
    assert!(edge.contains(r#"end="the phone side: RemoteHangUp""#), "the caller's BYE ended the call: {}", context());
    // baresip plays its whole WAV (about 26 s) before it hangs up.
    assert!(lasted > 22.0, "the call went on to the end of the phone's WAV: {lasted:.1} s\n{}", context());

    // The relay was in the media's way both ways, and impaired it: 50 packets a second for
    // 26 s each way (a busy machine's baresip sends fewer), about 5 % lost, as many swapped.
    for (way, tally) in [("to the edge", &relay.to_edge), ("to the phone", &relay.to_phone)] {
        let (forwarded, dropped, reordered) = tally.read();
        assert!(
            forwarded >= 500 && dropped >= 10 && reordered >= 10 && dropped * 8 <= forwarded,
            "the relay carried the RTP {way}, losing and reordering some: forwarded {forwarded}, dropped \
             {dropped}, reordered {reordered}\n{}",
            context()
        );
    }

    // One session, in which the agent heard both phrases in order, however much of them was
    // lost on the way (the edge concealed the gaps and put the swapped packets back).
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the call: {list:?}\n{}", context());
    let shown = sessions(&stack, &["show", list[0]["id"].as_str().expect("an id")]);
    let user: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
    assert_eq!(user.len(), 2, "both phrases heard, each once: {shown}\n{}", context());
    assert!(user[0].contains("phrase 1") && user[1].contains("phrase 2"), "{shown}");

    // The phone heard the agent answer each phrase: after phrase 1 (2-14 s in) and after
    // phrase 2 (16 s on), through the losses on its side.
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = |from: f64, to: f64| {
        let (from, to) = ((from * 4.0) as usize, (to * 4.0) as usize);
        windows.iter().skip(from).take(to.saturating_sub(from)).filter(|rms| **rms > 0.02).count()
    };
    let (first, second) = (voiced(2.0, 14.0), voiced(16.0, 60.0));
    assert!(
        first >= 4 && second >= 4,
        "the agent answered each phrase aloud: {first} and {second} voiced windows: {windows:?}\n{}",
        context()
    );

    // The edge counted the packets the relay dropped on their way to it as lost (RFC 3550's
    // cumulative loss: the swapped ones came, late, and are not). The relay's count is
    // read after the call: a packet dropped after the phone's last one reached the edge
    // is not counted there, nor held back at the end and never sent.
    let counted = wait_for_edge_sample(
        &stack,
        r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="phone_hung_up"}"#,
        1.0,
    );
    let (_, dropped, _) = relay.to_edge.read();
    let lost = sample(&counted, "switchboard_sip_rtp_packets_lost_total").expect("the losses counted");
    let received = sample(&counted, "switchboard_sip_rtp_packets_received_total").unwrap_or_default();
    eprintln!("the relay dropped {dropped} packets to the edge; the edge counted {lost} lost, {received} received");

    assert!(
        lost >= dropped as f64 * 0.7 && lost <= dropped as f64 * 1.3 + 5.0,
        "the edge counted the relay's losses: {lost} lost, {dropped} dropped\n{counted}"
    );
    assert!(received >= 500.0, "and the rest received: {received}\n{counted}");

    // What the edge did with them (its log of the call's media): the swapped packets were
    // put back in order, not dropped as late (each came just after the one it was swapped
    // with, well within the 40 ms the edge waits for a gap), and every gap was concealed,
    // so the session got a frame for every 20 ms the phone sent.
    let relayed = edge.lines().find(|l| l.contains("media relayed")).unwrap_or_else(|| panic!("{}", context()));
    let count = |key: &str| -> f64 {
        let value = relayed.split_once(&format!(" {key}=")).and_then(|(_, rest)| rest.split_whitespace().next());
        value.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{key} in {relayed}"))
    };
    let (_, _, reordered) = relay.to_edge.read();
    let (rtp_in, ignored, frames) = (count("rtp_in"), count("ignored"), count("frames_to_gateway"));
    assert!(ignored * 2.0 < reordered as f64, "{ignored} datagrams ignored, {reordered} reordered: {relayed}");
    assert!(
        frames >= rtp_in + lost * 0.7,
        "the losses concealed: {frames} frames, {rtp_in} in, {lost} lost: {relayed}"
    );
}

/// Keys pressed through the same losses: RFC 4733 repeats each press's packets (an update
/// every 50 ms, the end three times, all naming the press by its timestamp), so a lost or
/// swapped packet loses no key and repeats none. The edge forwards each key once, and the
/// agent is told them all, in order, once at the `#`.
#[test]
fn keys_pressed_through_a_relay_that_loses_and_reorders_packets_each_arrive_once() {
    const KEYS: &str = "1234567890#";
    let stack = stack_with("loss-keys", &["--advertise", &RELAY_IP.to_string()]);
    let relay = UdpRelay::between(&stack);
    let console = free_udp_tcp_ports(1);
    let dial = format!("/dial sip:triage@{RELAY_IP}:{};transport=udp", stack.sip.port());
    let config = console_config(console);
    let options = Options::default();
    let (phone, _) = Phone::start_with(
        &stack.dir,
        &stack.tools,
        "caller",
        "caller",
        12,
        40,
        "udp",
        "",
        &config,
        Some(&dial),
        options,
    );
    let context = || format!("relay to the edge: {:?}\n{}", relay.to_edge.read(), stack.logs(&phone));
    wait_for("the phone has the call", Duration::from_secs(20), || phone.log().contains("Call established"), context);
    std::thread::sleep(Duration::from_secs(3));
    Phone::press(console, KEYS);
    phone.wait_over(Duration::from_secs(45));
    let edge = stack.edge.log_text();
    let keys: u64 = edge
        .lines()
        .find_map(|l| l.split_once(" keys=").and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| panic!("the edge logs how many keys it forwarded: {}", context()));
    assert_eq!(keys, KEYS.len() as u64, "each key forwarded once: {}", context());
    let events = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let (dropped, reordered) = (events(&relay.to_edge.events_dropped), events(&relay.to_edge.events_reordered));
    eprintln!("of the keys' packets to the edge, the relay dropped {dropped} and swapped {reordered}");
    assert!(dropped >= 1 && reordered >= 1, "the relay impaired the keys' packets: {}", context());
    wait_for(
        "the record has the keys",
        Duration::from_secs(30),
        || the_session(&stack).contains("The caller pressed"),
        || the_session(&stack),
    );
    let shown = the_session(&stack);
    let told: Vec<&str> = shown.lines().filter(|l| l.contains(" user ") && l.contains("The caller pressed")).collect();
    assert_eq!(told.len(), 1, "told once, at the '#': {shown}");
    assert!(told[0].contains("The caller pressed 1 2 3 4 5 6 7 8 9 0 #"), "every key, in order: {shown}");
}
