//! SDES and SRTP (`switchboard_sip::sdp::crypto`, `switchboard_sip::media::srtp`): every
//! `a=crypto` line of an offer, and every datagram that reaches a call's media port on an
//! SRTP call. Properties: no input panics the parser or unprotect; a line the edge takes,
//! written back, reads as the same; what the edge protects unprotects to itself, and the
//! same bytes forged by one bit never pass.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::media::srtp::{MasterKey, SrtpKeys, SrtpSession, Suite};
use switchboard_sip::sdp::crypto::Crypto;

fn session(suite: Suite, local: u8, remote: u8) -> SrtpSession {
    let key = |n: u8| MasterKey { key: [n; 16], salt: [n ^ 0x5A; 14] };
    SrtpSession::new(SrtpKeys { suite, tag: 1, remote: key(remote), local: key(local), lifetime: 1 << 48 })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if let Ok(text) = std::str::from_utf8(rest)
        && let Ok(crypto) = Crypto::parse(text)
    {
        let written = Crypto::value(crypto.tag, crypto.suite, &crypto.key);
        let back = Crypto::parse(&written).expect("a written line reads");
        assert_eq!((back.tag, back.suite, &back.key), (crypto.tag, crypto.suite, &crypto.key));
    }
    let suite = if mode & 1 == 0 { Suite::AesCm128HmacSha1_80 } else { Suite::AesCm128HmacSha1_32 };
    let mut edge = session(suite, 1, 2);
    let _ = edge.unprotect_rtp(rest);
    let _ = edge.unprotect_rtcp(rest);
    let mut phone = session(suite, 2, 1);
    let rtcp = mode & 2 != 0;
    let protected = if rtcp { phone.protect_rtcp(rest) } else { phone.protect_rtp(rest) };
    if let Ok(protected) = protected {
        let mut forged = protected.clone();
        let at = usize::from(mode) % forged.len();
        forged[at] ^= 0x80;
        let mut fresh = session(suite, 1, 2);
        let forged_ok = if rtcp { fresh.unprotect_rtcp(&forged) } else { fresh.unprotect_rtp(&forged) };
        assert!(forged_ok.is_err(), "a forged packet passed");
        let plain = if rtcp { fresh.unprotect_rtcp(&protected) } else { fresh.unprotect_rtp(&protected) };
        assert_eq!(plain.expect("what the edge protects unprotects"), rest);
    }
});
