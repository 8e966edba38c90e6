//! Unit tests of signing and checking the session grant.

use super::*;

/// Made with `openssl genpkey -algorithm ed25519`; the public key from `openssl pkey -pubout`.
const PEM: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIBBK5UyYk00FD9JpvktXLCh348DN1Am+CxGQbJ+h0CLg\n-----END PRIVATE KEY-----\n";
const PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAlN+i9Mai50149Xk6kb562RmWWoz/qZzZXqf3eUN2WVA=\n-----END PUBLIC KEY-----\n";
const PUBLIC_HEX: &str = "94dfa2f4c6a2e74d78f5793a91be7ad919965a8cffa99cd95ea7f77943765950";

fn signer(byte: u8) -> GatewaySigner {
    GatewaySigner::from_seed(&[byte; 32])
}

#[test]
fn a_key_round_trips_through_pem() {
    let key = GatewaySigner::from_seed(&[9; 32]);
    let pem = key.to_pem().expect("pem");
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert_eq!(GatewaySigner::from_pem(&pem).expect("reads back").public(), key.public());
}

fn context() -> SessionContext {
    SessionContext {
        session_id: "s-1".into(),
        namespace: "bank".into(),
        agent: "banking".into(),
        issued_at_ms: 1_000_000,
        nonce: "n-1".into(),
        carried: Carried {
            memory: [("verifiedUser".to_owned(), serde_json::json!({"name": "Ada"}))].into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn a_signed_context_verifies_for_its_agent_while_fresh() {
    let signed = signer(7).sign(&context());
    let public = signer(7).public();
    assert_eq!(public.verify(&signed, "bank", "banking", 1_000_000 + MAX_AGE_MS), Ok(context()));
    assert_eq!(
        public.verify(&signed, "bank", "idv", 1_000_000),
        Err(GrantError::WrongAgent { granted: "bank/banking".into(), serving: "bank/idv".into() })
    );
    assert_eq!(
        public.verify(&signed, "evil", "banking", 1_000_000),
        Err(GrantError::WrongAgent { granted: "bank/banking".into(), serving: "evil/banking".into() }),
        "an Agent of the same name in another namespace"
    );
    assert_eq!(
        public.verify(&signed, "bank", "banking", 1_000_000 + MAX_AGE_MS + 1),
        Err(GrantError::Stale { age_ms: MAX_AGE_MS + 1 })
    );
}

#[test]
fn a_seal_opens_with_its_key_only_and_for_its_message_only() {
    let seal = signer(7).seal(b"parked");
    assert!(signer(7).public().opens(b"parked", &seal));
    assert!(!signer(7).public().opens(b"parkeD", &seal));
    assert!(!signer(8).public().opens(b"parked", &seal));
    assert!(!signer(7).public().opens(b"parked", &seal[..63]));
}

#[test]
fn another_key_or_a_changed_payload_is_refused() {
    let signed = signer(7).sign(&context());
    assert_eq!(signer(8).public().verify(&signed, "bank", "banking", 1_000_000), Err(GrantError::BadSignature));
    let forged = SignedContext { payload: signed.payload.replace("Ada", "Eve"), signature: signed.signature.clone() };
    assert_eq!(signer(7).public().verify(&forged, "bank", "banking", 1_000_000), Err(GrantError::BadSignature));
    let garbage = SignedContext { payload: signed.payload, signature: "zz".into() };
    assert_eq!(signer(7).public().verify(&garbage, "bank", "banking", 1_000_000), Err(GrantError::BadSignature));
}

#[test]
fn keys_read_from_pem_and_hex_agree_and_bad_ones_say_why() {
    let signer = GatewaySigner::from_pem(PEM).expect("PKCS#8 PEM");
    assert_eq!(signer.public().to_string(), PUBLIC_HEX);
    assert_eq!(PUBLIC_PEM.parse::<GatewayPublicKey>(), Ok(signer.public()));
    assert_eq!(PUBLIC_HEX.parse::<GatewayPublicKey>(), Ok(signer.public()));
    assert!(!format!("{signer:?}").contains("MC4C"), "the private key never prints");
    assert!(matches!(GatewaySigner::from_pem("not a key"), Err(GrantError::BadKey(_))));
    assert!(matches!("abcd".parse::<GatewayPublicKey>(), Err(GrantError::BadKey(m)) if m.contains("2 bytes")));
    let huge = SignedContext { payload: "x".repeat(MAX_PAYLOAD_BYTES + 1), signature: String::new() };
    assert_eq!(signer.public().verify(&huge, "bank", "banking", 0), Err(GrantError::TooLarge(MAX_PAYLOAD_BYTES + 1)));
}

/// Every field of a grant set, as a gateway of each version writes it.
fn full_context() -> SessionContext {
    let handoff = HandoffContext {
        from_agent: "idv".into(),
        kind: crate::handoff::HandoffKind::Transfer,
        reason: "balance".into(),
        last_user_message: Some("my balance".into()),
        intent: None,
        verified_user: Some(serde_json::json!({"name": "Ada"})),
        workflow_state: WorkflowSnapshot { agent: "idv".into(), node: "done".into(), ..Default::default() },
        return_to: Some("triage".into()),
        status: None,
        summary: None,
        memory: [("verifiedUser".to_owned(), serde_json::json!({"name": "Ada"}))].into(),
        history: Vec::new(),
    };
    let base = context();
    let carried = Carried {
        history: vec![HistoryTurn { role: crate::protocol::TranscriptRole::User, text: "hello".into() }],
        handoff: Some(handoff),
        return_to: Some("triage".into()),
        workflow: Some(WorkflowSnapshot { agent: "banking".into(), node: "start".into(), ..Default::default() }),
        summary: "user: earlier".into(),
        ..base.carried.clone()
    };
    SessionContext {
        carried,
        identity: Some("eyJ.assertion".into()),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        pod: Some("10.0.0.7".into()),
        ..base
    }
}

/// The grant's JSON as gateways before the carried context had its own type wrote it,
/// byte for byte (field order included).
const FULL_JSON: &str = concat!(
    r#"{"sessionId":"s-1","namespace":"bank","agent":"banking","issuedAtMs":1000000,"nonce":"n-1","#,
    r#""memory":{"verifiedUser":{"name":"Ada"}},"history":[{"role":"user","text":"hello"}],"#,
    r#""handoff":{"from_agent":"idv","kind":"transfer","reason":"balance","last_user_message":"my balance","#,
    r#""verified_user":{"name":"Ada"},"workflow_state":{"agent":"idv","node":"done","visited":[]},"#,
    r#""return_to":"triage","memory":{"verifiedUser":{"name":"Ada"}},"history":[]},"#,
    r#""returnTo":"triage","workflow":{"agent":"banking","node":"start","visited":[]},"#,
    r#""identity":"eyJ.assertion","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","#,
    r#""summary":"user: earlier","pod":"10.0.0.7"}"#
);

#[test]
fn a_grant_is_written_byte_for_byte_as_before_and_reads_back() {
    let json = serde_json::to_string(&full_context()).expect("serialises");
    assert_eq!(json, FULL_JSON);
    assert_eq!(serde_json::from_str::<SessionContext>(FULL_JSON).expect("reads"), full_context());
    let bare = r#"{"sessionId":"s-1","agent":"banking","issuedAtMs":1000000,"nonce":"n-1"}"#;
    let read: SessionContext = serde_json::from_str(bare).expect("an older gateway's grant: no optional field");
    assert_eq!(read, SessionContext { namespace: String::new(), carried: Carried::default(), ..context() });
    assert_eq!(
        serde_json::to_string(&read).expect("serialises"),
        bare.replace(r#""agent""#, r#""namespace":"","agent""#)
    );
}

#[test]
fn what_a_grant_carries_reads_as_one_carried_context_whatever_the_key_order() {
    let full = full_context();
    let reordered = serde_json::json!({
        "summary": "user: earlier", "pod": "10.0.0.7", "workflow": full.carried.workflow,
        "returnTo": "triage", "handoff": full.carried.handoff, "history": full.carried.history,
        "memory": full.carried.memory, "nonce": "n-1", "issuedAtMs": 1_000_000, "agent": "banking",
        "namespace": "bank", "sessionId": "s-1", "identity": "eyJ.assertion",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    });
    assert_eq!(serde_json::from_value::<SessionContext>(reordered).expect("reads"), full);
    let carried: Carried = serde_json::from_str(FULL_JSON).expect("the carried part of a grant");
    assert_eq!(carried, full.carried, "the grant's own fields are not the carried context's");
    let alone = serde_json::to_value(&full.carried).expect("serialises");
    let whole = serde_json::to_value(&full).expect("serialises");
    for (key, value) in alone.as_object().expect("an object") {
        assert_eq!(whole.get(key), Some(value), "{key} is on the wire as the carried context writes it");
    }
}

/// A grant carrying a call that started at `started` (ms since the epoch), issued at
/// 1 000 000 000 ms.
fn with_call_start(started: u64) -> SignedContext {
    let mut context = context();
    context.issued_at_ms = 1_000_000_000;
    context.carried.call_started_at_ms = Some(started);
    signer(7).sign(&context)
}

fn call_start_read(started: u64) -> Result<Option<u64>, GrantError> {
    let issued = 1_000_000_000;
    signer(7)
        .public()
        .verify(&with_call_start(started), "bank", "banking", issued)
        .map(|c| c.carried.call_started_at_ms)
}

#[test]
fn a_carried_call_start_is_written_after_the_older_fields_and_reads_back() {
    let mut context = full_context();
    context.carried.call_started_at_ms = Some(999_000);
    let json = serde_json::to_string(&context).expect("serialises");
    assert_eq!(json, FULL_JSON.replace(r#""pod":"10.0.0.7"}"#, r#""pod":"10.0.0.7","callStartedAtMs":999000}"#));
    assert_eq!(serde_json::from_str::<SessionContext>(&json).expect("reads"), context);
}

#[test]
fn a_carried_call_start_is_kept_bounded_or_refused_when_in_the_future() {
    let issued = 1_000_000_000;
    assert_eq!(call_start_read(issued - 90_000), Ok(Some(issued - 90_000)), "a call 90 s old keeps its start");
    assert_eq!(call_start_read(issued + 2_000), Ok(Some(issued)), "a little ahead (clocks): read as the grant's time");
    assert_eq!(
        call_start_read(issued + MAX_AGE_MS + 1),
        Err(GrantError::CallStart { ahead_ms: MAX_AGE_MS + 1 }),
        "a start after the grant by more than clocks disagree is refused"
    );
    assert_eq!(call_start_read(1), Ok(Some(issued - MAX_CALL_AGE_MS)), "an absurdly old start is read as a day ago");
    let none = signer(7).sign(&SessionContext { issued_at_ms: issued, ..context() });
    assert_eq!(
        signer(7).public().verify(&none, "bank", "banking", issued).map(|c| c.carried.call_started_at_ms),
        Ok(None)
    );
}
