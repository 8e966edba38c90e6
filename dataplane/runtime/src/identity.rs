//! The verified caller's identity assertion a session forwards to its tool servers
//! ([`switchboard_core::assertion`]; header `X-Switchboard-Identity`). The gateway signs it:
//! in the grant a session opens with, and in an `identity_assertion` frame when the caller is
//! verified during the session (and again before it expires). A session holds the current
//! one, checked like a grant — its signature with the runtime's gateway public key, its
//! session, Agent and namespace, its expiry, and that it names the caller the session's
//! memory holds — and every HTTP and MCP tool call carries it.
//!
//! When the memory's caller changes, the held assertion is dropped (it names the old one);
//! with a gateway key, a new one is on its way from the gateway, and a tool call that starts
//! before it arrives waits for it ([`PATIENCE`] at most) rather than go out without it. When
//! the caller is cleared, calls carry none. A runtime without a gateway key (run on its own,
//! for development) has no gateway to vouch for anyone: its calls carry none. So does an
//! Agent whose `identityKeys` leave out `verifiedUser` (any of its tools may write that key).

use std::time::Duration;

use switchboard_core::assertion::{self, AssertionError, IDENTITY_KEY};
use switchboard_core::gateway_keys::GatewayKeys;
use tokio::sync::watch;

use super::grants::now_ms;

/// The longest a tool call waits for the assertion of a caller verified just before it.
pub const PATIENCE: Duration = Duration::from_secs(3);

/// What a session has for its tool calls.
#[derive(Clone, Debug, Default, PartialEq)]
enum Held {
    /// No verified caller (or nobody to vouch for one): calls carry no assertion.
    #[default]
    None,
    /// A caller was verified; the gateway's assertion for them is on its way.
    Awaited,
    /// The current assertion and its expiry (seconds since the Unix epoch).
    Asserted { token: String, exp: u64 },
}

/// Why an `identity_assertion` was refused.
#[derive(Debug, thiserror::Error)]
pub enum IdentityRefused {
    /// The runtime has no gateway key to check it with.
    #[error(
        "this runtime has no gateway public key (--gateway-public-key), so it accepts no identity assertion; only the Switchboard gateway sends one"
    )]
    NoKey,
    /// It does not verify, or is for another session.
    #[error(transparent)]
    Invalid(#[from] AssertionError),
    /// It names another caller than the session's memory holds (an older one, or none).
    #[error("the identity assertion names another caller than this session's verifiedUser; it was ignored")]
    OtherCaller,
    /// The Agent does not treat `verifiedUser` as an identity.
    #[error("this agent's identityKeys leave out verifiedUser, so its tool calls carry no identity assertion")]
    NotAnIdentity,
}

impl IdentityRefused {
    /// A refusal that is no one's mistake, logged but not told: a gateway's assertion that a
    /// newer caller overtook, or an Agent that asserts no identity.
    pub fn is_quiet(&self) -> bool {
        matches!(self, Self::OtherCaller | Self::NotAnIdentity)
    }
}

/// One session's identity assertion: the session loop's side.
#[derive(Debug)]
pub struct SessionIdentity {
    key: Option<GatewayKeys>,
    /// `verifiedUser` is one of the Agent's identity keys (only its identity providers write it).
    asserts: bool,
    namespace: String,
    agent: String,
    session_id: String,
    /// The caller the session's memory holds now.
    caller: Option<serde_json::Value>,
    held: watch::Sender<Held>,
}

/// Where the session's identity is bound: its Agent and the gateway's session id.
#[derive(Debug)]
pub struct Binding<'a> {
    /// The Agent's namespace.
    pub namespace: &'a str,
    /// The Agent.
    pub agent: &'a str,
    /// Whether the Agent's `identityKeys` include `verifiedUser`.
    pub asserts: bool,
    /// The session's id (the gateway's).
    pub session_id: &'a str,
}

