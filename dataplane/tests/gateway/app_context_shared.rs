//! App-context tokens (`session_start.app_context`) at `switchboard gateway` processes:
//! single-use across replicas and bound to their client.
//!
//! - Two replicas sharing a real Redis: a token that opened a session at one is refused at
//!   the other (`app_context_replayed`) while it lives. A replica whose Redis is down
//!   refuses tokens (`store_unavailable`, 1013: try again) rather than risk a replay, serves
//!   sessions without one meanwhile, and takes the same token once Redis is back.
//! - `--app-context-bind-subject`: a token opens a session only for the client whose
//!   credential it names (`sub`: here, its API key's name); another client's, or a token
//!   naming none, is refused (`app_context_wrong_subject`, 4401). A gateway that asks no
//!   credential does not start with it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use sha2::Digest as _;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};

use crate::client::Client;
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::redis::Redis;

const ISSUER: &str = "https://app.bank.example";
const AUDIENCE: &str = "switchboard-gateway";
/// The backend's HS256 secret, and its base64url form in the gateway's key set.
const SECRET: (&[u8], &str) =
    (b"the Example Bank backend secret, 32+ bytes", "dGhlIEV4YW1wbGUgQmFuayBiYWNrZW5kIHNlY3JldCwgMzIrIGJ5dGVz");

/// Writes the app backend's key set into `dir`; the gateway's app-context flags for it.
fn app_args(dir: &std::path::Path) -> Vec<String> {
    let keys = dir.join("app-keys.json");
    let jwks = json!({"keys": [{"kty": "oct", "kid": "bank-1", "alg": "HS256", "k": SECRET.1}]});
    std::fs::write(&keys, jwks.to_string()).expect("keys");
    let keys = keys.display().to_string();
    ["--app-context-jwks-file", &keys, "--app-context-issuer", ISSUER, "--app-context-audience", AUDIENCE]
        .map(str::to_owned)
        .to_vec()
}

/// A token of the bank's backend for one session (bound to `sub` when given).
fn mint(sub: Option<&str>) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let mut claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 120, "jti": uuid::Uuid::new_v4().to_string(),
        "memory": { "page": "/cards" },
    });
    if let Some(sub) = sub {
        claims["sub"] = json!(sub);
    }
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("bank-1".into());
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(SECRET.0)).expect("signs")
}

