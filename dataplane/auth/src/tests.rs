//! The client checks, unit by unit.
use axum::http::HeaderValue;

use super::*;

fn digest(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).expect("header"));
    }
    map
}

#[test]
fn keys_are_checked_by_digest_and_limited_per_key() {
    let file = format!("# team keys\nalpha {} 1\nbeta {}  # the default cap\n", digest("a-key"), digest("b-key"));
    let auth = Auth::new(Some(&file), vec![]).expect("valid file");
    let first = auth.admit(&headers(&[("authorization", "Bearer a-key")]), None).expect("admitted");
    assert_eq!(first.key.as_deref(), Some("alpha"));
    assert_eq!(first.subject(), Some("alpha"), "an API key's subject is its name");
    let second = auth.admit(&headers(&[("x-api-key", "a-key")]), None).expect_err("over its limit");
    assert_eq!((second.code, second.reason), (close_code::TOO_MANY_SESSIONS, ErrorCode::KeySessions));
    drop(first);
    assert!(auth.admit(&headers(&[("x-api-key", "a-key")]), None).is_ok(), "the slot came back");
    assert!(auth.admit(&headers(&[("authorization", "bearer b-key")]), None).is_ok());
    let unknown = auth.admit(&headers(&[("authorization", "Bearer nope")]), None).expect_err("unknown");
    assert_eq!((unknown.code, unknown.reason), (close_code::UNAUTHORIZED, ErrorCode::UnknownKey));
    let missing = auth.admit(&headers(&[]), None).expect_err("missing");
    assert_eq!((missing.code, missing.reason), (close_code::UNAUTHORIZED, ErrorCode::MissingKey));
    let basic = auth.admit(&headers(&[("authorization", "Basic a-key")]), None).expect_err("not a bearer");
    assert_eq!(basic.reason, "missing_key");
}

#[test]
fn an_api_key_in_the_query_string_is_taken_from_browsers_only() {
    let file = format!("web {}\n", digest("w-key"));
    let auth = Auth::new(Some(&file), vec!["https://bank.example".into()]).expect("valid file");
    // A program can send a header: its key in the URL (and so in logs) is refused.
    let refused = auth.admit(&headers(&[]), Some("w-key")).expect_err("a key in the URL, no Origin");
    assert_eq!((refused.code, refused.reason), (close_code::UNAUTHORIZED, ErrorCode::MissingKey));
    assert!(refused.message.contains("Authorization: Bearer"), "{}", refused.message);
    // A browser page cannot set headers on a WebSocket: its query parameter is taken.
    let page = auth.admit(&headers(&[("origin", "https://bank.example")]), Some("w-key")).expect("a browser");
    assert_eq!(page.key.as_deref(), Some("web"));
    drop(page);
    // Headers are taken from anyone, and win over the query parameter.
    assert!(auth.admit(&headers(&[("x-api-key", "w-key")]), Some("other")).is_ok());
}

#[test]
fn browser_origins_need_the_allowlist() {
    let open = Auth::new(None, vec!["https://bank.example".into()]).expect("auth");
    assert!(open.admit(&headers(&[]), None).is_ok(), "no Origin: not a browser");
    assert!(open.admit(&headers(&[("origin", "https://bank.example")]), None).is_ok());
    let refused = open.admit(&headers(&[("origin", "https://evil.example")]), None).expect_err("foreign page");
    assert_eq!((refused.code, refused.reason), (close_code::ORIGIN_NOT_ALLOWED, ErrorCode::Origin));
    let any = Auth::new(None, vec!["*".into()]).expect("auth");
    assert!(any.admit(&headers(&[("origin", "https://evil.example")]), None).is_ok());
    // The same rule, asked alone (the WebRTC edge's CORS answers by it).
    assert!(open.allows_origin("https://bank.example", &headers(&[])));
    assert!(!open.allows_origin("https://evil.example", &headers(&[])));
    assert!(!open.allows_origin("https://bank.example.evil", &headers(&[])), "the exact origin, not a prefix");
    assert!(any.allows_origin("https://evil.example", &headers(&[])));
    let local = Auth::new(None, vec![]).expect("auth").with_own_page();
    assert!(local.allows_origin("http://127.0.0.1:8080", &headers(&[("host", "127.0.0.1:8080")])));
    assert!(!local.allows_origin("http://127.0.0.1:9999", &headers(&[("host", "127.0.0.1:8080")])));
}