impl SessionIdentity {
    /// The identity of a session bound as `binding`, checked with the gateway's `key`,
    /// opened with `caller` in its memory and the grant's assertion `granted`. A granted
    /// assertion that does not check out is not used (the error says why).
    pub fn new(
        key: Option<GatewayKeys>,
        binding: Binding<'_>,
        caller: Option<&serde_json::Value>,
        granted: Option<&str>,
    ) -> (Self, Option<IdentityRefused>) {
        let mut identity = Self {
            key,
            asserts: binding.asserts,
            namespace: binding.namespace.to_owned(),
            agent: binding.agent.to_owned(),
            session_id: binding.session_id.to_owned(),
            caller: caller.filter(|c| !c.is_null()).cloned(),
            held: watch::channel(Held::None).0,
        };
        let refused = granted.filter(|_| identity.asserts).and_then(|token| identity.accept(token).err());
        (identity, refused)
    }

    /// What a tool call starting now reads.
    pub fn watch(&self) -> IdentityWatch {
        IdentityWatch(self.held.subscribe())
    }

    /// The session's memory set `key` to `value` (`null`: removed).
    pub fn memory_changed(&mut self, key: &str, value: &serde_json::Value) {
        if key != IDENTITY_KEY {
            return;
        }
        self.caller = (!value.is_null()).then(|| value.clone());
        let next = if self.caller.is_some() && self.key.is_some() && self.asserts { Held::Awaited } else { Held::None };
        self.held.send_replace(next);
    }

    /// An assertion from the gateway (an `identity_assertion` frame, or a grant's).
    pub fn accept(&mut self, token: &str) -> Result<(), IdentityRefused> {
        let key = self.key.as_ref().ok_or(IdentityRefused::NoKey)?;
        let claims = assertion::verify_identity(key, token, now_ms() / 1000)?;
        claims.check_session(&self.namespace, &self.agent, &self.session_id)?;
        if self.caller.as_ref() != Some(&claims.verified_user) {
            return Err(IdentityRefused::OtherCaller);
        }
        if !self.asserts {
            return Err(IdentityRefused::NotAnIdentity);
        }
        self.held.send_replace(Held::Asserted { token: token.to_owned(), exp: claims.exp });
        Ok(())
    }
}

/// A tool call's view of its session's identity assertion.
#[derive(Clone, Debug)]
pub struct IdentityWatch(watch::Receiver<Held>);

impl IdentityWatch {
    /// A session that never has an assertion (tests, tools run outside a session).
    pub fn none() -> Self {
        Self(watch::channel(Held::None).1)
    }

