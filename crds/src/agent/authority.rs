//! Authority at the tool: the syntax shared by validation and the agent core for a tool's
//! `bind` (an input filled from session memory rather than by the model), its `requires`
//! (memory keys that must be set) and an Agent's `identityKeys` (memory keys only identity
//! providers may write). A binding's source is a memory key, then optionally a dotted path
//! into the key's JSON value: `verifiedUser.accountNumber`.

/// The identity key of every Agent that lists none of its own: the verified caller.
pub const VERIFIED_USER: &str = "verifiedUser";

/// Longest memory key.
pub const MAX_KEY_LEN: usize = 63;

/// Why a binding's source cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryPathError {
    /// The memory key part is not a memory key.
    #[error(
        "{key:?} is not a memory key (a letter, then letters, digits or '_', at most {MAX_KEY_LEN}); write the key, then optionally a dotted path into its value, e.g. \"verifiedUser.accountNumber\""
    )]
    Key {
        /// The key as written.
        key: String,
    },
    /// A path segment is empty or has characters other than letters, digits, `_` and `-`.
    #[error(
        "{segment:?} is not a path segment (letters, digits, '_' or '-'; segments are separated by single dots), e.g. \"verifiedUser.accountNumber\""
    )]
    Segment {
        /// The segment as written.
        segment: String,
    },
}

/// Where a bound input comes from: a memory key and a path into its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPath<'a> {
    /// The memory key, e.g. `verifiedUser`.
    pub key: &'a str,
    /// Object fields (or array indexes) inside the key's value, outermost first.
    pub path: Vec<&'a str>,
}

impl<'a> MemoryPath<'a> {
    /// Reads `key` or `key.field.field...`.
    pub fn parse(text: &'a str) -> Result<Self, MemoryPathError> {
        let mut parts = text.split('.');
        let key = parts.next().unwrap_or_default();
        if !is_memory_key(key) {
            return Err(MemoryPathError::Key { key: key.to_owned() });
        }
        let path: Vec<&str> = parts.collect();
        if let Some(bad) = path.iter().find(|s| !is_segment(s)) {
            return Err(MemoryPathError::Segment { segment: (*bad).to_owned() });
        }
        Ok(Self { key, path })
    }

    /// The part of `value` (the memory key's value) the path names; `None` when it is
    /// missing or `null`.
    pub fn lookup<'v>(&self, value: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        let found = self.path.iter().try_fold(value, |v, segment| match v {
            serde_json::Value::Object(map) => map.get(*segment),
            serde_json::Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })?;
        (!found.is_null()).then_some(found)
    }
}

impl std::fmt::Display for MemoryPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)?;
        self.path.iter().try_for_each(|s| write!(f, ".{s}"))
    }
}

/// Whether `key` is a memory key: a letter, then letters, digits or `_`, at most 63 (as
/// `remember.key`).
pub fn is_memory_key(key: &str) -> bool {
    key.len() <= MAX_KEY_LEN
        && key.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_segment(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Memory keys only the gateway sets, from what a SIP edge vouches for: an inbound call
/// (`phoneCall`: the caller's number from a trunk, the number dialled) and an answered
/// outbound call (`outboundCall`). No tool may `remember` into them.
pub const GATEWAY_KEYS: [&str; 2] = ["phoneCall", "outboundCall"];

/// The identity keys of an Agent that names none: `[verifiedUser]`.
pub fn default_identity_keys() -> Vec<String> {
    vec![VERIFIED_USER.to_owned()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_and_a_dotted_path_are_read_and_looked_up() {
        let path = MemoryPath::parse("verifiedUser.accountNumber").expect("valid");
        assert_eq!((path.key, path.path.as_slice()), ("verifiedUser", ["accountNumber"].as_slice()));
        assert_eq!(path.to_string(), "verifiedUser.accountNumber");
        let user = json!({ "accountNumber": "12345678", "cards": [{ "last4": "1234" }], "none": null });
        assert_eq!(path.lookup(&user), Some(&json!("12345678")));
        assert_eq!(MemoryPath::parse("u.cards.0.last4").expect("valid").lookup(&user), Some(&json!("1234")));
        assert_eq!(MemoryPath::parse("u.none").expect("valid").lookup(&user), None, "null is missing");
        assert_eq!(MemoryPath::parse("u.other").expect("valid").lookup(&user), None);
        assert_eq!(MemoryPath::parse("verifiedUser").expect("valid").lookup(&user), Some(&user));
    }

    #[test]
    fn malformed_paths_are_refused_with_the_part_named() {
        for (text, bad) in
            [("", ""), ("1user", "1user"), ("user-x.a", "user-x"), ("a..b", ""), ("a.b.", ""), ("a.b c", "b c")]
        {
            let error = MemoryPath::parse(text).expect_err(text).to_string();
            assert!(error.contains(&format!("{bad:?}")), "{text:?}: {error}");
        }
        assert!(MemoryPath::parse(&"k".repeat(64)).is_err());
    }
}