#[test]
fn the_own_page_is_admitted_only_on_an_address() {
    let local = Auth::new(None, vec![]).expect("auth").with_own_page();
    for (origin, host) in [
        ("http://127.0.0.1:8080", "127.0.0.1:8080"),
        ("http://localhost:8080", "localhost:8080"),
        ("http://[::1]:8080", "[::1]:8080"),
        ("http://192.168.1.5", "192.168.1.5"),
    ] {
        assert!(local.admit(&headers(&[("origin", origin), ("host", host)]), None).is_ok(), "{origin}");
    }
    for (origin, host) in [
        // DNS rebinding: a site's own name pointed at this address.
        ("http://evil.example:8080", "evil.example:8080"),
        // Another port or scheme-less mismatch: another page.
        ("http://127.0.0.1:9999", "127.0.0.1:8080"),
        ("http://127.0.0.1:8080", ""),
    ] {
        let refused = local.admit(&headers(&[("origin", origin), ("host", host)]), None).expect_err(origin);
        assert_eq!(refused.code, close_code::ORIGIN_NOT_ALLOWED);
    }
    let strict = Auth::new(None, vec![]).expect("auth");
    assert!(
        strict.admit(&headers(&[("origin", "http://127.0.0.1:8080"), ("host", "127.0.0.1:8080")]), None).is_err(),
        "without with_own_page a gateway serves no page"
    );
}

#[test]
fn open_data_answers_only_requests_that_name_this_machine() {
    let local = Auth::new(None, vec![]).expect("auth").with_own_page().with_open_records();
    for host in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"] {
        assert!(local.records_reader(&headers(&[("host", host)])).is_ok(), "{host}");
        assert!(local.open_data(&headers(&[("host", host)])).is_ok(), "{host}");
    }
    // DNS rebinding: a site's own name pointed at 127.0.0.1.
    let refused = local.records_reader(&headers(&[("host", "evil.example:8080")])).expect_err("a rebound name");
    assert_eq!((refused.status, refused.code), (403, "host_not_local"));
    assert!(refused.message.contains("http://127.0.0.1:8080/"), "{}", refused.message);
    assert_eq!(local.open_data(&headers(&[])).expect_err("no Host").code, "host_not_local");
    // A gateway whose record is not open serves its metrics to whoever reaches it, as before.
    let cluster = Auth::new(None, vec![]).expect("auth");
    assert!(cluster.open_data(&headers(&[("host", "gateway.example")])).is_ok());
}

/// An Ed25519 signing key and the JWKS with its public half under `kid`.
fn jwt_key(seed: u8, kid: &str) -> (jsonwebtoken::EncodingKey, String) {
    use base64::Engine;
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let signing = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
    let der = signing.to_pkcs8_der().expect("pkcs8");
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signing.verifying_key().as_bytes());
    let jwks = serde_json::json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}]});
    (jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()), jwks.to_string())
}

fn token(key: &jsonwebtoken::EncodingKey, kid: &str, claims: serde_json::Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, key).expect("signs")
}

fn claims(iss: &str, aud: &str, exp_from_now: i64) -> serde_json::Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let exp = i64::try_from(now).expect("now") + exp_from_now;
    serde_json::json!({"sub": "user-7", "iss": iss, "aud": aud, "exp": exp})
}

