//! Context from the host app's backend (`session_start.app_context`) through the gateway,
//! with real runtime processes and the Example Bank's tool server: a customer logged in to
//! the bank's app, whose backend mints a token with a key the gateway trusts, reaches
//! banking's balance without identity verification where the Agent trusts the app for
//! identity (`spec.appContext.identity`, set on the example's triage) — and goes through
//! idv where it does not (triage once its route stops trusting). Forged,
//! expired, wrong-audience, replayed and oversized tokens are refused with their codes, and
//! `switchboard gateway` as a process takes rotated keys without a restart.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_gateway::auth::{AppContextKeys, Auth};

use crate::client::{Client, metric_sum, replies};
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};

const ISSUER: &str = "https://app.bank.example";
const AUDIENCE: &str = "switchboard-gateway";
/// The backend's HS256 secret, and its base64url form in the gateway's key set.
const SECRET: (&[u8], &str) =
    (b"the Example Bank backend secret, 32+ bytes", "dGhlIEV4YW1wbGUgQmFuayBiYWNrZW5kIHNlY3JldCwgMzIrIGJ5dGVz");
const ROTATED: (&[u8], &str) =
    (b"the backend secret after rotation, 32+ bytes", "dGhlIGJhY2tlbmQgc2VjcmV0IGFmdGVyIHJvdGF0aW9uLCAzMisgYnl0ZXM");
const FORGER: &[u8] = b"an attacker guessing at the secret, 32+ bytes";

fn jwks(kid: &str, key: (&[u8], &str)) -> String {
    json!({"keys": [{"kty": "oct", "kid": kid, "alg": "HS256", "k": key.1}]}).to_string()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

/// What the bank's backend vouches for: Ada, logged in, looking at her cards.
fn claims() -> serde_json::Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "iat": now(), "exp": now() + 120, "jti": uuid::Uuid::new_v4().to_string(),
        "memory": {
            "verifiedUser": { "name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56", "status": "active" },
            "page": "/cards",
        },
    })
}

fn mint(claims: &serde_json::Value, kid: &str, secret: &[u8]) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).expect("signs")
}