/// What became of a session started at triage with `token` (none: no app context) by a
/// client sending `headers`: opened, or refused with its `bidi_error` code and close code.
async fn opened(url: &str, headers: &[(&'static str, &str)], token: Option<&str>) -> Result<(), (String, String, u16)> {
    let mut client = Client::connect_with(url, headers).await;
    let start =
        SessionStart { agent: Some("bank/triage".into()), app_context: token.map(str::to_owned), ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    let mut error = None;
    loop {
        match client.next().await {
            Some(Ok(ServerMessage::BidiConnectionStart { .. })) => {
                client.close().await;
                return Ok(());
            }
            Some(Ok(ServerMessage::BidiError { code, message, .. })) => error = Some((code.to_string(), message)),
            Some(Ok(_)) => {}
            Some(Err((close, _))) => {
                let (code, message) =
                    error.unwrap_or_else(|| panic!("a bidi_error before the close: {:?}", client.seen));
                return Err((code, message, close));
            }
            None => panic!("no answer: {:?}", client.seen),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_opens_one_session_across_replicas_sharing_redis_and_none_while_redis_is_down() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let redis = Redis::start();
    let mut args = app_args(&dir);
    args.extend(["--redis-url".to_owned(), redis.url.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (one, two) = (GatewayProcess::start(&dir, &args).await, GatewayProcess::start(&dir, &args).await);

    let token = mint(None);
    assert_eq!(opened(&one.url(), &[], Some(&token)).await, Ok(()), "the token opens a session at replica 1");
    let (code, message, close) = opened(&two.url(), &[], Some(&token)).await.expect_err("replayed at replica 2");
    assert_eq!((code.as_str(), close), ("app_context_replayed", close_code::UNAUTHORIZED), "{message}");
    let (code, ..) = opened(&one.url(), &[], Some(&token)).await.expect_err("replayed at replica 1");
    assert_eq!(code, "app_context_replayed");
    assert_eq!(opened(&two.url(), &[], Some(&mint(None))).await, Ok(()), "another token opens at replica 2");

    // Redis goes down: no token is taken (its id cannot be checked), the rest is served.
    let port = redis.port;
    drop(redis);
    let token = mint(None);
    let (code, message, close) = opened(&one.url(), &[], Some(&token)).await.expect_err("refused while Redis is down");
    assert_eq!((code.as_str(), close), ("store_unavailable", close_code::TRY_AGAIN_LATER), "{message}");
    assert!(message.contains("cannot check that session_start.app_context was not used already"), "{message}");
    assert_eq!(opened(&one.url(), &[], None).await, Ok(()), "a session without app context still opens");

    // Redis is back (empty): the same token, never taken, opens one session, once.
    let _redis = Redis::start_on(port);
    assert_eq!(once_redis_answers(&one.url(), &token).await, Ok(()), "the token was not spent while Redis was down");
    let (code, ..) = once_redis_answers(&two.url(), &token).await.expect_err("replayed at replica 2");
    assert_eq!(code, "app_context_replayed");
    let _ = std::fs::remove_dir_all(dir);
}

/// [`opened`] with `token` at `url`, asked again while the replica finds Redis unavailable
/// (each replica reconnects on its own, after a backoff), for 20 s.
async fn once_redis_answers(url: &str, token: &str) -> Result<(), (String, String, u16)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match opened(url, &[], Some(token)).await {
            Err((code, message, _)) if code == "store_unavailable" => {
                assert!(Instant::now() < deadline, "Redis answers the replica within 20 s of its return: {message}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            answer => return answer,
        }
    }
}

/// A keys-file line for the key `key` named `name`.
fn key_line(name: &str, key: &str) -> String {
    let digest: String = sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("{name} {digest}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_token_opens_a_session_only_for_the_client_it_was_minted_for() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let keys = dir.join("api-keys");
    std::fs::write(&keys, key_line("web", "web-key") + &key_line("partner", "partner-key")).expect("keys");
    let keys = keys.display().to_string();
    let mut args = app_args(&dir);

    // Binding needs client credentials: a gateway that asks none does not start with it.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["gateway", "--listen", "127.0.0.1:0", "--gateway-key-file"])
        .arg(dir.join("gateway.pem"))
        .arg("--routes-file")
        .arg(dir.join("routes.json"))
        .args(&args)
        .arg("--app-context-bind-subject")
        .env("SWITCHBOARD_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("runs the gateway");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused to start");
    assert!(stderr.contains("--app-context-bind-subject") && stderr.contains("--api-keys-file"), "{stderr}");

    args.extend(["--api-keys-file", &keys, "--app-context-bind-subject"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gateway = GatewayProcess::start(&dir, &args).await;
    let url = gateway.url();
    let (web, partner) = ([("x-api-key", "web-key")], [("x-api-key", "partner-key")]);

    let minted_for_web = mint(Some("web"));
    let (code, message, close) = opened(&url, &partner, Some(&minted_for_web)).await.expect_err("another client's");
    assert_eq!((code.as_str(), close), ("app_context_wrong_subject", close_code::UNAUTHORIZED), "{message}");
    assert!(message.contains(r#"minted for the client "web", not "partner""#), "{message}");
    assert_eq!(opened(&url, &web, Some(&minted_for_web)).await, Ok(()), "its own client's: not spent by the refusal");
    let (code, message, _) = opened(&url, &web, Some(&mint(None))).await.expect_err("a token naming no client");
    assert_eq!(code, "app_context_wrong_subject", "{message}");
    assert!(message.contains("names no client (sub)"), "{message}");
    let _ = std::fs::remove_dir_all(dir);
}
