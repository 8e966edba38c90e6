use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use super::*;

const SECRET: &[u8] = b"the app backend's shared secret, 32+ bytes long";

fn jwks(kid: &str, secret: &[u8]) -> String {
    let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    json!({"keys": [{"kty": "oct", "kid": kid, "alg": "HS256", "k": k}]}).to_string()
}

fn keys() -> AppContextKeys {
    AppContextKeys::new(&jwks("app-1", SECRET), "https://bank.example".into(), "switchboard".into()).expect("keys")
}

fn claims(jti: &str) -> serde_json::Value {
    let now = now_secs();
    json!({
        "iss": "https://bank.example", "aud": "switchboard", "iat": now, "exp": now + 300, "jti": jti,
        "memory": {"verifiedUser": {"name": "Ada Lovelace", "accountNumber": "12345678"}, "page": "/cards"},
    })
}

fn sign(claims: &serde_json::Value, kid: &str, secret: &[u8]) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).expect("signs")
}

#[test]
fn a_token_of_the_trusted_backend_gives_its_memory_once() {
    let keys = keys();
    let token = sign(&claims("t-1"), "app-1", SECRET);
    let claims = keys.verify(&token, None).expect("valid");
    assert_eq!(claims.memory["verifiedUser"]["accountNumber"], "12345678");
    assert_eq!(claims.memory["page"], "/cards");
    assert_eq!(keys.verify(&token, None), Err(AppContextError::Replayed), "each token opens one session");
}

#[test]
fn each_kind_of_bad_token_is_refused_with_its_code() {
    let keys = keys();
    let code = |token: &str| keys.verify(token, None).map(|_| ()).map_err(|e| (e.code(), e.to_string()));
    let forged = sign(&claims("f"), "app-1", b"a key the gateway does not trust, 32+ bytes");
    let (c, m) = code(&forged).expect_err("forged");
    assert_eq!(c, ErrorCode::AppContextInvalid);
    assert!(m.contains("signature does not verify"), "{m}");
    let (c, m) = code(&sign(&claims("k"), "app-9", SECRET)).expect_err("unknown key");
    assert!(c == ErrorCode::AppContextInvalid && m.contains("no key \"app-9\""), "{m}");
    let mut audience = claims("a");
    audience["aud"] = "another-gateway".into();
    let (c, m) = code(&sign(&audience, "app-1", SECRET)).expect_err("audience");
    assert!(c == ErrorCode::AppContextInvalid && m.contains("not for the audience switchboard"), "{m}");
    let mut issuer = claims("i");
    issuer["iss"] = "https://evil.example".into();
    assert!(code(&sign(&issuer, "app-1", SECRET)).expect_err("issuer").1.contains("not from the issuer"));
    let mut expired = claims("e");
    expired["exp"] = (now_secs() - 120).into();
    expired["iat"] = (now_secs() - 300).into();
    let (c, m) = code(&sign(&expired, "app-1", SECRET)).expect_err("expired");
    assert!(c == ErrorCode::AppContextExpired && m.contains("has expired"), "{m}");
    let mut long = claims("l");
    long["exp"] = (now_secs() + 86_400).into();
    let (c, m) = code(&sign(&long, "app-1", SECRET)).expect_err("long-lived");
    assert!(c == ErrorCode::AppContextExpired && m.contains("longer than the 600 s"), "{m}");
    let mut no_jti = claims("x");
    no_jti.as_object_mut().expect("object").remove("jti");
    assert!(code(&sign(&no_jti, "app-1", SECRET)).expect_err("no jti").1.contains("no jti claim"));
    let mut bad_memory = claims("m");
    bad_memory["memory"] = json!({"no good": 1});
    assert!(code(&sign(&bad_memory, "app-1", SECRET)).expect_err("memory").1.contains("not a memory key"));
    bad_memory["memory"] = json!(["verifiedUser"]);
    assert!(code(&sign(&bad_memory, "app-1", SECRET)).expect_err("memory").1.contains("not an object"));
    let (c, _) = code(&"x".repeat(MAX_TOKEN_BYTES + 1)).expect_err("too large");
    assert_eq!(c, ErrorCode::AppContextTooLarge);
    let (c, m) = code("not a token").expect_err("garbage");
    assert!(c == ErrorCode::AppContextInvalid && m.contains("not a JWT"), "{m}");
    // None of the refused tokens used up an id: a valid token with one of their ids works.
    assert!(keys.verify(&sign(&claims("f"), "app-1", SECRET), None).is_ok());
}

