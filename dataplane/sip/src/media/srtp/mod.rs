//! SRTP and SRTCP (RFC 3711) with keys exchanged by SDES (RFC 4568, [`crate::sdp::crypto`]),
//! without I/O: a [`SrtpSession`] protects what the edge sends and unprotects what it
//! receives on one call's media, from the two master keys offer/answer settled
//! ([`SrtpKeys`]: the phone's for what it sends, the edge's own for what the edge sends).
//!
//! The crypto transforms are AES-128 in counter mode and HMAC-SHA1, the two suites
//! carriers and PBXs offer with SIP over TLS: [`Suite::AesCm128HmacSha1_80`] and
//! [`Suite::AesCm128HmacSha1_32`] (an 80-bit SRTCP tag for both, RFC 4568 §6.2). The
//! primitives are RustCrypto's `aes`, `hmac` and `sha1`; the counter mode, the key
//! derivation (key derivation rate 0), the rollover counter and the replay windows are
//! [`context`]'s and [`replay`]'s. What the module does not take: MKIs, more than one key
//! per direction, key derivation rates other than 0, AEAD suites.
//!
//! Costs under attack: a received packet is checked against the replay window first, then
//! its tag; only an authentic packet is decrypted or changes any state, so a flood of
//! forged packets costs one HMAC each and moves nothing.
//!
//! Keys never leave this module in a printable form: [`MasterKey`]'s `Debug` is redacted.

mod context;
mod replay;

use std::fmt;

pub use context::{Context, Direction};

/// The crypto suites the edge speaks (RFC 4568 §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suite {
    /// AES-128 counter mode, HMAC-SHA1 with an 80-bit tag.
    AesCm128HmacSha1_80,
    /// AES-128 counter mode, HMAC-SHA1 with a 32-bit tag on SRTP (80 bits on SRTCP).
    AesCm128HmacSha1_32,
}

impl Suite {
    /// Every suite, the edge's preference first (for its offers).
    pub const ALL: [Suite; 2] = [Suite::AesCm128HmacSha1_80, Suite::AesCm128HmacSha1_32];

    /// The name in `a=crypto`.
    pub fn name(self) -> &'static str {
        match self {
            Self::AesCm128HmacSha1_80 => "AES_CM_128_HMAC_SHA1_80",
            Self::AesCm128HmacSha1_32 => "AES_CM_128_HMAC_SHA1_32",
        }
    }

    /// The suite of a name, if the edge speaks it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The SRTP authentication tag's length in bytes.
    pub fn rtp_tag_len(self) -> usize {
        match self {
            Self::AesCm128HmacSha1_80 => 10,
            Self::AesCm128HmacSha1_32 => 4,
        }
    }

    /// The SRTCP authentication tag's length in bytes (80 bits for both suites).
    pub fn rtcp_tag_len(self) -> usize {
        10
    }
}

/// The length of a master key (AES-128).
pub const KEY_LEN: usize = 16;
/// The length of a master salt (112 bits).
pub const SALT_LEN: usize = 14;

/// A master key and salt (30 bytes, as `inline:` carries them). Its `Debug` shows no byte.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterKey {
    /// The key.
    pub key: [u8; KEY_LEN],
    /// The salt.
    pub salt: [u8; SALT_LEN],
}

impl MasterKey {
    /// The key and salt from the 30 bytes of `inline:` (key first).
    pub fn from_bytes(bytes: &[u8; KEY_LEN + SALT_LEN]) -> Self {
        let mut key = [0; KEY_LEN];
        let mut salt = [0; SALT_LEN];
        key.copy_from_slice(&bytes[..KEY_LEN]);
        salt.copy_from_slice(&bytes[KEY_LEN..]);
        Self { key, salt }
    }

    /// The 30 bytes of `inline:` (key, then salt).
    pub fn to_bytes(&self) -> [u8; KEY_LEN + SALT_LEN] {
        let mut bytes = [0; KEY_LEN + SALT_LEN];
        bytes[..KEY_LEN].copy_from_slice(&self.key);
        bytes[KEY_LEN..].copy_from_slice(&self.salt);
        bytes
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(redacted)")
    }
}

/// What SDES settled for one call's media: the suite, the `a=crypto` tag, and the two
/// master keys. Its `Debug` shows no key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrtpKeys {
    /// The suite both ways.
    pub suite: Suite,
    /// The `a=crypto` tag of the line taken.
    pub tag: u32,
    /// The other side's key: what it sends is protected with it.
    pub remote: MasterKey,
    /// The edge's own key (drawn by the owner from a CSPRNG): what the edge sends.
    pub local: MasterKey,
    /// The most packets one key may protect (`a=crypto`'s lifetime; 2^31 when unsaid).
    pub lifetime: u64,
}

