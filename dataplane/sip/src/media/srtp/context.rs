//! One direction's SRTP crypto context (RFC 3711 §3.2): the session keys derived from the
//! master key (§4.3, key derivation rate 0), AES-128 counter mode (§4.1.1), HMAC-SHA1
//! (§4.2), the rollover counter and index estimate (§3.3.1, Appendix A) and the replay
//! windows (§3.3.2) of the stream it protects or unprotects.

use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use hmac::{Hmac, Mac};
use sha1::Sha1;

use super::replay::ReplayWindow;
use super::{MasterKey, SALT_LEN, SrtpError, Suite};

/// Which way a context's packets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// What the other side sends: the edge unprotects it.
    Inbound,
    /// What the edge sends: the edge protects it.
    Outbound,
}

/// The RFC 3711 §4.3.1 labels.
const RTP_CIPHER: u8 = 0;
const RTP_AUTH: u8 = 1;
const RTP_SALT: u8 = 2;
const RTCP_CIPHER: u8 = 3;
const RTCP_AUTH: u8 = 4;
const RTCP_SALT: u8 = 5;

/// HMAC-SHA1's key length in SRTP (160 bits).
const AUTH_KEY_LEN: usize = 20;
/// The fixed RTP header.
const RTP_HEADER: usize = 12;
/// The RTCP header and sender SSRC, which SRTCP leaves unencrypted.
const RTCP_HEADER: usize = 8;
/// SRTCP's E flag and index word.
const SRTCP_INDEX_LEN: usize = 4;
/// SRTCP indexes are 31 bits.
const SRTCP_INDEX_MASK: u32 = 0x7FFF_FFFF;

/// One session key set: a cipher, its salt, and the keyed HMAC (cloned per packet, which
/// copies its prepared inner and outer states instead of keying again).
struct Keys {
    cipher: Aes128,
    salt: [u8; SALT_LEN],
    mac: Hmac<Sha1>,
}

/// The AES-CM keystream of `iv` XORed onto `data` (the block counter is the IV's last
/// 16 bits, RFC 3711 §4.1.1).
fn apply_keystream(cipher: &Aes128, iv: &[u8; 16], data: &mut [u8]) {
    for (counter, chunk) in data.chunks_mut(16).enumerate() {
        let mut block = Array::from(*iv);
        let low = u16::from_be_bytes([iv[14], iv[15]]).wrapping_add(counter as u16);
        block[14..].copy_from_slice(&low.to_be_bytes());
        cipher.encrypt_block(&mut block);
        for (byte, key) in chunk.iter_mut().zip(block.iter()) {
            *byte ^= key;
        }
    }
}

/// Fills `out` with the session key of `label` (RFC 3711 §4.3.1 with a key derivation
/// rate of 0: r = 0, so x is the label at the salt's eighth byte XOR the master salt).
pub(super) fn derive(master: &MasterKey, label: u8, out: &mut [u8]) {
    let cipher = Aes128::new(&Array::from(master.key));
    let mut iv = [0u8; 16];
    iv[..SALT_LEN].copy_from_slice(&master.salt);
    iv[7] ^= label;
    out.fill(0);
    apply_keystream(&cipher, &iv, out);
}

impl Keys {
    fn new(master: &MasterKey, labels: [u8; 3]) -> Self {
        let [cipher_label, auth_label, salt_label] = labels;
        let (mut key, mut salt, mut auth) = ([0u8; 16], [0u8; SALT_LEN], [0u8; AUTH_KEY_LEN]);
        derive(master, cipher_label, &mut key);
        derive(master, salt_label, &mut salt);
        derive(master, auth_label, &mut auth);
        // HMAC takes a key of any length: this cannot fail.
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(&auth).expect("HMAC takes any key length");
        Self { cipher: Aes128::new(&Array::from(key)), salt, mac }
    }

    /// The counter-mode IV for a packet of `ssrc` with `index` (48 bits for SRTP, 31 for
    /// SRTCP): (salt * 2^16) XOR (SSRC * 2^64) XOR (index * 2^16).
    fn iv(&self, ssrc: u32, index: u64) -> [u8; 16] {
        let mut iv = [0u8; 16];
        iv[..SALT_LEN].copy_from_slice(&self.salt);
        for (byte, s) in iv[4..8].iter_mut().zip(ssrc.to_be_bytes()) {
            *byte ^= s;
        }
        for (byte, i) in iv[8..14].iter_mut().zip(&index.to_be_bytes()[2..]) {
            *byte ^= i;
        }
        iv
    }

