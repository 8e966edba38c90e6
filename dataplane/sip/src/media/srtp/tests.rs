//! RFC 3711 Appendix B's test vectors, libsrtp's reference packets, and the rules around
//! them: tampering, replay, rollover, lifetime.

use super::context::{Context, Direction, derive, estimate};
use super::replay::{ReplayWindow, WINDOW};
use super::*;
use crate::media::rtp::RtpSender;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// RFC 3711 B.3's master key and salt (also libsrtp's test driver's).
fn master() -> MasterKey {
    let bytes = hex("E1F97A0D3E018BE0D64FA32C06DE4139 0EC675AD498AFEEBB6960B3AABE6");
    MasterKey::from_bytes(&bytes.try_into().expect("30 bytes"))
}

fn other_master() -> MasterKey {
    MasterKey { key: [7; KEY_LEN], salt: [9; SALT_LEN] }
}

#[test]
fn rfc3711_b2_aes_cm_keystream() {
    // B.2: the session key and (shifted) salt as the PRF's key and IV, SSRC and index 0.
    let master = MasterKey {
        key: hex("2B7E151628AED2A6ABF7158809CF4F3C").try_into().expect("16"),
        salt: hex("F0F1F2F3F4F5F6F7F8F9FAFBFCFD").try_into().expect("14"),
    };
    // Label 0 leaves the salt as it is: the keystream of `derive` is B.2's.
    let mut stream = vec![0u8; 16 * 0xFF02];
    derive(&master, 0, &mut stream);
    let block = |n: usize| stream[n * 16..n * 16 + 16].to_vec();
    assert_eq!(block(0), hex("E03EAD0935C95E80E166B16DD92B4EB4"));
    assert_eq!(block(1), hex("D23513162B02D0F72A43A2FE4A5F97AB"));
    assert_eq!(block(2), hex("41E95B3BB0A2E8DD477901E4FCA894C0"));
    assert_eq!(block(0xFEFF), hex("EC8CDF7398607CB0F2D21675EA9EA1E4"));
    assert_eq!(block(0xFF00), hex("362B7C3C6773516318A077D7FC5073AE"));
    assert_eq!(block(0xFF01), hex("6A2CC3787889374FBEB4C81B17BA6C44"));
}

#[test]
fn rfc3711_b3_key_derivation() {
    let master = master();
    let mut key = [0u8; 16];
    derive(&master, 0, &mut key);
    assert_eq!(key.to_vec(), hex("C61E7A93744F39EE10734AFE3FF7A087"), "cipher key");
    let mut salt = [0u8; 14];
    derive(&master, 2, &mut salt);
    assert_eq!(salt.to_vec(), hex("30CBBC08863D8C85D49DB34A9AE1"), "cipher salt");
    let mut auth = [0u8; 94];
    derive(&master, 1, &mut auth);
    let expected = "CEBE321F6FF7716B6FD4AB49AF256A15 6D38BAA48F0A0ACF3C34E2359E6CDBCE \
                    E049646C43D9327AD175578EF7227098 6371C10C9A369AC2F94A8C5FBCDDDC25 \
                    6D6E919A48B610EF17C2041E47403576 6B68642C59BBFC2F34DB60DBDFB2";
    assert_eq!(auth.to_vec(), hex(expected), "authentication key");
}

const PLAIN_RTP: &str = "800f1234decafbadcafebabe abababababababababababababababab";
const PLAIN_RTCP: &str = "81c8000bcafebabe abababababababababababababababab";

#[test]
fn libsrtp_reference_packets_protect_and_unprotect() {
    let suite = Suite::AesCm128HmacSha1_80;
    let mut sender = Context::new(&master(), suite, u64::MAX, Direction::Outbound);
    let protected = sender.protect_rtp(&hex(PLAIN_RTP)).expect("protects");
    let expected = hex("800f1234decafbadcafebabe 4e55dc4ce79978d88ca4d215949d2402 b78d6acc99ea179b8dbb");
    assert_eq!(protected, expected, "libsrtp's srtp_validate packet");
    let rtcp = sender.protect_rtcp(&hex(PLAIN_RTCP)).expect("protects");
    let expected = hex("81c8000bcafebabe 7128035be487b9bdbef89041f977a5a8 80000001 993e08cd54d6c1230798");
    assert_eq!(rtcp, expected, "libsrtp's srtcp reference packet (index 1, E flag)");

    let mut receiver = Context::new(&master(), suite, u64::MAX, Direction::Inbound);
    assert_eq!(receiver.unprotect_rtp(&protected).expect("authentic"), hex(PLAIN_RTP));
    assert_eq!(receiver.unprotect_rtcp(&rtcp).expect("authentic"), hex(PLAIN_RTCP));
}