#[test]
fn jwts_are_checked_for_signature_key_issuer_audience_and_expiry() {
    let (key, jwks) = jwt_key(1, "k1");
    let jwt = Arc::new(Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into()).expect("jwks"));
    let auth = Auth::new(None, vec![]).expect("auth").with_jwt(jwt.clone(), SubjectLimits::default());
    assert!(auth.requires_keys());
    let good = token(&key, "k1", claims("https://idp.example", "switchboard", 300));
    let admitted = auth.admit(&headers(&[("authorization", &format!("Bearer {good}"))]), None).expect("valid");
    assert_eq!(admitted.key.as_deref(), Some("jwt:user-7"));
    assert_eq!(admitted.subject(), Some("user-7"), "a JWT's subject is its sub");
    assert!(auth.admit(&headers(&[]), Some(&good)).is_ok(), "a browser's access_token query parameter");
    let refused = |token: &str, why: &str| {
        let refusal = auth.admit(&headers(&[]), Some(token)).expect_err(why);
        assert_eq!((refusal.code, refusal.reason), (close_code::UNAUTHORIZED, ErrorCode::InvalidToken), "{why}");
        assert!(refusal.message.contains(why), "{why}: {}", refusal.message);
    };
    refused(&token(&key, "k1", claims("https://idp.example", "switchboard", -300)), "expired");
    // Not valid before (nbf): refused while in the future beyond the clock skew allowed.
    let not_before = |from_now: i64| {
        let mut c = claims("https://idp.example", "switchboard", 600);
        c["nbf"] = serde_json::json!(c["exp"].as_i64().expect("exp") - 600 + from_now);
        token(&key, "k1", c)
    };
    refused(&not_before(120), "not valid yet (nbf)");
    assert!(auth.admit(&headers(&[]), Some(&not_before(10))).is_ok(), "within the 30 s of clock skew");
    assert!(auth.admit(&headers(&[]), Some(&not_before(-60))).is_ok(), "already valid");
    refused(&token(&key, "k1", claims("https://evil.example", "switchboard", 300)), "issuer");
    refused(&token(&key, "k1", claims("https://idp.example", "other", 300)), "audience");
    let (forger, _) = jwt_key(2, "k1");
    refused(&token(&forger, "k1", claims("https://idp.example", "switchboard", 300)), "signature");
    refused(&token(&key, "k9", claims("https://idp.example", "switchboard", 300)), "no key \"k9\"");
    let no_sub = serde_json::json!({"iss": "https://idp.example", "aud": "switchboard", "exp": 4_000_000_000u64});
    refused(&token(&key, "k1", no_sub), "sub");
    // An HS256 token made with the public key as its secret (algorithm confusion).
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &header,
        &claims("https://idp.example", "switchboard", 300),
        &jsonwebtoken::EncodingKey::from_secret(jwks.as_bytes()),
    )
    .expect("signs");
    refused(&confused, "EdDSA");
    // Rotation: the new key's tokens pass, the old key's no longer do.
    let (next, next_jwks) = jwt_key(3, "k2");
    assert_eq!(jwt.set_keys(&next_jwks).expect("rotated"), 1);
    assert!(
        auth.admit(&headers(&[]), Some(&token(&next, "k2", claims("https://idp.example", "switchboard", 300)))).is_ok()
    );
    refused(&good, "no key \"k1\"");
    assert!(jwt.set_keys("{\"keys\": []}").is_err(), "an empty set is refused, the keys stay");
    // Not a JWT, and no API keys configured: refused as an unknown key.
    let plain = auth.admit(&headers(&[("x-api-key", "k")]), None).expect_err("not a key here");
    assert_eq!(plain.reason, "unknown_key");
}

#[test]
fn a_keys_message_budget_is_shared_by_its_sessions() {
    let file = format!("slow {} - 2\nfree {} 3 -\n", digest("s-key"), digest("f-key"));
    let auth = Auth::new(Some(&file), vec![]).expect("valid file");
    let one = auth.admit(&headers(&[("x-api-key", "s-key")]), None).expect("admitted");
    let two = auth.admit(&headers(&[("x-api-key", "s-key")]), None).expect("no session limit");
    // A burst of twice the rate, across both sessions, then refusals.
    let allowed =
        (0..3).filter(|_| one.allow_message().is_ok()).count() + (0..3).filter(|_| two.allow_message().is_ok()).count();
    assert_eq!(allowed, 4);
    let refusal = one.allow_message().expect_err("spent");
    assert_eq!((refusal.code, refusal.reason), (close_code::RATE_LIMITED, ErrorCode::KeyRate));
    let free = auth.admit(&headers(&[("x-api-key", "f-key")]), None).expect("admitted");
    assert!((0..1000).all(|_| free.allow_message().is_ok()), "no rate: no limit");
    assert!(Auth::new(Some(&format!("a {} 1 0\n", digest("k"))), vec![]).is_err(), "a zero rate is refused");
    let mut bucket = super::message_bucket(10);
    let start = Instant::now();
    assert_eq!((0..30).filter(|_| bucket.take(start)).count(), 20, "bursts of two seconds' worth");
    assert!(bucket.take(start + std::time::Duration::from_millis(150)), "refills at the rate");
}

