//! SDES (RFC 4568): the `a=crypto` attribute that carries an SRTP master key in SDP, read
//! strictly and written for the edge's answers and offers. What the edge does not take
//! (another key method, an unknown suite, a key of the wrong length, more than one key,
//! an MKI, a key derivation rate, FEC or unencrypted/unauthenticated session parameters)
//! is a [`CryptoError`] whose text says which; no text here ever holds key bytes.

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, general_purpose};

use crate::media::srtp::{KEY_LEN, MasterKey, SALT_LEN, Suite};

/// Standard base64, with or without padding (implementations differ).
const INLINE: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The longest SRTP key lifetime (2^48 packets, RFC 3711 §9.2); also the default.
pub const MAX_LIFETIME: u64 = 1 << 48;

/// One `a=crypto` line the edge can take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crypto {
    /// The tag (an answer names the offer's line by it).
    pub tag: u32,
    /// The suite.
    pub suite: Suite,
    /// The master key and salt.
    pub key: MasterKey,
    /// Packets the key may protect (2^48 when the line does not say).
    pub lifetime: u64,
}

/// Why an `a=crypto` line was not taken. The text names the line's tag where it read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// Not `<tag> <suite> <key-params> [<session-params>]`.
    #[error("a=crypto does not read as `<tag> <suite> inline:<key>`")]
    Syntax,
    /// The tag is not a number of 1 to 9 digits.
    #[error("a=crypto tag {0:?} is not a number of 1 to 9 digits")]
    Tag(String),
    /// A suite the edge does not speak.
    #[error(
        "a=crypto tag {tag}: suite {suite} is not supported (this edge speaks AES_CM_128_HMAC_SHA1_80 and AES_CM_128_HMAC_SHA1_32)"
    )]
    UnknownSuite {
        /// The tag.
        tag: u32,
        /// The suite as written, cut to 40 characters.
        suite: String,
    },
    /// A key method other than `inline:`.
    #[error("a=crypto tag {0}: the key method is not inline:")]
    NotInline(u32),
    /// More than one key (which needs MKIs).
    #[error("a=crypto tag {0}: more than one key is not supported")]
    ManyKeys(u32),
    /// The key is not base64.
    #[error("a=crypto tag {0}: the inline key is not base64")]
    Base64(u32),
    /// The key and salt are not 30 bytes.
    #[error("a=crypto tag {tag}: the inline key and salt are {got} bytes, {suite} needs 30")]
    KeyLength {
        /// The tag.
        tag: u32,
        /// The suite's name.
        suite: &'static str,
        /// The bytes decoded.
        got: usize,
    },
    /// A lifetime that does not read, is 0, or is over 2^48.
    #[error("a=crypto tag {0}: the key lifetime is not a number of packets from 1 to 2^48")]
    Lifetime(u32),
    /// An MKI (the edge takes one key per direction and no MKI).
    #[error("a=crypto tag {0}: an MKI is not supported (one key per direction, no MKI)")]
    Mki(u32),
    /// A session parameter the edge does not take.
    #[error("a=crypto tag {tag}: session parameter {param} is not supported")]
    SessionParam {
        /// The tag.
        tag: u32,
        /// The parameter's name, cut to 40 characters.
        param: String,
    },
}

fn cut(text: &str) -> String {
    text.chars().take(40).collect()
}

impl Crypto {
    /// Reads the value of an `a=crypto:` attribute (what follows the colon).
    pub fn parse(value: &str) -> Result<Self, CryptoError> {
        let mut parts = value.split_whitespace();
        let (Some(tag), Some(suite), Some(key_params)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(CryptoError::Syntax);
        };
        if tag.is_empty() || tag.len() > 9 || !tag.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CryptoError::Tag(cut(tag)));
        }
        let tag: u32 = tag.parse().map_err(|_| CryptoError::Tag(cut(tag)))?;
        let suite = Suite::from_name(suite).ok_or_else(|| CryptoError::UnknownSuite { tag, suite: cut(suite) })?;
        if key_params.contains(';') {
            return Err(CryptoError::ManyKeys(tag));
        }
        let info = key_params.strip_prefix("inline:").ok_or(CryptoError::NotInline(tag))?;
        let mut fields = info.split('|');
        let encoded = fields.next().unwrap_or_default();
        let mut lifetime = MAX_LIFETIME;
        for (n, field) in fields.enumerate() {
            if field.contains(':') {
                return Err(CryptoError::Mki(tag));
            }
            if n > 0 {
                return Err(CryptoError::Syntax);
            }
            lifetime = parse_lifetime(field).ok_or(CryptoError::Lifetime(tag))?;
        }
        let bytes = INLINE.decode(encoded).map_err(|_| CryptoError::Base64(tag))?;
        let bytes: [u8; KEY_LEN + SALT_LEN] =
            bytes.try_into().map_err(|b: Vec<u8>| CryptoError::KeyLength { tag, suite: suite.name(), got: b.len() })?;
        for param in parts {
            let taken = match param.split_once('=') {
                Some(("WSH", n)) => n.parse::<u32>().is_ok(),
                Some(("KDR", "0")) => true,
                _ => false,
            };
            if !taken {
                let name = param.split('=').next().unwrap_or(param);
                return Err(CryptoError::SessionParam { tag, param: cut(name) });
            }
        }
        Ok(Self { tag, suite, key: MasterKey::from_bytes(&bytes), lifetime })
    }

    /// The attribute's value for an SDP body (after `a=crypto:`), without lifetime or MKI.
    pub fn value(tag: u32, suite: Suite, key: &MasterKey) -> String {
        format!("{tag} {} inline:{}", suite.name(), general_purpose::STANDARD.encode(key.to_bytes()))
    }
}

