//! Where a runtime checks the session context the gateway signed ([`switchboard_core::grant`]):
//! the gateway's public keys, if configured (more than one while the gateway's key is
//! rotated), and the nonces of grants already used, so a captured `session_start` cannot be
//! replayed while it is fresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use switchboard_core::gateway_keys::GatewayKeys;
use switchboard_core::grant::{GrantError, MAX_AGE_MS, SessionContext, SignedContext};
use switchboard_core::protocol::SessionStart;

/// Most nonces remembered; past it, grants are refused until old ones expire (a gateway
/// opens far fewer sessions per minute on one pod).
const MAX_REMEMBERED: usize = 100_000;

/// The runtime's side of signed session context.
#[derive(Debug, Default)]
pub struct Grants {
    key: Option<GatewayKeys>,
    /// This pod's address, when known: grants for another pod are refused.
    pod: Option<std::net::IpAddr>,
    /// Nonce -> the time (ms) after which it may be forgotten.
    used: Mutex<HashMap<String, u64>>,
}

/// Why a runtime refused the context of a `session_start`.
#[derive(Debug, thiserror::Error)]
pub enum RefusedContext {
    /// The runtime serves only through the gateway and the session carries no grant.
    #[error(
        "this runtime serves sessions only through the Switchboard gateway (a signed grant in session_start); connect to the gateway"
    )]
    Missing,
    /// The runtime has no key: it takes no context from anyone.
    #[error(
        "this runtime has no gateway public key (--gateway-public-key), so it accepts no session context; connect through the gateway"
    )]
    NoKey,
    /// The grant did not verify.
    #[error(transparent)]
    Invalid(#[from] GrantError),
    /// The grant was used before.
    #[error("this session context was already used; the gateway makes a new one for every session it opens")]
    Replayed,
    /// The grant is for another pod of the Agent.
    #[error("this session context was made for the pod at {0}, not this one; the gateway makes one for each pod")]
    OtherPod(String),
    /// Too many grants in the window.
    #[error("too many sessions with context in the last minute; try again shortly")]
    Busy,
}

impl Grants {
    /// Grants checked with the gateway's public keys (`None`: every context is refused), for
    /// the pod at `pod` when it is known.
    pub fn new(key: Option<GatewayKeys>, pod: Option<std::net::IpAddr>) -> Self {
        Self { key, pod, used: Mutex::new(HashMap::new()) }
    }

    /// The session context of `start`: none, or what the gateway signed for `agent` of
    /// `namespace` ([`Grants::admit`]; a context a client wrote itself is refused). `Err`
    /// holds the message for the client's `bidi_error` and the (short) close reason.
    pub fn accept_start(
        &self,
        start: &SessionStart,
        namespace: &str,
        agent: &str,
    ) -> Result<SessionContext, (String, &'static str)> {
        let unsigned = start.unsigned_context();
        if !unsigned.is_empty() {
            let message = format!(
                "session_start.{} is not accepted from clients: session context comes only from the Switchboard gateway, signed",
                unsigned.join(", session_start.")
            );
            return Err((message, "session context is accepted only from the gateway"));
        }
        self.admit(start.context.as_ref(), namespace, agent).map_err(|refused| {
            tracing::warn!(namespace, agent, error = %refused, "a session's context was refused");
            let reason = match refused {
                RefusedContext::Missing => "sessions only through the gateway",
                _ => "the session context was refused",
            };
            (refused.to_string(), reason)
        })
    }

    /// The session context of a `session_start` for `namespace/agent`: with a gateway key,
    /// only a valid grant opens a session (none is refused: without it a client that
    /// reaches the pod directly would be served as the gateway's); without a key (a runtime
    /// run on its own, for development), only sessions without context are served.
    pub fn admit(
        &self,
        signed: Option<&SignedContext>,
        namespace: &str,
        agent: &str,
    ) -> Result<SessionContext, RefusedContext> {
        match (signed, &self.key) {
            (Some(signed), _) => self.accept(signed, namespace, agent),
            (None, Some(_)) => Err(RefusedContext::Missing),
            (None, None) => Ok(SessionContext::default()),
        }
    }