#[test]
fn rotated_keys_take_effect_without_a_restart() {
    let keys = keys();
    let next = b"the backend's next secret, also 32+ bytes long";
    assert!(keys.verify(&sign(&claims("r-1"), "app-2", next), None).is_err());
    assert_eq!(keys.set_keys(&jwks("app-2", next)).expect("rotates"), 1);
    assert!(keys.verify(&sign(&claims("r-2"), "app-2", next), None).is_ok());
    assert!(keys.verify(&sign(&claims("r-3"), "app-1", SECRET), None).is_err(), "the old key is gone");
    assert!(keys.set_keys("{\"keys\": []}").is_err(), "an empty set is refused, the keys in use stay");
    assert!(keys.verify(&sign(&claims("r-4"), "app-2", next), None).is_ok());
}

#[test]
fn an_agent_takes_the_caller_only_when_it_trusts_the_app_and_other_keys_only_when_listed() {
    let claims = |memory: serde_json::Value| AppClaims {
        memory: memory.as_object().expect("object").clone().into_iter().collect(),
    };
    let memory = json!({"verifiedUser": {"accountNumber": "12345678"}, "customer": "c-1", "page": "/cards", "x": 1});
    let identity = vec!["verifiedUser".to_owned()];
    let trusting = AppContext { identity: true, memory: vec!["page".into()] };
    let taken = claims(memory.clone()).taken(&trusting, &identity, ["customer"]);
    assert!(taken.caller);
    assert_eq!(taken.memory.keys().collect::<Vec<_>>(), ["customer", "page", "verifiedUser"]);
    assert_eq!(taken.left_out, ["x"]);
    let wary = AppContext { identity: false, memory: vec!["page".into()] };
    let taken = claims(memory.clone()).taken(&wary, &identity, ["customer"]);
    assert!(!taken.caller && taken.caller_left_out);
    assert_eq!(taken.memory.keys().collect::<Vec<_>>(), ["page"]);
    assert_eq!(taken.left_out, ["customer", "verifiedUser", "x"], "another Agent's identity key counts as one");
    let nothing = claims(memory).taken(&AppContext::default(), &identity, []);
    assert!(nothing.memory.is_empty() && !nothing.caller);
}

#[test]
fn a_bound_token_opens_a_session_only_for_the_client_it_names() {
    let keys = keys().with_bound_subject();
    let bound = |jti: &str, sub: Option<&str>| {
        let mut claims = claims(jti);
        if let Some(sub) = sub {
            claims["sub"] = json!(sub);
        }
        sign(&claims, "app-1", SECRET)
    };
    let code = |result: Result<AppClaims, AppContextError>| result.map(|_| ()).map_err(|e| (e.code(), e.to_string()));
    assert!(keys.verify(&bound("b-1", Some("web")), Some("web")).is_ok(), "its own client");
    let (wrong, message) = code(keys.verify(&bound("b-2", Some("web")), Some("partner"))).expect_err("another client");
    assert_eq!(wrong, ErrorCode::AppContextWrongSubject);
    assert!(message.contains(r#"minted for the client "web", not "partner""#), "{message}");
    assert!(keys.verify(&bound("b-2", Some("web")), Some("web")).is_ok(), "a refused token's id was not taken");
    let (unbound, message) = code(keys.verify(&bound("b-3", None), Some("web"))).expect_err("no sub");
    assert!(unbound == ErrorCode::AppContextWrongSubject && message.contains("names no client (sub)"), "{message}");
    let (anonymous, message) = code(keys.verify(&bound("b-4", Some("web")), None)).expect_err("no credential");
    assert!(anonymous == ErrorCode::AppContextWrongSubject && message.contains("no credential"), "{message}");
    // Without binding, sub is not read.
    assert!(self::keys().verify(&bound("b-5", Some("web")), Some("partner")).is_ok());
}

#[test]
fn a_checked_token_is_remembered_while_it_is_taken() {
    let keys = keys();
    let checked = keys.check(&sign(&claims("c-1"), "app-1", SECRET), None).expect("valid");
    let minted = checked.expires_at - 300;
    assert_eq!(checked.remember_for(minted), Duration::from_secs(300 + LEEWAY_SECS));
    assert_eq!(checked.remember_for(minted + 10_000), Duration::from_secs(1), "at least a second");
    assert_eq!(keys.take_here(&checked), Ok(()));
    assert_eq!(keys.take_here(&checked), Err(AppContextError::Replayed));
}