    /// The full HMAC-SHA1 of `parts`, in order.
    fn tag(&self, parts: &[&[u8]]) -> [u8; 20] {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the leftmost bytes of the HMAC of `parts` (in constant time).
    fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac.verify_truncated_left(tag).is_ok()
    }
}

/// What is known of the stream a context receives: its SSRC, the highest index
/// authenticated (which holds the rollover counter), and the replay window.
#[derive(Debug)]
struct Received {
    ssrc: u32,
    highest: u64,
    window: ReplayWindow,
}

/// One direction's crypto context (see the module docs).
pub struct Context {
    suite: Suite,
    rtp: Keys,
    rtcp: Keys,
    direction: Direction,
    /// Outbound: the last sequence number sent and the rollover counter.
    sent: Option<(u16, u32)>,
    /// Outbound: the last SRTCP index sent.
    rtcp_sent: u32,
    /// Inbound: the stream received.
    received: Option<Received>,
    /// Inbound: the SRTCP replay window.
    rtcp_window: ReplayWindow,
    /// Packets each of SRTP and SRTCP this key may still protect or accept.
    lifetime: u64,
    rtp_used: u64,
    rtcp_used: u64,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("suite", &self.suite)
            .field("direction", &self.direction)
            .field("rtp_used", &self.rtp_used)
            .field("rtcp_used", &self.rtcp_used)
            .finish_non_exhaustive()
    }
}

/// The header length of an RTP packet (fixed header, CSRCs, extension), if it has one.
fn rtp_header_len(packet: &[u8]) -> Option<usize> {
    if packet.len() < RTP_HEADER || packet[0] >> 6 != 2 {
        return None;
    }
    let mut len = RTP_HEADER + 4 * usize::from(packet[0] & 0x0F);
    if packet[0] & 0x10 != 0 {
        let words = packet.get(len + 2..len + 4)?;
        len += 4 + 4 * usize::from(u16::from_be_bytes([words[0], words[1]]));
    }
    (len <= packet.len()).then_some(len)
}

fn ssrc_at(packet: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([packet[at], packet[at + 1], packet[at + 2], packet[at + 3]])
}

impl Context {
    /// A context for one direction of a call.
    pub fn new(master: &MasterKey, suite: Suite, lifetime: u64, direction: Direction) -> Self {
        Self {
            suite,
            rtp: Keys::new(master, [RTP_CIPHER, RTP_AUTH, RTP_SALT]),
            rtcp: Keys::new(master, [RTCP_CIPHER, RTCP_AUTH, RTCP_SALT]),
            direction,
            sent: None,
            rtcp_sent: 0,
            received: None,
            rtcp_window: ReplayWindow::default(),
            lifetime,
            rtp_used: 0,
            rtcp_used: 0,
        }
    }