    /// Verifies `signed` for `namespace/agent` now and uses up its nonce.
    pub fn accept(
        &self,
        signed: &SignedContext,
        namespace: &str,
        agent: &str,
    ) -> Result<SessionContext, RefusedContext> {
        let key = self.key.as_ref().ok_or(RefusedContext::NoKey)?;
        let now = now_ms();
        let context = key.verify(signed, namespace, agent, now)?;
        // A grant for another pod: refused before its nonce is used up here (a grant that
        // names no pod comes from a gateway older than the field).
        if let (Some(mine), Some(theirs)) = (self.pod, context.pod.as_deref())
            && theirs.parse::<std::net::IpAddr>().ok() != Some(mine)
        {
            return Err(RefusedContext::OtherPod(theirs.chars().take(64).collect()));
        }
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if used.len() >= MAX_REMEMBERED {
            used.retain(|_, forget_after| *forget_after > now);
            if used.len() >= MAX_REMEMBERED {
                return Err(RefusedContext::Busy);
            }
        }
        // A nonce is kept while a grant carrying it could still be fresh.
        let forget_after = context.issued_at_ms.saturating_add(MAX_AGE_MS);
        if used.insert(context.nonce.clone(), forget_after).is_some() {
            return Err(RefusedContext::Replayed);
        }
        Ok(context)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_is_accepted_once_and_none_without_a_key() {
        let signer = switchboard_core::grant::GatewaySigner::from_seed(&[3; 32]);
        let context = SessionContext {
            session_id: "s".into(),
            namespace: "bank".into(),
            agent: "banking".into(),
            issued_at_ms: now_ms(),
            nonce: "once".into(),
            ..Default::default()
        };
        let signed = signer.sign(&context);
        let grants = Grants::new(Some(signer.public().into()), None);
        assert_eq!(grants.accept(&signed, "bank", "banking").ok(), Some(context));
        assert!(matches!(grants.accept(&signed, "bank", "banking"), Err(RefusedContext::Replayed)));
        assert!(matches!(Grants::new(None, None).accept(&signed, "bank", "banking"), Err(RefusedContext::NoKey)));
        // With a key, no grant is no session; without one, only sessions without context.
        assert!(matches!(grants.admit(None, "bank", "banking"), Err(RefusedContext::Missing)));
        assert_eq!(Grants::new(None, None).admit(None, "bank", "banking").ok(), Some(SessionContext::default()));
    }

    #[test]
    fn a_grant_for_another_pod_is_refused_without_using_it_up() {
        let signer = switchboard_core::grant::GatewaySigner::from_seed(&[3; 32]);
        let grant = |nonce: &str, pod: Option<&str>| {
            signer.sign(&SessionContext {
                session_id: "s".into(),
                namespace: "bank".into(),
                agent: "banking".into(),
                issued_at_ms: now_ms(),
                nonce: nonce.into(),
                pod: pod.map(str::to_owned),
                ..Default::default()
            })
        };
        let here = Grants::new(Some(signer.public().into()), "10.0.0.7".parse().ok());
        let elsewhere = grant("a", Some("10.0.0.8"));
        let refused = here.accept(&elsewhere, "bank", "banking").expect_err("another pod's");
        assert!(matches!(&refused, RefusedContext::OtherPod(pod) if pod == "10.0.0.8"), "{refused}");
        // The pod it was made for still takes it (it was not used up on the way).
        let there = Grants::new(Some(signer.public().into()), "10.0.0.8".parse().ok());
        assert!(there.accept(&elsewhere, "bank", "banking").is_ok());
        assert!(here.accept(&grant("b", Some("10.0.0.7")), "bank", "banking").is_ok());
        assert!(here.accept(&grant("c", Some("not an address")), "bank", "banking").is_err());
        // A grant naming no pod (an older gateway), and a pod that does not know its address.
        assert!(here.accept(&grant("d", None), "bank", "banking").is_ok());
        let unknown = Grants::new(Some(signer.public().into()), None);
        assert!(unknown.accept(&grant("e", Some("10.0.0.9")), "bank", "banking").is_ok());
    }
}
