//! Tool policy: which of an Agent's tools may run where. A Workflow node's `tools` is an
//! allowlist and its `denyTools` a denylist; the Agent's `toolPolicy.deny` refuses tools
//! everywhere. Each entry is a tool name or a glob pattern (`crm_*`, `get_?`), so a family
//! of tools is allowed or refused with one line. A deny always beats an allow.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest tool name pattern.
pub const MAX_PATTERN_LEN: usize = 64;

/// The Agent-wide tool policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolPolicy {
    /// Tools refused everywhere, by name or glob pattern (`*` any run of characters, `?`
    /// one character), e.g. `crm_delete_*`. Refused tools are never offered to the model,
    /// whatever a Workflow node allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z0-9_*?-]+$")))]
    pub deny: Vec<String>,
}

impl ToolPolicy {
    /// True when nothing is denied (the default, left out of serialised specs).
    pub fn is_empty(&self) -> bool {
        self.deny.is_empty()
    }

    /// Whether the policy refuses tool `name`.
    pub fn denies(&self, name: &str) -> bool {
        matches_any(&self.deny, name)
    }
}

/// Whether `pattern` has glob characters (`*`, `?`) rather than being one tool's name.
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Whether `entry` is a usable tool name or pattern: 1 to 64 of letters, digits, `_`, `-`,
/// `*` and `?`.
pub fn is_valid_pattern(entry: &str) -> bool {
    !entry.is_empty()
        && entry.len() <= MAX_PATTERN_LEN
        && entry.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'*' | b'?'))
}

/// Whether `name` matches `pattern`: `*` matches any run of characters (also none), `?`
/// exactly one; everything else matches itself. A pattern without glob characters matches
/// only the name it spells.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was and which name position it has absorbed up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// Whether `name` matches any of `patterns`.
pub fn matches_any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (pattern, name, want) in [
            ("crm_*", "crm_lookup", true),
            ("crm_*", "crm_", true),
            ("crm_*", "crmlookup", false),
            ("crm_*", "x_crm_lookup", false),
            ("*_delete", "crm_delete", true),
            ("*_delete", "crm_delete_all", false),
            ("*", "anything", true),
            ("get_?", "get_a", true),
            ("get_?", "get_ab", false),
            ("a*b*c", "a_x_b_y_c", true),
            ("a*b*c", "a_x_c_y_b", false),
            ("check_balance", "check_balance", true),
            ("check_balance", "check_balances", false),
            ("**x", "yx", true),
        ] {
            assert_eq!(glob_match(pattern, name), want, "{pattern} vs {name}");
        }
    }

    #[test]
    fn policy_denies_by_pattern() {
        let policy = ToolPolicy { deny: vec!["crm_delete_*".into(), "wire".into()] };
        assert!(policy.denies("crm_delete_contact"));
        assert!(policy.denies("wire"));
        assert!(!policy.denies("crm_lookup"));
        assert!(!policy.denies("wire_transfer"));
        assert!(ToolPolicy::default().is_empty() && !ToolPolicy::default().denies("x"));
    }

    #[test]
    fn pattern_syntax() {
        assert!(is_valid_pattern("crm_*") && is_valid_pattern("get-?") && !is_valid_pattern("crm.*"));
        assert!(!is_valid_pattern("") && !is_valid_pattern(&"a".repeat(65)));
        assert!(is_pattern("crm_*") && !is_pattern("crm"));
    }
}