#[test]
fn a_bad_keys_file_names_its_line() {
    let error = Auth::new(Some("ok x\n"), vec![]).expect_err("bad digest");
    assert_eq!(error.line, 1);
    let twice = format!("a {d}\nb {d}\n", d = digest("k"));
    assert_eq!(Auth::new(Some(&twice), vec![]).expect_err("duplicate").line, 2);
    assert!(Auth::new(Some(&format!("a {} many\n", digest("k"))), vec![]).is_err());
}

#[test]
fn keys_take_named_options_and_a_scope() {
    let file = format!(
        "web {} sessions=1 rate=2 agents=bank/triage,shop/*\nold {} 3 -\nall {}\n",
        digest("w-key"),
        digest("o-key"),
        digest("a-key")
    );
    let auth = Auth::new(Some(&file), vec![]).expect("valid file");
    let web = auth.admit(&headers(&[("x-api-key", "w-key")]), None).expect("admitted");
    assert!(web.allow_agent("bank", "triage").is_ok() && web.allow_agent("shop", "cart").is_ok());
    let refusal = web.allow_agent("bank", "banking").expect_err("outside its scope");
    assert_eq!((refusal.code, refusal.reason), (close_code::NOT_EXPOSED, ErrorCode::AgentNotAllowed));
    assert!(refusal.message.contains("\"web\" may not reach bank/banking"), "{}", refusal.message);
    assert!(refusal.message.contains("bank/triage, shop/*"), "says what it may reach: {}", refusal.message);
    assert!(web.allow_namespace("bank").is_ok() && web.allow_namespace("evil").is_err());
    assert_eq!(auth.admit(&headers(&[("x-api-key", "w-key")]), None).expect_err("sessions=1").reason, "key_sessions");
    assert_eq!((0..5).filter(|_| web.allow_message().is_ok()).count(), 4, "rate=2: bursts of 4");
    let old = auth.admit(&headers(&[("x-api-key", "o-key")]), None).expect("the positional form");
    assert!(old.allow_agent("evil", "anything").is_ok(), "no agents= reaches every agent");
    assert!(auth.admit(&headers(&[("x-api-key", "a-key")]), None).expect("no options").scope.is_unrestricted());

    for (line, why) in [
        (format!("x {} agents=triage", digest("k")), "not an agent pattern"),
        (format!("x {} color=red", digest("k")), "unknown option"),
        (format!("x {} rate=0", digest("k")), "at least 1"),
        (format!("x {} sessions=2 5", digest("k")), "not an option"),
        (format!("x {} 1 2 3", digest("k")), "not an option"),
    ] {
        let error = Auth::new(Some(&line), vec![]).expect_err(why);
        assert!(error.to_string().contains(why), "{line}: {error}");
    }
}