fn session(suite: Suite, local: MasterKey, remote: MasterKey) -> SrtpSession {
    SrtpSession::new(SrtpKeys { suite, tag: 1, remote, local, lifetime: 1 << 31 })
}

/// The phone's session and the edge's: each one's local key is the other's remote.
fn pair(suite: Suite) -> (SrtpSession, SrtpSession) {
    (session(suite, master(), other_master()), session(suite, other_master(), master()))
}

#[test]
fn both_suites_round_trip_rtp_and_rtcp_with_their_tag_lengths() {
    for (suite, tag) in [(Suite::AesCm128HmacSha1_80, 10), (Suite::AesCm128HmacSha1_32, 4)] {
        let (mut phone, mut edge) = pair(suite);
        let mut rtp = RtpSender::new(0x1234_5678, 100, 8000);
        for n in 0..5u8 {
            let plain = rtp.media(0, n == 0, &[n; 160], 160);
            let protected = phone.protect_rtp(&plain).expect("protects");
            assert_eq!(protected.len(), plain.len() + tag, "{suite:?}");
            assert_ne!(&protected[12..172], &plain[12..], "the payload is encrypted");
            assert_eq!(edge.unprotect_rtp(&protected).expect("authentic"), plain);
        }
        let report = hex(PLAIN_RTCP);
        let protected = edge.protect_rtcp(&report).expect("protects");
        assert_eq!(protected.len(), report.len() + 4 + 10, "SRTCP's tag is 80 bits in both suites");
        assert_eq!(phone.unprotect_rtcp(&protected).expect("authentic"), report);
        assert_eq!(edge.take_counts().unprotected, 5);
        assert_eq!(edge.take_counts(), SrtpCounts::default(), "taken");
    }
}

#[test]
fn every_tampered_byte_fails_authentication_and_changes_nothing() {
    let (mut phone, mut edge) = pair(Suite::AesCm128HmacSha1_80);
    let mut rtp = RtpSender::new(7, 1, 1);
    let plain = rtp.media(0, false, &[0x55; 160], 160);
    let protected = phone.protect_rtp(&plain).expect("protects");
    for at in 0..protected.len() {
        let mut forged = protected.clone();
        forged[at] ^= 0x01;
        assert!(matches!(edge.unprotect_rtp(&forged), Err(SrtpError::AuthFailed | SrtpError::Malformed)), "byte {at}");
    }
    // Another key, a truncated packet, garbage.
    let (mut stranger, _) = pair(Suite::AesCm128HmacSha1_80);
    let mut stranger_key = session(Suite::AesCm128HmacSha1_80, MasterKey { key: [1; 16], salt: [2; 14] }, master());
    let foreign = stranger_key.protect_rtp(&plain).expect("protects");
    assert_eq!(edge.unprotect_rtp(&foreign), Err(SrtpError::AuthFailed));
    assert_eq!(edge.unprotect_rtp(&protected[..15]), Err(SrtpError::Malformed));
    assert_eq!(edge.unprotect_rtp(&[0xFF; 3]), Err(SrtpError::Malformed));
    assert_eq!(edge.unprotect_rtcp(&protected[..10]), Err(SrtpError::Malformed));
    let _ = stranger.take_counts();
    let counts = edge.take_counts();
    assert_eq!((counts.unprotected, counts.malformed), (0, 3));
    assert!(counts.auth_failed >= 170, "{counts:?}");
    // The genuine packet still authenticates: no forgery moved the stream's state.
    assert_eq!(edge.unprotect_rtp(&protected).expect("authentic"), plain);
}

#[test]
fn a_replayed_packet_is_dropped_and_a_late_one_in_the_window_is_taken() {
    let (mut phone, mut edge) = pair(Suite::AesCm128HmacSha1_80);
    let mut rtp = RtpSender::new(7, 1000, 1);
    let packets: Vec<Vec<u8>> =
        (0..200).map(|_| phone.protect_rtp(&rtp.media(0, false, &[1; 160], 160)).expect("protects")).collect();
    edge.unprotect_rtp(&packets[10]).expect("first");
    assert_eq!(edge.unprotect_rtp(&packets[10]), Err(SrtpError::Replayed));
    edge.unprotect_rtp(&packets[5]).expect("late, inside the window");
    assert_eq!(edge.unprotect_rtp(&packets[5]), Err(SrtpError::Replayed));
    edge.unprotect_rtp(&packets[199]).expect("ahead");
    assert_eq!(edge.unprotect_rtp(&packets[10]), Err(SrtpError::Replayed), "older than the window");
    edge.unprotect_rtp(&packets[199 - (WINDOW as usize) + 1]).expect("the window's oldest slot");
    let rtcp = phone.protect_rtcp(&hex(PLAIN_RTCP)).expect("protects");
    edge.unprotect_rtcp(&rtcp).expect("first");
    assert_eq!(edge.unprotect_rtcp(&rtcp), Err(SrtpError::Replayed));
    assert_eq!(edge.take_counts().replayed, 4);
}

