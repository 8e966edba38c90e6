//! The phone call an inbound session is ([`switchboard_core::phone`]): the caller's number
//! and the number dialled, which the session starts with in its memory (`phoneCall`) and so
//! in every runtime's signed grant; a call with no number to tell starts with `phoneCall:
//! {}`, so that its agents know it is a phone call (`send_digits` is offered only there). Taken from the [`PHONE_HEADER`] of a `/v1/session`
//! request only when its credential is a SIP edge's (an API key marked `calls=edge`; without
//! keys, local mode's requests from this machine: [`crate::auth::Auth::calls`]). From any
//! other client the header is ignored — the session opens as if it had not been sent, with
//! no number in it — and the gateway logs why, so an edge whose key lacks `calls=edge` is
//! told what to change.

use axum::http::HeaderMap;
use switchboard_core::phone::{PHONE_HEADER, PhoneCall};

use crate::auth::{Auth, CallAccess};

/// The call the request's [`PHONE_HEADER`] names, when a SIP edge sent it and it reads.
pub fn vouched(auth: &Auth, headers: &HeaderMap) -> Option<PhoneCall> {
    let value = headers.get(PHONE_HEADER)?;
    if let Err(refusal) = auth.calls(headers, CallAccess::Edge) {
        tracing::warn!(
            code = refusal.code,
            "a session request carried {PHONE_HEADER}, which only a SIP edge may send; its numbers are ignored \
             (a SIP edge's API key needs calls=edge): {}",
            refusal.message
        );
        return None;
    }
    let read = value
        .to_str()
        .map_err(|_| "not text".to_owned())
        .and_then(|v| PhoneCall::from_header(v).map_err(|e| e.to_string()));
    match read {
        // A call with no number to tell (`{}`) is a phone call all the same.
        Ok(call) => Some(call),
        Err(why) => {
            tracing::warn!("the SIP edge's {PHONE_HEADER} header is ignored: {why}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(key: &str) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    fn request(key: Option<&str>, phone: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert("authorization", format!("Bearer {key}").parse().expect("a header"));
        }
        headers.insert(PHONE_HEADER, phone.parse().expect("a header"));
        headers
    }

    #[test]
    fn only_a_sip_edges_credential_vouches_for_a_call() {
        let keys =
            format!("edge {} calls=edge\napp {}\nplacer {} calls=place\n", digest("e"), digest("a"), digest("p"));
        let auth = Auth::new(Some(&keys), vec![]).expect("keys");
        let call =
            PhoneCall { caller: Some("+442079460018".into()), dialled: Some("+442079460000".into()), withheld: false };
        let header = call.to_header();
        assert_eq!(vouched(&auth, &request(Some("e"), &header)), Some(call.clone()));
        for forger in [Some("a"), Some("p"), Some("wrong"), None] {
            assert_eq!(vouched(&auth, &request(forger, &header)), None, "{forger:?} cannot set a caller's number");
        }
        assert_eq!(vouched(&auth, &request(Some("e"), r#"{"caller":"Ada"}"#)), None, "not a number");
        assert_eq!(
            vouched(&auth, &request(Some("e"), "{}")),
            Some(PhoneCall::default()),
            "no number to tell, but a phone call"
        );
        assert_eq!(vouched(&auth, &request(Some("a"), "{}")), None, "only from the edge");
        let mut plain = request(Some("e"), &header);
        plain.remove(PHONE_HEADER);
        assert_eq!(vouched(&auth, &plain), None);
        // A gateway without keys that is not local mode trusts no one's header.
        assert_eq!(vouched(&Auth::new(None, vec![]).expect("no keys"), &request(None, &header)), None);
    }
}