/// `2^20` or `1048576`.
fn parse_lifetime(text: &str) -> Option<u64> {
    let lifetime = match text.strip_prefix("2^") {
        Some(power) => 1u64.checked_shl(power.parse().ok()?)?,
        None => text.parse().ok()?,
    };
    (1..=MAX_LIFETIME).contains(&lifetime).then_some(lifetime)
}

/// The first line of `lines` the edge takes, or why none: each refused line's reason.
pub fn choose(lines: &[String]) -> Result<Crypto, String> {
    let mut reasons = Vec::new();
    for line in lines {
        match Crypto::parse(line) {
            Ok(crypto) => return Ok(crypto),
            Err(error) => reasons.push(error.to_string()),
        }
    }
    if reasons.is_empty() {
        return Err("the offer has no a=crypto line".to_owned());
    }
    Err(format!("no usable a=crypto line: {}", reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";

    #[test]
    fn reads_rfc4568s_example_and_baresips_form() {
        let crypto = Crypto::parse(&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^20")).expect("reads");
        assert_eq!((crypto.tag, crypto.suite, crypto.lifetime), (1, Suite::AesCm128HmacSha1_80, 1 << 20));
        let crypto = Crypto::parse(&format!("2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}")).expect("reads");
        assert_eq!((crypto.tag, crypto.suite, crypto.lifetime), (2, Suite::AesCm128HmacSha1_32, MAX_LIFETIME));
        let written = Crypto::value(2, crypto.suite, &crypto.key);
        assert_eq!(written, format!("2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}"));
        assert_eq!(Crypto::parse(&written).expect("round trip").key, crypto.key);
        assert!(Crypto::parse(&format!("3 AES_CM_128_HMAC_SHA1_80 inline:{KEY} WSH=64 KDR=0")).is_ok());
    }

    #[test]
    fn each_thing_the_edge_does_not_take_has_its_reason() {
        let short = general_purpose::STANDARD.encode([1u8; 20]);
        let cases = [
            ("", CryptoError::Syntax),
            ("1 AES_CM_128_HMAC_SHA1_80", CryptoError::Syntax),
            ("x1 AES_CM_128_HMAC_SHA1_80 inline:abc", CryptoError::Tag("x1".into())),
            ("1234567890 AES_CM_128_HMAC_SHA1_80 inline:abc", CryptoError::Tag("1234567890".into())),
            (
                &format!("1 AEAD_AES_256_GCM inline:{KEY}"),
                CryptoError::UnknownSuite { tag: 1, suite: "AEAD_AES_256_GCM".into() },
            ),
            ("1 AES_CM_128_HMAC_SHA1_80 uri:https://key", CryptoError::NotInline(1)),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY};inline:{KEY}"), CryptoError::ManyKeys(1)),
            ("1 AES_CM_128_HMAC_SHA1_80 inline:!!!notbase64!!!", CryptoError::Base64(1)),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{short}"),
                CryptoError::KeyLength { tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", got: 20 },
            ),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^49"), CryptoError::Lifetime(1)),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|0"), CryptoError::Lifetime(1)),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^20|1:4"), CryptoError::Mki(1)),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|1:4"), CryptoError::Mki(1)),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY} UNENCRYPTED_SRTP"),
                CryptoError::SessionParam { tag: 1, param: "UNENCRYPTED_SRTP".into() },
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY} KDR=24"),
                CryptoError::SessionParam { tag: 1, param: "KDR".into() },
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(Crypto::parse(line), Err(expected), "{line}");
        }
    }

    #[test]
    fn no_reason_ever_shows_the_key() {
        let lines = [
            format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|1:4"),
            format!("2 AES_CM_128_HMAC_SHA1_80 inline:{KEY} FEC_KEY=inline:{KEY}"),
            format!("3 AES_CM_128_HMAC_SHA1_80 inline:{}", &KEY[..30]),
        ];
        let reason = choose(&lines).expect_err("none usable");
        assert!(!reason.contains(&KEY[..16]), "{reason}");
        assert!(reason.contains("tag 1") && reason.contains("tag 2") && reason.contains("tag 3"), "{reason}");
        assert_eq!(choose(&[]).expect_err("none"), "the offer has no a=crypto line");
    }
}