    /// Protects an RTP packet: its payload encrypted, the tag appended.
    pub fn protect_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let header = rtp_header_len(packet).ok_or(SrtpError::Malformed)?;
        if self.rtp_used >= self.lifetime {
            return Err(SrtpError::Expired);
        }
        let sequence = u16::from_be_bytes([packet[2], packet[3]]);
        let roc = match self.sent {
            // A sequence number far below the last one sent: it wrapped.
            Some((last, roc)) if sequence < last && last - sequence > 0x8000 => roc.wrapping_add(1),
            Some((_, roc)) => roc,
            None => 0,
        };
        self.sent = Some((sequence, roc));
        self.rtp_used += 1;
        let index = (u64::from(roc) << 16) | u64::from(sequence);
        let iv = self.rtp.iv(ssrc_at(packet, 8), index);
        let mut out = Vec::with_capacity(packet.len() + self.suite.rtp_tag_len());
        out.extend_from_slice(packet);
        apply_keystream(&self.rtp.cipher, &iv, &mut out[header..]);
        let tag = self.rtp.tag(&[&out, &roc.to_be_bytes()]);
        out.extend_from_slice(&tag[..self.suite.rtp_tag_len()]);
        Ok(out)
    }

    /// Authenticates and decrypts an SRTP packet: the replay window first, then the tag,
    /// and only then is it decrypted and the stream's state moved.
    pub fn unprotect_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let tag_len = self.suite.rtp_tag_len();
        let body = packet.len().checked_sub(tag_len).ok_or(SrtpError::Malformed)?;
        let header = rtp_header_len(&packet[..body]).ok_or(SrtpError::Malformed)?;
        let (sequence, ssrc) = (u16::from_be_bytes([packet[2], packet[3]]), ssrc_at(packet, 8));
        // A new SSRC (the phone restarted its stream) starts from rollover counter 0; it
        // replaces the known stream only once it authenticates.
        let known = self.received.as_ref().filter(|r| r.ssrc == ssrc);
        let index = match known {
            Some(stream) => {
                let index = estimate(stream.highest, sequence);
                if !stream.window.is_fresh(stream.highest, index) {
                    return Err(SrtpError::Replayed);
                }
                index
            }
            None => u64::from(sequence),
        };
        let roc = (index >> 16) as u32;
        if !self.rtp.verify(&[&packet[..body], &roc.to_be_bytes()], &packet[body..]) {
            return Err(SrtpError::AuthFailed);
        }
        if self.rtp_used >= self.lifetime {
            return Err(SrtpError::Expired);
        }
        self.rtp_used += 1;
        match &mut self.received {
            Some(stream) if stream.ssrc == ssrc => stream.highest = stream.window.accept(stream.highest, index),
            _ => {
                let mut window = ReplayWindow::default();
                let highest = window.accept(index, index);
                self.received = Some(Received { ssrc, highest, window });
            }
        }
        let mut out = packet[..body].to_vec();
        let iv = self.rtp.iv(ssrc, index);
        apply_keystream(&self.rtp.cipher, &iv, &mut out[header..]);
        Ok(out)
    }

    /// Protects an RTCP compound packet: encrypted after the first header and SSRC, the
    /// E flag and SRTCP index appended, then the tag.
    pub fn protect_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        if packet.len() < RTCP_HEADER || packet[0] >> 6 != 2 {
            return Err(SrtpError::Malformed);
        }
        if self.rtcp_used >= self.lifetime.min(u64::from(SRTCP_INDEX_MASK)) {
            return Err(SrtpError::Expired);
        }
        self.rtcp_used += 1;
        self.rtcp_sent = (self.rtcp_sent + 1) & SRTCP_INDEX_MASK;
        let index = self.rtcp_sent;
        let mut out = Vec::with_capacity(packet.len() + SRTCP_INDEX_LEN + self.suite.rtcp_tag_len());
        out.extend_from_slice(packet);
        let iv = self.rtcp.iv(ssrc_at(packet, 4), u64::from(index));
        apply_keystream(&self.rtcp.cipher, &iv, &mut out[RTCP_HEADER..]);
        out.extend_from_slice(&(index | 0x8000_0000).to_be_bytes());
        let tag = self.rtcp.tag(&[&out]);
        out.extend_from_slice(&tag[..self.suite.rtcp_tag_len()]);
        Ok(out)
    }

    /// Authenticates and decrypts an SRTCP packet (the replay window first, then the tag).
    pub fn unprotect_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let tag_len = self.suite.rtcp_tag_len();
        let body = packet.len().checked_sub(tag_len + SRTCP_INDEX_LEN).ok_or(SrtpError::Malformed)?;
        if body < RTCP_HEADER || packet[0] >> 6 != 2 {
            return Err(SrtpError::Malformed);
        }
        let word = ssrc_at(packet, body);
        let index = u64::from(word & SRTCP_INDEX_MASK);
        let highest = self.rtcp_window.highest();
        if highest.is_some_and(|h| !self.rtcp_window.is_fresh(h, index)) {
            return Err(SrtpError::Replayed);
        }
        let authenticated = body + SRTCP_INDEX_LEN;
        if !self.rtcp.verify(&[&packet[..authenticated]], &packet[authenticated..]) {
            return Err(SrtpError::AuthFailed);
        }
        if word & 0x8000_0000 == 0 {
            return Err(SrtpError::Unencrypted);
        }
        if self.rtcp_used >= self.lifetime {
            return Err(SrtpError::Expired);
        }
        self.rtcp_used += 1;
        self.rtcp_window.accept(highest.unwrap_or(index), index);
        let mut out = packet[..body].to_vec();
        let iv = self.rtcp.iv(ssrc_at(packet, 4), index);
        apply_keystream(&self.rtcp.cipher, &iv, &mut out[RTCP_HEADER..]);
        Ok(out)
    }
}

/// The packet index of `sequence` given the highest index authenticated (RFC 3711
/// §3.3.1): the rollover counter guess that puts it nearest.
pub(super) fn estimate(highest: u64, sequence: u16) -> u64 {
    let roc = highest >> 16;
    let s_l = (highest & 0xFFFF) as u16;
    let guess = if s_l < 0x8000 {
        if sequence > s_l && sequence - s_l > 0x8000 { roc.wrapping_sub(1) } else { roc }
    } else if s_l - 0x8000 > sequence {
        roc + 1
    } else {
        roc
    };
    // Before the first rollover, a "previous" counter does not exist: the packet is old.
    ((guess & 0xFFFF_FFFF) << 16) | u64::from(sequence)
}