#[test]
fn a_tokens_agents_claim_scopes_it_and_subjects_have_their_own_limits() {
    let (key, jwks) = jwt_key(4, "k1");
    let jwt = Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into())
        .expect("jwks")
        .with_agents_claim("switchboard_agents".into(), false);
    let limits = SubjectLimits { max_sessions: Some(2), max_messages_per_second: Some(1) };
    let auth = Auth::new(None, vec![]).expect("auth").with_jwt(Arc::new(jwt), limits);
    let with = |agents: serde_json::Value, sub: &str| {
        let mut c = claims("https://idp.example", "switchboard", 300);
        c["sub"] = sub.into();
        if !agents.is_null() {
            c["switchboard_agents"] = agents;
        }
        token(&key, "k1", c)
    };
    let listed = auth.admit(&headers(&[]), Some(&with(serde_json::json!(["bank/triage"]), "ada"))).expect("valid");
    assert!(listed.allow_agent("bank", "triage").is_ok());
    let refusal = listed.allow_agent("shop", "triage").expect_err("not listed");
    assert!(refusal.message.contains("subject \"ada\" may not reach shop/triage"), "{}", refusal.message);
    let spaced = auth.admit(&headers(&[]), Some(&with("bank/* shop/cart".into(), "bob"))).expect("a string");
    assert!(spaced.allow_agent("bank", "idv").is_ok() && spaced.allow_agent("shop", "cart").is_ok());
    assert!(spaced.allow_agent("shop", "till").is_err());
    let bare = auth.admit(&headers(&[]), Some(&with(serde_json::Value::Null, "cy"))).expect("no claim");
    assert!(bare.scope.is_unrestricted(), "without the claim, as before");
    for (agents, why) in [
        (serde_json::json!(["triage"]), "not an agent pattern"),
        (serde_json::json!([7]), "non-string"),
        (serde_json::json!({"bank": "*"}), "not a list"),
    ] {
        let refusal = auth.admit(&headers(&[]), Some(&with(agents, "dee"))).expect_err(why);
        assert_eq!(refusal.reason, "invalid_token");
        assert!(refusal.message.contains(why), "{}", refusal.message);
    }

    // Two sessions per subject; the third is refused while the first two live.
    let second = auth.admit(&headers(&[]), Some(&with(serde_json::json!(["bank/*"]), "ada"))).expect("second");
    let third = auth.admit(&headers(&[]), Some(&with(serde_json::json!(["bank/*"]), "ada"))).expect_err("third");
    assert_eq!((third.code, third.reason), (close_code::TOO_MANY_SESSIONS, ErrorCode::KeySessions));
    assert!(third.message.contains("subject \"ada\""), "{}", third.message);
    // One budget across the subject's sessions: 1 a second, bursts of 2.
    assert_eq!(
        [&listed, &second].iter().flat_map(|a| [a.allow_message(), a.allow_message()]).filter(Result::is_ok).count(),
        2
    );
    assert_eq!(second.allow_message().expect_err("spent").reason, "key_rate");
    assert!(bare.allow_message().is_ok(), "another subject's budget");
    drop(second);
    assert!(auth.admit(&headers(&[]), Some(&with(serde_json::Value::Null, "ada"))).is_ok(), "a slot came back");

    let strict = Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into())
        .expect("jwks")
        .with_agents_claim("switchboard_agents".into(), true);
    let strict = Auth::new(None, vec![]).expect("auth").with_jwt(Arc::new(strict), SubjectLimits::default());
    let refusal = strict.admit(&headers(&[]), Some(&with(serde_json::Value::Null, "eve"))).expect_err("required");
    assert!(refusal.message.contains("no switchboard_agents claim"), "{}", refusal.message);
}

#[test]
fn a_subjects_entry_goes_with_its_last_session_once_its_budget_refilled() {
    let (key, jwks) = jwt_key(5, "k1");
    let jwt = Arc::new(Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into()).expect("jwks"));
    let unlimited = Auth::new(None, vec![]).expect("auth").with_jwt(jwt.clone(), SubjectLimits::default());
    let good = token(&key, "k1", claims("https://idp.example", "switchboard", 300));
    let held = unlimited.admit(&headers(&[]), Some(&good)).expect("admitted");
    assert_eq!(unlimited.live.lock().expect("lock").len(), 1);
    drop(held);
    assert!(unlimited.live.lock().expect("lock").is_empty(), "no session, no budget: nothing kept");

    let limited = Auth::new(None, vec![])
        .expect("auth")
        .with_jwt(jwt, SubjectLimits { max_sessions: None, max_messages_per_second: Some(1000) });
    let spender = limited.admit(&headers(&[]), Some(&good)).expect("admitted");
    spender.allow_message().expect("one message");
    drop(spender);
    assert_eq!(
        limited.live.lock().expect("lock").len(),
        1,
        "a spent budget outlives the session (no reset by reconnecting)"
    );
    let again = limited.admit(&headers(&[]), Some(&good)).expect("admitted again");
    assert!(Arc::ptr_eq(
        again.rate.as_ref().expect("rate"),
        limited.live.lock().expect("lock")["jwt:user-7"].rate.as_ref().expect("rate")
    ));
}

