//! The gateway public keys a runtime (or a tool server) trusts: a *set*, so the gateway's
//! key can be rotated without refusing sessions. During a rotation the runtimes trust the
//! old and the new key; a grant or an identity assertion signed with either verifies, one
//! signed with any other key does not. Outside a rotation the set holds one key.
//!
//! Read from one or more keys (64 hex digits or Ed25519 PEM public keys) separated by
//! commas or newlines — the list format of `switchboard_crds::gateway_key::key_texts`,
//! which the operator writes into runtime pods' `SWITCHBOARD_GATEWAY_PUBLIC_KEY`.

use switchboard_crds::gateway_key::key_texts;

use crate::grant::{GatewayPublicKey, GrantError, SessionContext, SignedContext};

/// One or more gateway public keys, in the order given, without repeats. Written as their
/// hex, comma-separated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayKeys(Vec<GatewayPublicKey>);

impl GatewayKeys {
    /// The keys, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &GatewayPublicKey> {
        self.0.iter()
    }

    /// Checks `signed` for the runtime serving `namespace/agent` at `now_ms` as
    /// [`GatewayPublicKey::verify`] does, accepting a signature by any of the keys.
    pub fn verify(
        &self,
        signed: &SignedContext,
        namespace: &str,
        agent: &str,
        now_ms: u64,
    ) -> Result<SessionContext, GrantError> {
        for key in &self.0 {
            match key.verify(signed, namespace, agent, now_ms) {
                Err(GrantError::BadSignature) => continue,
                // Signed by this key: what else is wrong (agent, age) is the same for all.
                other => return other,
            }
        }
        Err(GrantError::BadSignature)
    }

    /// Whether `signature` is a seal of `message` by any of the keys.
    pub fn opens(&self, message: &[u8], signature: &[u8]) -> bool {
        self.0.iter().any(|key| key.opens(message, signature))
    }
}

impl From<GatewayPublicKey> for GatewayKeys {
    fn from(key: GatewayPublicKey) -> Self {
        Self(vec![key])
    }
}

/// The keys to check a signature with: one key, or a set ([`crate::assertion::verify_identity`]
/// takes either).
impl AsRef<[GatewayPublicKey]> for GatewayKeys {
    fn as_ref(&self) -> &[GatewayPublicKey] {
        &self.0
    }
}

impl AsRef<[GatewayPublicKey]> for GatewayPublicKey {
    fn as_ref(&self) -> &[GatewayPublicKey] {
        std::slice::from_ref(self)
    }
}

impl std::fmt::Display for GatewayKeys {
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

impl std::str::FromStr for GatewayKeys {
    type Err = GrantError;

    /// One or more keys separated by commas or newlines; each is checked to be a point of
    /// the curve. A malformed key in a list of several is named by its place.
    fn from_str(text: &str) -> Result<Self, GrantError> {
        let texts = key_texts(text).map_err(|e| GrantError::BadKey(e.to_string()))?;
        let count = texts.len();
        let mut keys: Vec<GatewayPublicKey> = Vec::with_capacity(count);
        for (i, text) in texts.into_iter().enumerate() {
            let key = text.parse::<GatewayPublicKey>().map_err(|e| match (count, e) {
                (1, e) => e,
                (_, GrantError::BadKey(why)) => GrantError::BadKey(format!("key {} of {count}: {why}", i + 1)),
                (_, e) => e,
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
    use super::*;
    use crate::grant::{GatewaySigner, MAX_AGE_MS};

    fn signer(byte: u8) -> GatewaySigner {
        GatewaySigner::from_seed(&[byte; 32])
    }

    fn context() -> SessionContext {
        SessionContext {
            session_id: "s-1".into(),
            namespace: "bank".into(),
            agent: "banking".into(),
            issued_at_ms: 1_000_000,
            nonce: "n-1".into(),
            ..Default::default()
        }
    }

    /// The old and the new key of a rotation.
    fn old_and_new() -> GatewayKeys {
        format!("{},{}", signer(1).public(), signer(2).public()).parse().expect("two keys")
    }

    #[test]
    fn a_grant_signed_by_either_trusted_key_verifies_and_by_another_it_does_not() {
        let keys = old_and_new();
        for trusted in [signer(1), signer(2)] {
            let signed = trusted.sign(&context());
            assert_eq!(keys.verify(&signed, "bank", "banking", 1_000_000), Ok(context()));
        }
        let foreign = signer(3).sign(&context());
        assert_eq!(keys.verify(&foreign, "bank", "banking", 1_000_000), Err(GrantError::BadSignature));
        // What a grant is for is checked whichever key signed it.
        let old = signer(1).sign(&context());
        assert!(matches!(keys.verify(&old, "evil", "banking", 1_000_000), Err(GrantError::WrongAgent { .. })));
        assert!(matches!(
            keys.verify(&old, "bank", "banking", 1_000_000 + MAX_AGE_MS + 1),
            Err(GrantError::Stale { .. })
        ));
        let changed = SignedContext { payload: old.payload.replace("s-1", "s-2"), signature: old.signature };
        assert_eq!(keys.verify(&changed, "bank", "banking", 1_000_000), Err(GrantError::BadSignature));
    }

    #[test]
    fn a_seal_opens_with_either_trusted_key() {
        let keys = old_and_new();
        assert!(keys.opens(b"m", &signer(1).seal(b"m")));
        assert!(keys.opens(b"m", &signer(2).seal(b"m")));
        assert!(!keys.opens(b"m", &signer(3).seal(b"m")));
        assert!(!keys.opens(b"n", &signer(2).seal(b"m")));
    }

    #[test]
    fn keys_are_read_from_hex_and_pem_separated_by_commas_or_newlines() {
        let (a, b) = (signer(1).public(), signer(2).public());
        let pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAlN+i9Mai50149Xk6kb562RmWWoz/qZzZXqf3eUN2WVA=\n-----END PUBLIC KEY-----\n";
        let c: GatewayPublicKey = pem.parse().expect("PEM");
        let read = |text: String| text.parse::<GatewayKeys>().map(|k| k.iter().cloned().collect::<Vec<_>>());
        assert_eq!(read(format!("{a},{b}")), Ok(vec![a.clone(), b.clone()]));
        assert_eq!(read(format!("{a}\n{b}\n{a}\n")), Ok(vec![a.clone(), b.clone()]), "a repeat counts once");
        assert_eq!(read(format!("{pem}{a}")), Ok(vec![c.clone(), a.clone()]));
        assert_eq!(read(format!("{a},\n{pem}")), Ok(vec![a.clone(), c.clone()]));
        assert_eq!(GatewayKeys::from(a.clone()).to_string(), a.to_string());
        assert_eq!(old_and_new().to_string(), format!("{a},{b}"));
        assert_eq!(old_and_new().to_string().parse::<GatewayKeys>(), Ok(old_and_new()));
    }

    #[test]
    fn a_bad_key_says_which_and_why() {
        let a = signer(1).public();
        assert!(matches!("abcd".parse::<GatewayKeys>(), Err(GrantError::BadKey(m)) if m.starts_with("2 bytes")));
        assert!(
            matches!(format!("{a},abcd").parse::<GatewayKeys>(), Err(GrantError::BadKey(m)) if m.starts_with("key 2 of 2: 2 bytes")),
        );
        assert!(matches!(" , ".parse::<GatewayKeys>(), Err(GrantError::BadKey(m)) if m.contains("no key given")));
    }
}
