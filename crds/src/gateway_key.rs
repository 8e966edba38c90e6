//! The gateway's public key as the control plane carries it. The gateway publishes it (no
//! secret) in a ConfigMap beside the routing table, under [`CONFIG_MAP_KEY`]; the operator
//! reads it there, or takes it from `--gateway-public-key`, and gives it to runtime pods as
//! `SWITCHBOARD_GATEWAY_PUBLIC_KEY` (see [`crate::contract`]). The operator never holds the
//! private key.
//!
//! Only runtimes verify signatures with the key (`switchboard_core::grant::GatewayPublicKey`,
//! which also checks that it is a point of the curve). Here it is only checked to be
//! well-formed — 32 bytes, as 64 hex digits or an Ed25519 PEM public key — and always
//! written as hex, so one key gives pods the same environment whichever form it came in.
//!
//! Runtimes trust a *set* of keys ([`PublicKeys`]: several, separated by commas or
//! newlines), so the gateway's key can be rotated without refusing sessions: pods trust the
//! old and the new key while the gateway changes from one to the other ([`key_texts`] is
//! the one reading of such a list, here and in the runtimes).

use base64::Engine as _;

/// The key of the public key (64 hex digits) in the ConfigMap the gateway publishes.
pub const CONFIG_MAP_KEY: &str = "public-key";

/// The DER prefix of an Ed25519 `SubjectPublicKeyInfo` (RFC 8410): the 32 key bytes follow.
const ED25519_SPKI_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
const PEM_BEGIN: &str = "-----BEGIN PUBLIC KEY-----";
const PEM_END: &str = "-----END PUBLIC KEY-----";

/// A well-formed Ed25519 public key: 32 bytes, written as 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

/// Why a text is not a gateway public key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KeyError {
    /// Neither hex nor PEM.
    #[error("not hex ({0}); expected 64 hex digits or an Ed25519 PEM public key")]
    Hex(#[source] hex::FromHexError),
    /// Hex of the wrong length.
    #[error("{0} bytes; an Ed25519 public key has 32 (64 hex digits)")]
    Length(usize),
    /// A PEM block that is not a public key.
    #[error("not a PEM public key: expected {PEM_BEGIN} ... {PEM_END}")]
    NotPem,
    /// A PEM body that is not base64.
    #[error("the PEM public key's body is not base64 ({0})")]
    Base64(#[source] base64::DecodeError),
    /// A PEM public key of another algorithm.
    #[error("the PEM public key is not an Ed25519 key")]
    NotEd25519,
    /// A list without a key.
    #[error("no key given; expected one or more keys (64 hex digits or PEM), separated by commas or newlines")]
    Empty,
    /// One key of a list is malformed.
    #[error("key {position} of {count}: {source}")]
    InList {
        /// Its place in the list, from 1.
        position: usize,
        /// How many keys the list has.
        count: usize,
        /// What is wrong with it.
        #[source]
        source: Box<KeyError>,
    },
}

impl PublicKey {
    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    fn from_pem(text: &str) -> Result<Self, KeyError> {
        let body = text.strip_prefix(PEM_BEGIN).and_then(|t| t.strip_suffix(PEM_END)).ok_or(KeyError::NotPem)?;
        let body: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD.decode(body).map_err(KeyError::Base64)?;
        match der.strip_prefix(&ED25519_SPKI_PREFIX[..]).map(<[u8; 32]>::try_from) {
            Some(Ok(bytes)) => Ok(Self(bytes)),
            _ => Err(KeyError::NotEd25519),
        }
    }
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl std::str::FromStr for PublicKey {
    type Err = KeyError;

    /// 64 hex digits (either case), or an Ed25519 PEM public key; surrounding whitespace
    /// is ignored.
    fn from_str(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if text.starts_with("-----BEGIN") {
            return Self::from_pem(text);
        }
        let bytes = hex::decode(text).map_err(KeyError::Hex)?;
        let len = bytes.len();
        <[u8; 32]>::try_from(bytes).map(Self).map_err(|_| KeyError::Length(len))
    }
}

/// The keys of a list, each as written: PEM blocks (`-----BEGIN ...` to the end of its
/// `-----END ...-----` line) and, between them, hex keys separated by commas or whitespace
/// (newlines). An unterminated PEM block is [`KeyError::NotPem`]; no key at all,
/// [`KeyError::Empty`]. What each text is, is for the key's parser to say.
pub fn key_texts(text: &str) -> Result<Vec<&str>, KeyError> {
    let mut keys = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if rest.is_empty() {
            break;
        }
        if rest.starts_with("-----BEGIN") {
            let end = rest.find("-----END").ok_or(KeyError::NotPem)?;
            // The END line's closing dashes: after "-----END", the next "-----".
            let after = end + "-----END".len();
            let close = rest[after..].find("-----").ok_or(KeyError::NotPem)? + after + "-----".len();
            keys.push(&rest[..close]);
            rest = &rest[close..];
        } else {
            let end = rest.find(|c: char| c == ',' || c.is_whitespace()).unwrap_or(rest.len());
            keys.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    if keys.is_empty() {
        return Err(KeyError::Empty);
    }
    Ok(keys)
}

/// The gateway public keys runtimes trust: one or more, in the order given, without
/// repeats. Written as their hex, comma-separated (what pods get in their environment).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKeys(Vec<PublicKey>);

impl PublicKeys {
    /// The keys, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &PublicKey> {
        self.0.iter()
    }

    /// How many keys there are (at least one).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a list has at least one key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<PublicKey> for PublicKeys {
    fn from(key: PublicKey) -> Self {
        Self(vec![key])
    }
}

impl std::fmt::Display for PublicKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, key) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for PublicKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKeys({self})")
    }
}