#[test]
fn only_a_credential_marked_for_tests_reaches_candidate_pods() {
    let file = format!("jobs {} candidates=test\nweb {} records=read agents=*\n", digest("j-key"), digest("w-key"));
    let auth = Auth::new(Some(&file), vec![]).expect("valid file");
    let jobs = auth.admit(&headers(&[("x-api-key", "j-key")]), None).expect("admitted");
    assert!(jobs.allow_candidates().is_ok());
    let web = auth.admit(&headers(&[("x-api-key", "w-key")]), None).expect("admitted");
    let refusal = web.allow_candidates().expect_err("not marked");
    assert_eq!((refusal.code, refusal.reason), (close_code::NOT_EXPOSED, ErrorCode::CandidateNotAllowed));
    assert!(refusal.message.contains("\"web\"") && refusal.message.contains("candidates=test"), "{}", refusal.message);
    // A records reader names the namespaces it reads.
    let unscoped = Auth::new(Some(&format!("x {} records=read", digest("k"))), vec![]).expect_err("no agents=");
    assert!(unscoped.to_string().contains("records=read needs agents="), "{unscoped}");
    let error = Auth::new(Some(&format!("x {} candidates=yes", digest("k"))), vec![]).expect_err("one access");
    assert!(error.to_string().contains("`candidates=test`"), "{error}");
    // Without credentials no client may test (a candidate runs a spec nobody approved yet),
    // unless the gateway opens test sessions (--open-test-sessions; local mode).
    let closed = Auth::new(None, vec![]).expect("auth").admit(&headers(&[]), None).expect("admitted");
    let refusal = closed.allow_candidates().expect_err("no credential, no test sessions");
    assert!(refusal.message.contains("--open-test-sessions"), "{}", refusal.message);
    let open = Auth::new(None, vec![]).expect("auth").with_open_tests();
    assert!(open.admit(&headers(&[]), None).expect("admitted").allow_candidates().is_ok());
    // With credentials it changes nothing: the key decides.
    let keyed = Auth::new(Some(&file), vec![]).expect("keys").with_open_tests();
    let web = keyed.admit(&headers(&[("x-api-key", "w-key")]), None).expect("admitted");
    assert!(web.allow_candidates().is_err());

    // A token, by the candidates scope (`scope` or `scp`), configurable.
    let (key, jwks) = jwt_key(6, "k1");
    let jwt = Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into()).expect("jwks");
    let auth = Auth::new(None, vec![]).expect("auth").with_jwt(Arc::new(jwt), SubjectLimits::default());
    let with = |scope: serde_json::Value| {
        let mut c = claims("https://idp.example", "switchboard", 300);
        c["scope"] = scope;
        token(&key, "k1", c)
    };
    let tester = auth.admit(&headers(&[]), Some(&with("openid switchboard:candidates".into()))).expect("valid");
    assert!(tester.allow_candidates().is_ok());
    let reader = auth.admit(&headers(&[]), Some(&with("switchboard:records:read".into()))).expect("valid");
    assert!(reader.allow_candidates().expect_err("no scope").message.contains("token's subject"));
    let custom = Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into())
        .expect("jwks")
        .with_candidates_scope("ci:test".into());
    let custom = Auth::new(None, vec![]).expect("auth").with_jwt(Arc::new(custom), SubjectLimits::default());
    assert!(custom.admit(&headers(&[]), Some(&with("ci:test".into()))).expect("valid").allow_candidates().is_ok());
    assert!(
        custom
            .admit(&headers(&[]), Some(&with("switchboard:candidates".into())))
            .expect("valid")
            .allow_candidates()
            .is_err()
    );
}

