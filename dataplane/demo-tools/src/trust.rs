//! Whom the demo tool server's account endpoints act for, and the checks of
//! `dataplane/runtime/src/tools/IDENTITY.md` ("Verifying it") on the gateway's identity assertion:
//! the signature with one of the gateway's keys, the claims, and that the assertion is meant
//! for this server — an Agent of a namespace it serves (and one of the Agents it serves, when
//! it names them). Any tenant's Agent can get the gateway to vouch for whoever its own
//! identity check says; only the namespaces whose Agents the bank trusts may speak for its
//! customers.

use axum::http::{HeaderMap, StatusCode};
use switchboard_core::assertion::{self, IdentityClaims};
use switchboard_core::gateway_keys::GatewayKeys;

use crate::error::DemoToolsError;

/// Whom the account endpoints (`/balance`, `/transactions`, `/disputes`) act for.
#[derive(Clone, Debug)]
pub enum Callers {
    /// Only the caller the gateway's identity assertion names, for an Agent it trusts.
    Verified(Trusted),
    /// Whoever the request's account number names, with no check at all: a demo on this
    /// machine only (`switchboard demo-tools --insecure-no-identity`).
    Anyone,
}

/// The identity assertions a server accepts: signed by one of `keys` (the gateway's; the old
/// and the new during a rotation), for an Agent of one of `namespaces`, and one of `agents`
/// when that is not empty.
#[derive(Clone, Debug)]
pub struct Trusted {
    keys: GatewayKeys,
    namespaces: Vec<String>,
    agents: Vec<String>,
}

/// Why a request's assertion is refused: the HTTP status (401 without a valid one, 403 for
/// one not meant for this server) and what to tell the caller.
pub(super) type Refused = (StatusCode, String);

impl Trusted {
    /// Trusts assertions signed by `keys` for the Agents of `namespaces`; at least one (the
    /// gateway signs for every tenant's Agents, so trusting them all is trusting every tenant).
    pub fn new<S: Into<String>>(
        keys: GatewayKeys,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Result<Self, DemoToolsError> {
        let namespaces: Vec<String> =
            namespaces.into_iter().map(Into::into).filter(|n: &String| !n.trim().is_empty()).collect();
        if namespaces.is_empty() {
            return Err(DemoToolsError::NoTrustedNamespace);
        }
        Ok(Self { keys, namespaces, agents: Vec::new() })
    }

    /// Also requires the assertion's Agent to be one of `agents` (by name; none: any Agent of
    /// the trusted namespaces).
    pub fn with_agents<S: Into<String>>(mut self, agents: impl IntoIterator<Item = S>) -> Self {
        self.agents = agents.into_iter().map(Into::into).filter(|a: &String| !a.trim().is_empty()).collect();
        self
    }

    /// The namespaces trusted.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// The Agents trusted (none: any of the namespaces').
    pub fn agents(&self) -> &[String] {
        &self.agents
    }

    /// The claims of the request's assertion, if it verifies at `now` (seconds since the
    /// epoch) and is meant for this server.
    pub(super) fn caller(&self, headers: &HeaderMap, now: u64) -> Result<IdentityClaims, Refused> {
        let Some(token) = headers.get(assertion::HEADER).and_then(|v| v.to_str().ok()) else {
            let message =
                format!("no {} header: this server acts only for a caller the gateway verified", assertion::HEADER);
            return Err((StatusCode::UNAUTHORIZED, message));
        };
        let claims = assertion::verify_identity(&self.keys, token, now)
            .map_err(|e| (StatusCode::UNAUTHORIZED, format!("the identity assertion is refused: {e}")))?;
        if !self.namespaces.contains(&claims.namespace) {
            tracing::warn!(namespace = %claims.namespace, agent = %claims.agent, session = %claims.sid, "refused an identity assertion from an untrusted namespace");
            let message = format!(
                "the identity assertion is for an Agent of namespace {:?}, whose Agents this server does not serve \
                 (it trusts {}); only those namespaces' identity checks vouch for its customers",
                claims.namespace,
                self.namespaces.join(", ")
            );
            return Err((StatusCode::FORBIDDEN, message));
        }
        if !self.agents.is_empty() && !self.agents.contains(&claims.agent) {
            tracing::warn!(namespace = %claims.namespace, agent = %claims.agent, session = %claims.sid, "refused an identity assertion from an untrusted Agent");
            let message = format!(
                "the identity assertion is for the Agent {}/{}, which this server does not serve (it trusts {})",
                claims.namespace,
                claims.agent,
                self.agents.join(", ")
            );
            return Err((StatusCode::FORBIDDEN, message));
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::grant::GatewaySigner;

    fn headers(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(assertion::HEADER, token.parse().expect("header"));
        headers
    }

    fn token(key: &GatewaySigner, namespace: &str, agent: &str, now: u64) -> String {
        let claims = IdentityClaims::new(serde_json::json!({"accountNumber": "1"}), namespace, agent, "gw-1", now);
        assertion::sign_identity(key, &claims).expect("signed")
    }

    #[test]
    fn only_the_trusted_namespaces_and_agents_speak_for_a_caller() {
        let key = GatewaySigner::from_seed(&[7; 32]);
        let now = 1_700_000_000;
        let trusted = Trusted::new(key.public().into(), ["bank"]).expect("trusted");
        assert!(trusted.caller(&headers(&token(&key, "bank", "banking", now)), now).is_ok());
        let (status, message) = trusted.caller(&headers(&token(&key, "evil", "banking", now)), now).expect_err("evil");
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(message.contains("\"evil\"") && message.contains("trusts bank"), "{message}");
        let (status, _) = trusted.caller(&HeaderMap::new(), now).expect_err("no assertion");
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let agents = trusted.with_agents(["banking"]);
        assert!(agents.caller(&headers(&token(&key, "bank", "banking", now)), now).is_ok());
        let (status, message) = agents.caller(&headers(&token(&key, "bank", "triage", now)), now).expect_err("agent");
        assert_eq!(status, StatusCode::FORBIDDEN, "{message}");
    }

    #[test]
    fn trusting_no_namespace_is_refused() {
        let key = GatewaySigner::from_seed(&[7; 32]).public();
        assert!(matches!(Trusted::new(key.into(), [" "]), Err(DemoToolsError::NoTrustedNamespace)));
    }
}
