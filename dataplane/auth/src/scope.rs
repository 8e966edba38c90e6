//! Which Agents a credential may reach: an API key's `agents=` field or a JWT's agents
//! claim, as a list of `<namespace>/<agent>` patterns where either part may be `*`
//! (`bank/*`: every Agent of `bank`; `*`: anything). A credential with no list reaches
//! every exposed Agent, as before scopes existed.
//!
//! A scope decides two things: the Agent a **new** session may start at (the one the
//! client asks for, or the gateway's default), and the namespace a **resumed** session may
//! be in (a resumed session may sit at an Agent it was handed to, inside the namespace it
//! started in; handoffs never leave a namespace). Handoffs themselves are the Agents'
//! declared business and are not checked against the scope.

use std::fmt;

/// One `<namespace>/<agent>` pattern; `None` is `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    namespace: Option<String>,
    agent: Option<String>,
}

/// The Agents a credential may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// `None`: unrestricted.
    patterns: Option<Vec<Pattern>>,
}

/// A pattern that cannot be a scope.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{pattern:?} is not an agent pattern: expected `<namespace>/<agent>`, either part a DNS label (lower-case \
     letters, digits and `-`, at most 63) or `*`, or `*` alone"
)]
pub struct ScopeError {
    /// The pattern as given.
    pub pattern: String,
}

impl Scope {
    /// Every Agent.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// A scope of the given patterns. An empty list reaches nothing.
    pub fn parse<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, ScopeError> {
        let patterns: Result<Vec<_>, _> =
            patterns.into_iter().map(str::trim).filter(|p| !p.is_empty()).map(pattern).collect();
        Ok(Self { patterns: Some(patterns?) })
    }

    /// Whether the scope reaches every Agent.
    pub fn is_unrestricted(&self) -> bool {
        self.patterns.is_none()
    }

    /// Whether a new session may start at `namespace/agent`.
    pub fn allows_agent(&self, namespace: &str, agent: &str) -> bool {
        self.patterns.as_ref().is_none_or(|patterns| {
            patterns.iter().any(|p| part_matches(&p.namespace, namespace) && part_matches(&p.agent, agent))
        })
    }

    /// The namespaces the scope reaches, when it does not reach every one (no pattern's
    /// namespace is `*`): sorted, each once; empty when it reaches nothing.
    pub fn namespaces(&self) -> Option<Vec<String>> {
        let patterns = self.patterns.as_ref()?;
        let mut namespaces = patterns.iter().map(|p| p.namespace.clone()).collect::<Option<Vec<String>>>()?;
        namespaces.sort();
        namespaces.dedup();
        Some(namespaces)
    }

    /// Whether a session in `namespace` may be resumed.
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        self.patterns.as_ref().is_none_or(|patterns| patterns.iter().any(|p| part_matches(&p.namespace, namespace)))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(patterns) = &self.patterns else { return f.write_str("*") };
        if patterns.is_empty() {
            return f.write_str("(no agents)");
        }
        for (index, p) in patterns.iter().enumerate() {
            let part = |part: &Option<String>| part.clone().unwrap_or_else(|| "*".into());
            write!(f, "{}{}/{}", if index > 0 { ", " } else { "" }, part(&p.namespace), part(&p.agent))?;
        }
        Ok(())
    }
}

fn part_matches(part: &Option<String>, value: &str) -> bool {
    part.as_deref().is_none_or(|p| p == value)
}

fn pattern(text: &str) -> Result<Pattern, ScopeError> {
    let error = || ScopeError { pattern: text.to_owned() };
    if text == "*" {
        return Ok(Pattern { namespace: None, agent: None });
    }
    let (namespace, agent) = text.split_once('/').ok_or_else(error)?;
    let part = |part: &str| match part {
        "*" => Ok(None),
        label if is_dns_label(label) => Ok(Some(label.to_owned())),
        _ => Err(error()),
    };
    Ok(Pattern { namespace: part(namespace)?, agent: part(agent)? })
}

/// An RFC 1123 label, as Kubernetes names namespaces and (here) Agents.
fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_by_namespace_and_agent() {
        let scope = Scope::parse(["bank/triage", "shop/*"]).expect("valid");
        assert!(scope.allows_agent("bank", "triage"));
        assert!(!scope.allows_agent("bank", "banking"), "another agent of the namespace");
        assert!(scope.allows_agent("shop", "anything"));
        assert!(!scope.allows_agent("evil", "triage"));
        assert!(scope.allows_namespace("bank") && scope.allows_namespace("shop"));
        assert!(!scope.allows_namespace("evil"));
        assert_eq!(scope.to_string(), "bank/triage, shop/*");
        let anywhere = Scope::parse(["*/triage"]).expect("valid");
        assert!(anywhere.allows_agent("x", "triage") && !anywhere.allows_agent("x", "idv"));
        assert!(anywhere.allows_namespace("x"));
        let all = Scope::parse(["*"]).expect("valid");
        assert!(all.allows_agent("a", "b") && !all.is_unrestricted());
        assert!(Scope::unrestricted().allows_agent("a", "b") && Scope::unrestricted().is_unrestricted());
        let none = Scope::parse([]).expect("valid");
        assert!(!none.allows_agent("bank", "triage") && !none.allows_namespace("bank"));
        assert_eq!(none.to_string(), "(no agents)");
    }

    #[test]
    fn a_scope_names_its_namespaces_unless_it_reaches_any() {
        let scope = Scope::parse(["shop/*", "bank/triage", "bank/idv"]).expect("scope");
        assert_eq!(scope.namespaces(), Some(vec!["bank".to_owned(), "shop".to_owned()]));
        assert_eq!(Scope::parse(["bank/*", "*/triage"]).expect("scope").namespaces(), None);
        assert_eq!(Scope::parse(["*"]).expect("scope").namespaces(), None);
        assert_eq!(Scope::unrestricted().namespaces(), None);
        assert_eq!(Scope::parse([]).expect("scope").namespaces(), Some(Vec::new()));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in ["triage", "bank/", "/triage", "Bank/triage", "bank/tri age", "bank/-x", "a/b/c", "ba*/x"] {
            assert_eq!(Scope::parse([bad]), Err(ScopeError { pattern: bad.into() }), "{bad}");
        }
        let long = format!("{}/x", "a".repeat(64));
        assert!(Scope::parse([long.as_str()]).is_err(), "a label longer than 63");
    }
}