    /// The assertion a call starting now carries: the current one while it is valid; one
    /// on its way is waited for, up to `patience`.
    pub async fn assertion(mut self, patience: Duration) -> Option<String> {
        let settled = tokio::time::timeout(patience, self.0.wait_for(|held| *held != Held::Awaited)).await;
        let held = match settled {
            Ok(Ok(held)) => held.clone(),
            // The session ended while the call started: nothing to wait for.
            Ok(Err(_)) => return None,
            Err(_) => {
                tracing::warn!(
                    "the gateway's identity assertion for a newly verified caller did not come within {} ms; the tool call goes without it",
                    patience.as_millis()
                );
                return None;
            }
        };
        match held {
            Held::Asserted { token, exp } if exp > now_ms() / 1000 => Some(token),
            Held::Asserted { .. } => {
                tracing::warn!(
                    "the session's identity assertion expired (no fresh one from the gateway); the tool call goes without it"
                );
                None
            }
            Held::None | Held::Awaited => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use switchboard_core::assertion::{IdentityClaims, sign_identity};
    use switchboard_core::grant::GatewaySigner;

    use super::*;

    fn signer() -> GatewaySigner {
        GatewaySigner::from_seed(&[5; 32])
    }

    fn ada() -> serde_json::Value {
        json!({"name": "Ada Lovelace", "accountNumber": "12345678"})
    }

    fn token(caller: serde_json::Value, session: &str, key: &GatewaySigner) -> String {
        let claims = IdentityClaims::new(caller, "bank", "banking", session, now_ms() / 1000);
        sign_identity(key, &claims).expect("signed")
    }

    fn binding(asserts: bool) -> Binding<'static> {
        Binding { namespace: "bank", agent: "banking", asserts, session_id: "gw-1" }
    }

    fn session(caller: Option<serde_json::Value>, granted: Option<&str>) -> SessionIdentity {
        let (identity, refused) =
            SessionIdentity::new(Some(signer().public().into()), binding(true), caller.as_ref(), granted);
        assert!(refused.is_none(), "{refused:?}");
        identity
    }

    const AT_ONCE: Duration = Duration::ZERO;

    #[tokio::test]
    async fn a_granted_assertion_is_carried_until_the_caller_changes() {
        let granted = token(ada(), "gw-1", &signer());
        let mut identity = session(Some(ada()), Some(&granted));
        assert_eq!(identity.watch().assertion(AT_ONCE).await, Some(granted.clone()));
        identity.memory_changed("intent", &json!("balance"));
        assert_eq!(identity.watch().assertion(AT_ONCE).await, Some(granted), "another key changes nothing");
        identity.memory_changed("verifiedUser", &json!(null));
        assert_eq!(identity.watch().assertion(AT_ONCE).await, None, "a cleared caller has none");
    }

    #[tokio::test]
    async fn a_call_waits_for_the_assertion_of_a_caller_verified_just_before_it() {
        let mut identity = session(None, None);
        assert_eq!(identity.watch().assertion(AT_ONCE).await, None);
        identity.memory_changed("verifiedUser", &ada());
        let waiting = tokio::spawn(identity.watch().assertion(Duration::from_secs(10)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let fresh = token(ada(), "gw-1", &signer());
        identity.accept(&fresh).expect("accepted");
        assert_eq!(waiting.await.expect("joins"), Some(fresh));
        identity.memory_changed("verifiedUser", &json!({"accountNumber": "87654321"}));
        assert_eq!(identity.watch().assertion(Duration::from_millis(20)).await, None, "not come in time");
    }

    #[tokio::test]
    async fn assertions_for_another_session_caller_or_key_are_refused() {
        let mut identity = session(Some(ada()), None);
        let refused = |result: Result<(), IdentityRefused>| result.expect_err("refused").to_string();
        assert!(refused(identity.accept(&token(ada(), "gw-2", &signer()))).contains("not bank/banking/gw-1"));
        let other_key = GatewaySigner::from_seed(&[6; 32]);
        assert!(refused(identity.accept(&token(ada(), "gw-1", &other_key))).contains("signature"));
        let alan = json!({"accountNumber": "87654321"});
        assert!(refused(identity.accept(&token(alan, "gw-1", &signer()))).contains("another caller"));
        assert!(refused(identity.accept("not.a.jws")).contains("malformed"));
        assert_eq!(identity.watch().assertion(AT_ONCE).await, None, "none of them is carried");

        let (mut keyless, _) = SessionIdentity::new(None, binding(true), Some(&ada()), None);
        assert!(matches!(keyless.accept(&token(ada(), "gw-1", &signer())), Err(IdentityRefused::NoKey)));
        keyless.memory_changed("verifiedUser", &ada());
        assert_eq!(keyless.watch().assertion(Duration::from_secs(10)).await, None, "nothing to wait for");

        let granted = token(ada(), "gw-1", &signer());
        let (mut plain, refused) =
            SessionIdentity::new(Some(signer().public().into()), binding(false), Some(&ada()), Some(&granted));
        assert!(refused.is_none(), "not used, and no mistake: {refused:?}");
        assert!(matches!(plain.accept(&granted), Err(IdentityRefused::NotAnIdentity)));
        plain.memory_changed("verifiedUser", &ada());
        assert_eq!(plain.watch().assertion(Duration::from_secs(10)).await, None, "not an identity here");
    }
}