/// Why a packet was not protected or unprotected. [`SrtpError::outcome`] is the metric
/// label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrtpError {
    /// Too short for its header and tag, or not RTP/RTCP.
    #[error("the packet is too short or not RTP/RTCP")]
    Malformed,
    /// The authentication tag does not match: forged, corrupted, or another key.
    #[error("the packet failed authentication")]
    AuthFailed,
    /// A packet index already received, or older than the replay window.
    #[error("the packet was replayed or is older than the replay window")]
    Replayed,
    /// The key protected as many packets as its lifetime allows.
    #[error("the master key's lifetime is spent")]
    Expired,
    /// An SRTCP packet without its E flag (unencrypted SRTCP was not negotiated).
    #[error("the SRTCP packet is not encrypted")]
    Unencrypted,
}

impl SrtpError {
    /// The `outcome` label of `switchboard_sip_srtp_packets_total`.
    pub fn outcome(self) -> &'static str {
        match self {
            Self::Malformed | Self::Unencrypted => "malformed",
            Self::AuthFailed => "auth_failed",
            Self::Replayed => "replayed",
            Self::Expired => "expired",
        }
    }
}

/// Packets the session handled since [`SrtpSession::take_counts`] last took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrtpCounts {
    /// Packets protected (SRTP and SRTCP sent).
    pub protected: u64,
    /// Packets unprotected (authentic, fresh, decrypted).
    pub unprotected: u64,
    /// Packets dropped: failed authentication.
    pub auth_failed: u64,
    /// Packets dropped: replayed or too old.
    pub replayed: u64,
    /// Packets dropped: malformed (too short, unencrypted SRTCP).
    pub malformed: u64,
    /// Packets not protected or dropped because the key's lifetime is spent.
    pub expired: u64,
}

impl SrtpCounts {
    fn failed(&mut self, error: SrtpError) {
        match error {
            SrtpError::Malformed | SrtpError::Unencrypted => self.malformed += 1,
            SrtpError::AuthFailed => self.auth_failed += 1,
            SrtpError::Replayed => self.replayed += 1,
            SrtpError::Expired => self.expired += 1,
        }
    }

    /// Each count with its `outcome` label.
    pub fn by_outcome(&self) -> [(&'static str, u64); 6] {
        [
            ("protected", self.protected),
            ("unprotected", self.unprotected),
            ("auth_failed", self.auth_failed),
            ("replayed", self.replayed),
            ("malformed", self.malformed),
            ("expired", self.expired),
        ]
    }
}

/// One call's SRTP both ways (see the module docs).
#[derive(Debug)]
pub struct SrtpSession {
    keys: SrtpKeys,
    inbound: Context,
    outbound: Context,
    counts: SrtpCounts,
}

impl SrtpSession {
    /// The session for what SDES settled.
    pub fn new(keys: SrtpKeys) -> Self {
        Self {
            inbound: Context::new(&keys.remote, keys.suite, keys.lifetime, Direction::Inbound),
            outbound: Context::new(&keys.local, keys.suite, keys.lifetime, Direction::Outbound),
            counts: SrtpCounts::default(),
            keys,
        }
    }

    /// New keys from a new offer/answer in the call (a re-INVITE): a direction whose key
    /// (or the suite) changed starts a new context; one whose key stayed keeps its own, with
    /// its rollover counter and replay window, as the other side does.
    pub fn rekey(&mut self, keys: SrtpKeys) {
        let suite = keys.suite != self.keys.suite;
        if suite || keys.remote != self.keys.remote || keys.lifetime != self.keys.lifetime {
            self.inbound = Context::new(&keys.remote, keys.suite, keys.lifetime, Direction::Inbound);
        }
        if suite || keys.local != self.keys.local || keys.lifetime != self.keys.lifetime {
            self.outbound = Context::new(&keys.local, keys.suite, keys.lifetime, Direction::Outbound);
        }
        self.keys = keys;
    }

    /// The keys the session was made from.
    pub fn keys(&self) -> &SrtpKeys {
        &self.keys
    }

    /// An RTP packet to send, protected.
    pub fn protect_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let protected = self.outbound.protect_rtp(packet);
        self.count(protected)
    }

    /// An RTCP compound packet to send, protected.
    pub fn protect_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let protected = self.outbound.protect_rtcp(packet);
        self.count(protected)
    }

    /// A received SRTP packet, authenticated and decrypted.
    pub fn unprotect_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let plain = self.inbound.unprotect_rtp(packet);
        self.count_in(plain)
    }

    /// A received SRTCP packet, authenticated and decrypted.
    pub fn unprotect_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let plain = self.inbound.unprotect_rtcp(packet);
        self.count_in(plain)
    }

    /// The counts since they were last taken (for the owner's metrics).
    pub fn take_counts(&mut self) -> SrtpCounts {
        std::mem::take(&mut self.counts)
    }

    fn count(&mut self, result: Result<Vec<u8>, SrtpError>) -> Result<Vec<u8>, SrtpError> {
        match &result {
            Ok(_) => self.counts.protected += 1,
            Err(error) => self.counts.failed(*error),
        }
        result
    }

    fn count_in(&mut self, result: Result<Vec<u8>, SrtpError>) -> Result<Vec<u8>, SrtpError> {
        match &result {
            Ok(_) => self.counts.unprotected += 1,
            Err(error) => self.counts.failed(*error),
        }
        result
    }
}

#[cfg(test)]
mod tests;