#[test]
fn credentials_that_set_no_session_cap_get_the_default_one() {
    let file = format!("web {}\nbatch {} sessions=-\n", digest("w-key"), digest("b-key"));
    let auth = Auth::new(Some(&file), vec![]).expect("valid file");
    let web: Vec<_> = (0..super::DEFAULT_KEY_SESSIONS)
        .map(|n| auth.admit(&headers(&[("x-api-key", "w-key")]), None).unwrap_or_else(|e| panic!("{n}: {e}")))
        .collect();
    let refusal = auth.admit(&headers(&[("x-api-key", "w-key")]), None).expect_err("past the default");
    assert_eq!((refusal.code, refusal.reason), (close_code::TOO_MANY_SESSIONS, ErrorCode::KeySessions));
    drop(web);
    assert!(auth.admit(&headers(&[("x-api-key", "w-key")]), None).is_ok(), "slots come back");
    let batch: Vec<_> = (0..super::DEFAULT_KEY_SESSIONS + 1)
        .map(|_| auth.admit(&headers(&[("x-api-key", "b-key")]), None).expect("sessions=-: no cap"))
        .collect();
    assert_eq!(batch.len(), super::DEFAULT_KEY_SESSIONS + 1);

    let two = Auth::new(Some(&file), vec![]).expect("valid file").with_key_sessions(Some(2));
    let _held: Vec<_> = (0..2).map(|_| two.admit(&headers(&[("x-api-key", "w-key")]), None).expect("within")).collect();
    assert!(two.admit(&headers(&[("x-api-key", "w-key")]), None).is_err(), "the gateway's own default");
    let none = Auth::new(Some(&file), vec![]).expect("valid file").with_key_sessions(None);
    let _held: Vec<_> =
        (0..3000).map(|_| none.admit(&headers(&[("x-api-key", "w-key")]), None).expect("no cap")).collect();

    // A JWT subject: ten live sessions unless set otherwise.
    let (key, jwks) = jwt_key(5, "k1");
    let jwt = Arc::new(Jwt::new(&jwks, "https://idp.example".into(), "switchboard".into()).expect("jwks"));
    let auth = Auth::new(None, vec![]).expect("auth").with_jwt(jwt, SubjectLimits::default());
    let bearer = format!("Bearer {}", token(&key, "k1", claims("https://idp.example", "switchboard", 300)));
    let held: Vec<_> = (0..super::DEFAULT_SUBJECT_SESSIONS)
        .map(|_| auth.admit(&headers(&[("authorization", &bearer)]), None).expect("within"))
        .collect();
    let refusal = auth.admit(&headers(&[("authorization", &bearer)]), None).expect_err("an eleventh");
    assert_eq!(refusal.reason, ErrorCode::KeySessions);
    assert!(refusal.message.contains("already has its 10 sessions open"), "{}", refusal.message);
    drop(held);
}

#[test]
fn a_key_entry_says_what_its_sessions_are_held_with_and_whether_it_reads_records() {
    let file = format!(
        "web {} sessions=2 rate=5 records=read agents=bank/*\nbatch {} sessions=-\njobs {} candidates=test\n",
        digest("w-key"),
        digest("b-key"),
        digest("j-key")
    );
    let keys = keys::parse(&file).expect("valid file");
    let entry = |key: &str| {
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        keys.get(&digest).cloned().expect("listed")
    };
    let web = entry("w-key");
    assert_eq!(web.name(), "web");
    assert!(web.records_scope().is_some(), "records=read");
    let held = web.session(Some(7));
    assert_eq!((held.name.as_str(), held.max, held.rate.is_some(), held.scope.1), ("web", Some(2), true, false));
    let batch = entry("b-key").session(Some(7));
    assert_eq!((batch.max, batch.rate.is_none()), (None, true), "sessions=-: no cap, whatever the default");
    let jobs = entry("j-key");
    assert!(jobs.records_scope().is_none(), "no records=read");
    let jobs = jobs.session(Some(7));
    assert_eq!((jobs.max, jobs.scope.1), (Some(7), true), "the default cap; candidates=test");
}