/// A client that starts a session at `agent` with the app's `token`.
async fn start(url: &str, agent: &str, token: &str) -> Client {
    let mut client = Client::connect(url).await;
    let start = SessionStart { agent: Some(agent.into()), app_context: Some(token.into()), ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    client
}

/// The session started at `agent` with `token` is refused: its `bidi_error` code and
/// message, and the close code.
async fn refused(url: &str, agent: &str, token: &str) -> (String, String, u16) {
    let mut client = start(url, agent, token).await;
    let (close, _) = client.closed().await;
    let error = client.seen.iter().find_map(|m| match m {
        ServerMessage::BidiError { code, message, .. } => Some((code.to_string(), message.clone())),
        _ => None,
    });
    assert!(
        !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })),
        "no runtime session was opened: {:?}",
        client.seen
    );
    let (code, message) = error.unwrap_or_else(|| panic!("a bidi_error: {:?}", client.seen));
    (code, message, close)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_in_customer_skips_idv_only_where_the_agent_trusts_the_app_and_forged_tokens_are_refused() {
    let keys = AppContextKeys::new(&jwks("bank-1", SECRET), ISSUER.into(), AUDIENCE.into()).expect("keys");
    let mut fleet = Fleet::with_auth(&[], Auth::default().with_app_context(Arc::new(keys))).await;

    // The front desk trusts the app for identity (the example's triage sets
    // appContext.identity): Ada, signed in, asks for her balance and is handed straight to
    // banking, whose tool server acts only for the caller the gateway's identity assertion
    // names. No identity check anywhere.
    let mut client = start(&fleet.url, "bank/triage", &mint(&claims(), "bank-1", SECRET.0)).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("Your balance is 1234.56 GBP")), "{balance:?}");
    assert!(
        !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")),
        "never at idv: {:?}",
        client.seen
    );
    client.close().await;

    // Triage stops trusting the app for identity (its route as the operator publishes it
    // once spec.appContext.identity is unset): the token's caller is left out, and the same
    // customer asking for her balance is sent to identity verification.
    let mut table = fleet.directory.borrow().table().clone();
    table.routes.iter_mut().find(|r| r.name == "triage").expect("triage").app_context.identity = false;
    fleet.publish(table);
    let mut client = start(&fleet.url, "bank/triage", &mint(&claims(), "bank-1", SECRET.0)).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    let handed = client
        .until(
            |m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv" || agent == "banking"),
        )
        .await;
    assert!(
        matches!(handed.last(), Some(ServerMessage::BidiConnectionStart { agent, .. }) if agent == "idv"),
        "to idv, not banking: {handed:?}"
    );
    client.close().await;

    // Tokens a client could bring without the backend's key, each refused with its code.
    let url = &fleet.url;
    let (code, message, close) = refused(url, "bank/triage", &mint(&claims(), "bank-1", FORGER)).await;
    assert_eq!((code.as_str(), close), ("app_context_invalid", close_code::UNAUTHORIZED), "{message}");
    assert!(message.contains("signature does not verify"), "{message}");
    let mut forged = claims();
    forged["memory"]["verifiedUser"]["accountNumber"] = "87654321".into();
    let genuine = mint(&claims(), "bank-1", SECRET.0);
    let (body, _) = genuine.rsplit_once('.').expect("a JWS");
    let (header, _) = body.split_once('.').expect("a JWS");
    let altered = format!(
        "{header}.{}.{}",
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &forged, &EncodingKey::from_secret(FORGER))
            .expect("signs")
            .split('.')
            .nth(1)
            .expect("claims"),
        genuine.rsplit('.').next().expect("signature")
    );
    let (code, _, _) = refused(url, "bank/triage", &altered).await;
    assert_eq!(code, "app_context_invalid", "the genuine signature over other claims");
    let mut expired = claims();
    expired["iat"] = (now() - 600).into();
    expired["exp"] = (now() - 300).into();
    let (code, message, close) = refused(url, "bank/triage", &mint(&expired, "bank-1", SECRET.0)).await;
    assert_eq!((code.as_str(), close), ("app_context_expired", close_code::UNAUTHORIZED), "{message}");
    let mut audience = claims();
    audience["aud"] = "another-service".into();
    let (code, message, _) = refused(url, "bank/triage", &mint(&audience, "bank-1", SECRET.0)).await;
    assert_eq!(code, "app_context_invalid");
    assert!(message.contains("not for the audience switchboard-gateway"), "{message}");
    let once = mint(&claims(), "bank-1", SECRET.0);
    let mut first = start(url, "bank/triage", &once).await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let (code, message, close) = refused(url, "bank/triage", &once).await;
    assert_eq!((code.as_str(), close), ("app_context_replayed", close_code::UNAUTHORIZED), "{message}");
    first.close().await;
    let mut big = claims();
    big["memory"]["page"] = "x".repeat(9000).into();
    let (code, _, close) = refused(url, "bank/triage", &mint(&big, "bank-1", SECRET.0)).await;
    assert_eq!((code.as_str(), close), ("app_context_too_large", close_code::BAD_START));

    let metrics = fleet.gateway.metrics.render();
    let counted = |caller: &str, agent: &str| {
        metric_sum(&metrics, "switchboard_gateway_app_context_sessions_total", &[("agent", agent), ("caller", caller)])
    };
    assert_eq!(counted("verified", "bank/triage"), 1.0, "{metrics}");
    assert_eq!(counted("not_trusted", "bank/triage"), 2.0, "{metrics}");
    for (reason, count) in [
        ("app_context_invalid", 3.0),
        ("app_context_expired", 1.0),
        ("app_context_replayed", 1.0),
        ("app_context_too_large", 1.0),
    ] {
        let refused = metric_sum(&metrics, "switchboard_gateway_sessions_refused_total", &[("reason", reason)]);
        assert_eq!(refused, count, "{reason}: {metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_process_takes_rotated_app_keys_without_a_restart_and_refuses_context_it_cannot_check() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);

    // Without app-context keys, a session that brings a token is refused.
    let plain = GatewayProcess::start(&dir, &[]).await;
    let (code, message, close) = refused(&plain.url(), "bank/triage", &mint(&claims(), "bank-1", SECRET.0)).await;
    assert_eq!((code.as_str(), close), ("app_context_not_accepted", close_code::BAD_START), "{message}");
    assert!(message.contains("--app-context-jwks-file"), "{message}");
    drop(plain);

    let keys = dir.join("app-keys.json");
    std::fs::write(&keys, jwks("bank-1", SECRET)).expect("keys");
    let keys_arg = keys.display().to_string();
    let args = [
        "--app-context-jwks-file",
        &keys_arg,
        "--app-context-issuer",
        ISSUER,
        "--app-context-audience",
        AUDIENCE,
        "--app-context-reload-seconds",
        "1",
    ];
    let gateway = GatewayProcess::start(&dir, &args).await;
    let url = gateway.url();
    let balance = |token: String| {
        let url = url.clone();
        async move {
            let mut client = start(&url, "bank/triage", &token).await;
            client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
            client.say("I'd like to check my balance").await;
            client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
            let turn = client.turn().await;
            client.close().await;
            replies(&turn).iter().any(|r| r.contains("Your balance is"))
        }
    };
    assert!(balance(mint(&claims(), "bank-1", SECRET.0)).await, "the process takes the backend's token");
    let (code, ..) = refused(&url, "bank/triage", &mint(&claims(), "bank-2", ROTATED.0)).await;
    assert_eq!(code, "app_context_invalid", "a key not yet configured");

    // The Secret is edited to the next key (a new file put in place, as the kubelet does).
    let edited = dir.join("app-keys.new");
    std::fs::write(&edited, jwks("bank-2", ROTATED)).expect("keys");
    std::fs::rename(&edited, &keys).expect("replaced");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut client = start(&url, "bank/triage", &mint(&claims(), "bank-2", ROTATED.0)).await;
        let taken = match client.next().await {
            Some(Ok(ServerMessage::BidiConnectionStart { .. })) => true,
            Some(Ok(ServerMessage::BidiError { code, .. })) if code == "app_context_invalid" => false,
            other => panic!("a start or app_context_invalid: {other:?}"),
        };
        client.close().await;
        if taken {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the rotated key is taken within 30 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(balance(mint(&claims(), "bank-2", ROTATED.0)).await, "the rotated key's tokens work");
    let (code, ..) = refused(&url, "bank/triage", &mint(&claims(), "bank-1", SECRET.0)).await;
    assert_eq!(code, "app_context_invalid", "the retired key's tokens are refused");
    let _ = std::fs::remove_dir_all(dir);
}