impl std::str::FromStr for PublicKeys {
    type Err = KeyError;

    /// One or more keys (hex or PEM, as [`PublicKey`] reads them) separated by commas or
    /// newlines ([`key_texts`]); a key given twice counts once. A single malformed key
    /// says what is wrong with it; in a longer list, which one it is too.
    fn from_str(text: &str) -> Result<Self, KeyError> {
        let texts = key_texts(text)?;
        let count = texts.len();
        let mut keys: Vec<PublicKey> = Vec::with_capacity(count);
        for (i, text) in texts.into_iter().enumerate() {
            let key = text.parse::<PublicKey>().map_err(|e| match count {
                1 => e,
                _ => KeyError::InList { position: i + 1, count, source: Box::new(e) },
            })?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        Ok(Self(keys))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const HEX: &str = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";
    const PEM: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAmzZwGhE75wjBL5EdeIsSt614BUBaWt+XluNPuJPpIJI=\n-----END PUBLIC KEY-----\n";
    /// An RSA-2048 key's PEM start: valid base64 and DER, not Ed25519.
    const RSA_PEM: &str = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----";

    #[test]
    fn hex_and_pem_give_the_same_key_written_as_hex() {
        let from_hex: PublicKey = HEX.parse().expect("hex");
        let from_pem: PublicKey = PEM.parse().expect("PEM (as openssl writes it)");
        assert_eq!(from_hex, from_pem);
        assert_eq!(from_pem.to_string(), HEX);
        assert_eq!(format!("  {}\n", HEX.to_uppercase()).parse::<PublicKey>(), Ok(from_hex));
    }

    #[test]
    fn malformed_keys_say_what_is_wrong() {
        assert_eq!("abcd".parse::<PublicKey>(), Err(KeyError::Length(2)));
        assert!(matches!("xyz".parse::<PublicKey>(), Err(KeyError::Hex(_))));
        assert!(matches!("".parse::<PublicKey>(), Err(KeyError::Length(0))));
        assert_eq!(RSA_PEM.parse::<PublicKey>(), Err(KeyError::NotEd25519));
        assert!(matches!(PEM.replace("MCow", "M!ow").parse::<PublicKey>(), Err(KeyError::Base64(_))));
        let private = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIBBK5UyYk00FD9JpvktXLCh348DN1Am+CxGQbJ+h0CLg\n-----END PRIVATE KEY-----";
        assert_eq!(private.parse::<PublicKey>(), Err(KeyError::NotPem), "a private key is refused");
        let message = "abcd".parse::<PublicKey>().map_err(|e| e.to_string());
        assert_eq!(message, Err("2 bytes; an Ed25519 public key has 32 (64 hex digits)".to_owned()));
    }

    #[test]
    fn a_list_holds_hex_and_pem_keys_separated_by_commas_or_newlines() {
        let (a, b) = (HEX.parse::<PublicKey>().expect("a"), PublicKey::from_bytes([7; 32]));
        let b_hex = b.to_string();
        for text in [
            format!("{HEX},{b_hex}"),
            format!(" {HEX} , {b_hex},\n"),
            format!("{HEX}\n{b_hex}\n"),
            format!("{PEM}{b_hex}"),
            format!("{PEM},\n{b_hex}"),
            format!("{}\n{PEM}\n{b_hex}\n{HEX}", HEX.to_uppercase()),
        ] {
            let keys: PublicKeys = text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(keys.iter().copied().collect::<Vec<_>>(), [a, b], "{text:?}");
            assert_eq!(keys.to_string(), format!("{HEX},{b_hex}"), "written as hex, comma-separated");
        }
        let one: PublicKeys = PEM.parse().expect("one PEM key");
        assert_eq!((one.len(), one.to_string()), (1, HEX.to_owned()));
        assert_eq!(PublicKeys::from(a), one);
        let pem_b = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEABwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n-----END PUBLIC KEY-----";
        let two_pems: PublicKeys = format!("{PEM}{pem_b}").parse().expect("two PEM blocks");
        assert_eq!(two_pems.iter().copied().collect::<Vec<_>>(), [a, b]);
    }

    #[test]
    fn a_malformed_list_says_which_key_is_wrong() {
        assert_eq!("".parse::<PublicKeys>(), Err(KeyError::Empty));
        assert_eq!(" ,\n, ".parse::<PublicKeys>(), Err(KeyError::Empty));
        assert_eq!("abcd".parse::<PublicKeys>(), Err(KeyError::Length(2)), "one key: its own error");
        let message = format!("{HEX},abcd").parse::<PublicKeys>().map_err(|e| e.to_string());
        assert_eq!(message, Err("key 2 of 2: 2 bytes; an Ed25519 public key has 32 (64 hex digits)".to_owned()));
        let cut = PEM.replace("-----END PUBLIC KEY-----\n", "");
        assert_eq!(format!("{HEX}\n{cut}").parse::<PublicKeys>(), Err(KeyError::NotPem), "an unterminated PEM block");
        assert!(matches!(format!("{RSA_PEM},{HEX}").parse::<PublicKeys>(), Err(KeyError::InList { position: 1, .. })));
    }

    proptest! {
        #[test]
        fn every_list_round_trips_through_its_text(keys in proptest::collection::vec(any::<[u8; 32]>(), 1..5)) {
            let keys: Vec<PublicKey> = keys.into_iter().map(PublicKey::from_bytes).collect();
            let text = keys.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            let parsed: PublicKeys = text.parse().expect("a list");
            prop_assert_eq!(parsed.to_string().parse::<PublicKeys>(), Ok(parsed.clone()));
            prop_assert_eq!(parsed.len(), keys.iter().collect::<std::collections::HashSet<_>>().len());
        }

        #[test]
        fn no_text_panics_the_list_parser(text in ".{0,300}") {
            let _ = text.parse::<PublicKeys>();
        }

        #[test]
        fn every_key_round_trips_through_its_text(bytes in any::<[u8; 32]>()) {
            let key = PublicKey::from_bytes(bytes);
            prop_assert_eq!(key.to_string().parse::<PublicKey>(), Ok(key));
            prop_assert_eq!(key.as_bytes(), &bytes);
        }

        #[test]
        fn no_text_panics_the_parser(text in ".{0,200}") {
            let _ = text.parse::<PublicKey>();
        }
    }
}