#[test]
fn the_rollover_counter_follows_sequence_numbers_across_the_wrap() {
    let (mut phone, mut edge) = pair(Suite::AesCm128HmacSha1_32);
    let mut rtp = RtpSender::new(99, 65_530, 1);
    let mut sent = Vec::new();
    for _ in 0..20 {
        let plain = rtp.media(8, false, &[3; 160], 160);
        sent.push((plain.clone(), phone.protect_rtp(&plain).expect("protects")));
    }
    // The stream's first packet (rollover counter 0), then out of order across the wrap
    // (packet 6 is sequence number 0): one after it first, then the ones before.
    for i in [0, 8, 2, 3, 9, 4, 5, 6, 7, 10, 19, 11] {
        assert_eq!(edge.unprotect_rtp(&sent[i].1).expect("authentic"), sent[i].0, "packet {i}");
    }
}

#[test]
fn the_index_estimate_is_rfc3711_appendix_a() {
    assert_eq!(estimate(5, 6), 6);
    assert_eq!(estimate(0xFFFF, 2), 0x1_0002, "just past the wrap");
    assert_eq!(estimate(0x1_0002, 0xFFFE), 0xFFFE, "just before it");
    assert_eq!(estimate(0x3_8000, 0x100), 0x3_0100);
    assert_eq!(estimate(0x3_9000, 0x100), 0x4_0100);
}

#[test]
fn the_replay_window_remembers_128_behind_the_highest() {
    let mut window = ReplayWindow::default();
    let mut highest = window.accept(0, 1000);
    assert!(!window.is_fresh(highest, 1000));
    assert!(window.is_fresh(highest, 999) && window.is_fresh(highest, 1001));
    highest = window.accept(highest, 1200);
    assert!(!window.is_fresh(highest, 1000), "beyond the window");
    assert!(window.is_fresh(highest, 1200 - 127));
    highest = window.accept(highest, 1100);
    assert!(!window.is_fresh(highest, 1100));
    assert_eq!(highest, 1200);
}

#[test]
fn a_spent_lifetime_stops_protection() {
    let keys =
        SrtpKeys { suite: Suite::AesCm128HmacSha1_80, tag: 1, remote: master(), local: other_master(), lifetime: 2 };
    let mut edge = SrtpSession::new(keys);
    let mut rtp = RtpSender::new(1, 1, 1);
    edge.protect_rtp(&rtp.media(0, false, &[0; 160], 160)).expect("first");
    edge.protect_rtp(&rtp.media(0, false, &[0; 160], 160)).expect("second");
    assert_eq!(edge.protect_rtp(&rtp.media(0, false, &[0; 160], 160)), Err(SrtpError::Expired));
    assert_eq!(edge.take_counts().expired, 1);
}

#[test]
fn a_new_key_for_one_direction_leaves_the_other_directions_context_alone() {
    let (mut phone, mut edge) = pair(Suite::AesCm128HmacSha1_80);
    let mut rtp = RtpSender::new(5, 65_534, 1);
    // Past a wrap: the edge's outbound rollover counter is 1.
    for _ in 0..4 {
        let sent = edge.protect_rtp(&rtp.media(0, false, &[1; 160], 160)).expect("protects");
        phone.unprotect_rtp(&sent).expect("authentic");
    }
    // The phone's re-INVITE brings a new key of its own; the edge's stays.
    let new_phone_key = MasterKey { key: [0x77; KEY_LEN], salt: [0x78; SALT_LEN] };
    let keys = SrtpKeys { remote: new_phone_key.clone(), ..edge.keys().clone() };
    edge.rekey(keys);
    let sent = edge.protect_rtp(&rtp.media(0, false, &[2; 160], 160)).expect("protects");
    assert!(phone.unprotect_rtp(&sent).is_ok(), "the edge's stream goes on with its rollover counter");
    let mut phone_new = session(Suite::AesCm128HmacSha1_80, new_phone_key, other_master());
    let mut from_phone = RtpSender::new(6, 1, 1);
    let packet = phone_new.protect_rtp(&from_phone.media(0, false, &[3; 160], 160)).expect("protects");
    assert!(edge.unprotect_rtp(&packet).is_ok(), "the phone's new key is taken");
}

#[test]
fn keys_never_show_in_debug_output() {
    let (edge, _) = pair(Suite::AesCm128HmacSha1_80);
    let text = format!("{edge:?} {:?}", edge.keys());
    assert!(text.contains("redacted"), "{text}");
    for byte in [format!("{:?}", master().key[0]), "225".to_owned(), "E1F9".to_owned(), "e1f9".to_owned()] {
        assert!(!text.contains(&format!("[{byte},")), "{text}");
    }
    assert!(!text.contains("key: ["), "{text}");
}
