//! What tool servers receive: no assertion before the caller is verified; after it, on every
//! call — the first one in the very turn the identity check succeeded included — an
//! assertion that verifies with the gateway's public key (here and with a standard JWT
//! library) and names the session, the Agent and the caller. A client's own
//! `identity_assertion` is refused, by the gateway and by a runtime reached directly, and is
//! never believed.

use serde_json::json;
use switchboard_core::assertion::{self, IdentityClaims};
use switchboard_core::grant::GatewaySigner;
use switchboard_core::protocol::{ClientMessage, ServerMessage};

use crate::client::{Client, signed_start};
use crate::teller::{Received, Teller, ada};

fn now() -> u64 {
    switchboard_runtime::grants::now_ms() / 1000
}

/// The one request to `path` in `received`.
fn only<'a>(received: &'a [Received], path: &str) -> &'a Received {
    let mut to_path = received.iter().filter(|r| r.path == path);
    let first = to_path.next().unwrap_or_else(|| panic!("a request to {path}: {received:?}"));
    assert!(to_path.next().is_none(), "one request to {path}: {received:?}");
    first
}

async fn session_id(client: &mut Client) -> String {
    let started = client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    match started.last() {
        Some(ServerMessage::BidiConnectionStart { session_id, .. }) => session_id.clone(),
        _ => unreachable!(),
    }
}

/// Reads until the refusal of an `identity_assertion`.
async fn refused(client: &mut Client) -> String {
    let seen = client.until(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "identity_refused")).await;
    match seen.last() {
        Some(ServerMessage::BidiError { message, recoverable: true, .. }) => message.clone(),
        other => panic!("a recoverable identity_refused: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_servers_get_the_verified_caller_as_the_gateways_signed_assertion() {
    let teller = Teller::start().await;
    let mut client = Client::start(&teller.url, None).await;
    let sid = session_id(&mut client).await;
    assert!(sid.starts_with("gw-"), "the gateway's session id: {sid}");

    client.say("Which branch is nearest?").await;
    client.turn().await;
    let before = teller.received();
    assert_eq!(only(&before, "/lookup").identity, None, "no caller yet, no assertion");

    // Verified, and the account tool runs at once, in the same turn.
    client.say("Please verify me").await;
    let turn = client.turn().await;
    assert!(
        turn.iter().any(|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "account_summary")),
        "{turn:?}"
    );
    let verified = teller.received();
    assert_eq!(only(&verified, "/idv").identity, None, "the identity check itself runs before the caller is known");
    let summary = only(&verified, "/summary");
    assert_eq!(summary.body, json!({"accountNumber": "12345678"}));
    let token = summary.identity.clone().expect("the account tool gets the assertion");

    let claims =
        assertion::verify_identity(&teller.key.public(), &token, now()).expect("verifies with the gateway key");
    assert_eq!(claims.check_session("default", "teller", &sid), Ok(()), "{claims:?}");
    assert_eq!((claims.iss.as_str(), claims.sub.as_str()), (assertion::ISSUER, "12345678"));
    assert_eq!(claims.verified_user, ada());
    assert_eq!(claims.exp - claims.iat, assertion::TTL_SECS);
    let other = GatewaySigner::from_seed(&[24; 32]).public();
    assert!(assertion::verify_identity(&other, &token, now()).is_err(), "not with another key");

    // A tool server using a standard JWT library, with the gateway's key as a JWK.
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(teller.key.public().jwk()).expect("a JWK");
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).expect("an Ed25519 key");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.set_issuer(&[assertion::ISSUER]);
    let decoded = jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation).expect("a valid JWT");
    assert_eq!(decoded.claims["sid"], sid.as_str());
    assert_eq!(decoded.header.kid.as_deref(), Some(teller.key.public().to_string().as_str()));

    // Every later call carries it, whatever the tool.
    client.say("Which branch again?").await;
    client.turn().await;
    let after = teller.received();
    let again = only(&after, "/lookup").identity.clone().expect("an assertion");
    let claims = assertion::verify_identity(&teller.key.public(), &again, now()).expect("verifies");
    assert_eq!((claims.sid.as_str(), claims.verified_user.clone()), (sid.as_str(), ada()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_give_itself_an_identity_assertion() {
    let teller = Teller::start().await;
    // A genuine assertion, of another session.
    let mut verified = Client::start(&teller.url, None).await;
    session_id(&mut verified).await;
    verified.say("Please verify me").await;
    verified.turn().await;
    let genuine = teller.received().into_iter().find_map(|r| r.identity).expect("an assertion");

    // Through the gateway: refused there, whatever it is, and the session goes on unverified.
    let mut client = Client::start(&teller.url, None).await;
    let sid = session_id(&mut client).await;
    let forged = {
        let claims = IdentityClaims::new(ada(), "default", "teller", &sid, now());
        assertion::sign_identity(&GatewaySigner::from_seed(&[99; 32]), &claims).expect("signed")
    };
    for assertion in [genuine.clone(), forged.clone()] {
        client.send(&ClientMessage::IdentityAssertion { assertion }).await;
        let message = refused(&mut client).await;
        assert!(message.contains("only by the Switchboard gateway"), "{message}");
    }
    client.send_raw(&format!(r#"{{"type":"identity\u005fassertion","assertion":"{genuine}"}}"#)).await;
    refused(&mut client).await;
    client.say("Which branch is nearest?").await;
    client.turn().await;
    assert_eq!(only(&teller.received(), "/lookup").identity, None, "not believed");
    client.say("My account summary please").await;
    let turn = client.turn().await;
    assert!(
        !turn.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "account_summary")),
        "no account tool for an unverified caller: {turn:?}"
    );

    // Straight at the runtime (a pod reached past the gateway, with a grant): it checks the
    // assertion itself and refuses one of another session or another key.
    let mut direct = Client::connect(&teller.runtime_url).await;
    direct.send(&ClientMessage::SessionStart(signed_start(&teller.key, "teller", Default::default()))).await;
    let direct_sid = session_id(&mut direct).await;
    direct.send(&ClientMessage::IdentityAssertion { assertion: genuine }).await;
    let message = refused(&mut direct).await;
    assert!(message.contains(&format!("not default/teller/{direct_sid}")), "{message}");
    direct.send(&ClientMessage::IdentityAssertion { assertion: forged }).await;
    assert!(refused(&mut direct).await.contains("signature"));
    direct.say("Which branch is nearest?").await;
    direct.turn().await;
    assert_eq!(only(&teller.received(), "/lookup").identity, None, "not believed");
}

/// A runtime reached with a grant that carries a caller (as the gateway opens a session
/// after a handoff, a move or a resume) forwards the grant's assertion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assertion_a_grant_carries_reaches_the_tools() {
    let teller = Teller::start().await;
    let memory = [("verifiedUser".to_owned(), ada())].into();
    let mut direct = Client::connect(&teller.runtime_url).await;
    direct.send(&ClientMessage::SessionStart(signed_start(&teller.key, "teller", memory))).await;
    let sid = session_id(&mut direct).await;
    direct.say("My account summary please").await;
    direct.turn().await;
    let token = only(&teller.received(), "/summary").identity.clone().expect("an assertion");
    let claims = assertion::verify_identity(&teller.key.public(), &token, now()).expect("verifies");
    assert_eq!(claims.check_session("default", "teller", &sid), Ok(()));
}
