//! Who reads the conversation record, what becomes of sessions whose client went, and the
//! summary: a JWT with the records scope reads the record of the namespaces its agents claim
//! reaches (and nothing without the scope); a session whose client vanished and never came
//! back within the resume window is marked `abandoned` and reported to the webhook; a model
//! (the real Bedrock client against the simulator) summarises each ended session from its
//! redacted record, and the report carries it.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::{Auth, Jwt, SubjectLimits};
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_record::store::SessionRecord;
use switchboard_record::summary::SummaryConfig;
use switchboard_record::webhook::{Report, WebhookConfig};
use switchboard_record::{RecordConfig, Recorder, Store};
use switchboard_sim::{Script, SimConfig, Simulator, banking_script};

use crate::client::{Client, get_with};
use crate::fleet::Fleet;
use crate::record::{SECRETS, conversation, receiver, recorder, recorder_with, session_id};

const ISSUER: &str = "https://idp.bank.example";
const AUDIENCE: &str = "switchboard";

/// An identity provider's Ed25519 key: it signs tokens; its JWKS is what the gateway trusts.
struct Idp {
    key: jsonwebtoken::EncodingKey,
    jwks: String,
}

impl Idp {
    fn new() -> Self {
        use aws_lc_rs::signature::KeyPair as _;
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&rng).expect("a key");
        let pair = aws_lc_rs::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("the key reads back");
        let hex: String = pair.public_key().as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let public: switchboard_core::grant::GatewayPublicKey = hex.parse().expect("a public key");
        let mut jwk = public.jwk();
        jwk["kid"] = "idp-1".into();
        let jwks = serde_json::json!({ "keys": [jwk] }).to_string();
        Self { key: jsonwebtoken::EncodingKey::from_ed_der(pkcs8.as_ref()), jwks }
    }

    /// A token for `sub` with these extra claims, expiring in `exp_in` seconds.
    fn token(&self, sub: &str, exp_in: i64, extra: serde_json::Value) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
        let mut claims = serde_json::json!({
            "sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": i64::try_from(now).expect("now") + exp_in,
        });
        if let (Some(claims), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
            claims.extend(extra.clone());
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some("idp-1".into());
        jsonwebtoken::encode(&header, &claims, &self.key).expect("signs")
    }
}

/// A short session (a greeting and one turn) at the default Agent; its id once closed.
async fn short_session(url: &str, token: &str) -> String {
    let bearer = format!("Bearer {token}");
    let mut client = Client::connect_with(url, &[("authorization", &bearer)]).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    client.say("Hello there").await;
    client.turn().await;
    client.send(&ClientMessage::Close {}).await;
    assert_eq!(client.closed().await.0, 1000);
    id
}

/// The record of `id` once its outcome is `outcome` (the writer batches; sweeps are timed).
async fn with_outcome(store: &Store, id: &str, outcome: &str) -> SessionRecord {
    for _ in 0..300 {
        if let Ok(Some(record)) = store.show(id).await
            && record.summary.outcome == outcome
        {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} was not recorded as {outcome} within 30 s: {:?}", store.show(id).await);
}

fn addr(fleet: &Fleet) -> std::net::SocketAddr {
    fleet.url.trim_start_matches("ws://").split('/').next().and_then(|a| a.parse().ok()).expect("addr")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_the_records_scope_reads_the_record_of_its_namespaces_only() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-jwt-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, stop) = recorder(store.clone(), None);
    let idp = Idp::new();
    let jwt = Jwt::new(&idp.jwks, ISSUER.into(), AUDIENCE.into())
        .expect("jwks")
        .with_agents_claim("switchboard_agents".into(), false);
    let auth = Auth::new(None, Vec::new()).expect("auth").with_jwt(Arc::new(jwt), SubjectLimits::default());
    let fleet = fleet(recorder, auth, GatewayConfig::default()).await;
    let caller = idp.token("caller-1", 300, serde_json::json!({ "switchboard_agents": ["bank/*"] }));
    let id = short_session(&fleet.url, &caller).await;
    with_outcome(&store, &id, "ended").await;

    let read = |token: String| {
        let addr = addr(&fleet);
        async move {
            let bearer = format!("Bearer {token}");
            let list = get_with(addr, "/v1/sessions", &[("authorization", &bearer)]).await;
            (list, bearer)
        }
    };
    // The bank's auditor: the scope, and the bank's namespace.
    let auditor = idp.token(
        "auditor",
        300,
        serde_json::json!({ "scope": "openid switchboard:records:read", "switchboard_agents": "bank/*" }),
    );
    let ((status, body), bearer) = read(auditor).await;
    assert_eq!((status, body.contains(&id)), (200, true), "{body}");
    let (status, body) = get_with(addr(&fleet), &format!("/v1/sessions/{id}"), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    let record: SessionRecord = serde_json::from_str(&body).expect("a session record");
    assert_eq!(record.summary.credential, "jwt:caller-1");
    // `scp` as an array (as some identity providers write it) works the same.
    let scp = idp.token(
        "auditor-2",
        300,
        serde_json::json!({ "scp": ["switchboard:records:read"], "switchboard_agents": ["*"] }),
    );
    let ((status, body), _) = read(scp).await;
    assert_eq!((status, body.contains(&id)), (200, true), "{body}");
    // The records scope without the agents claim reads nothing: a reader names what it reads.
    let unscoped = idp.token("auditor-3", 300, serde_json::json!({ "scope": "switchboard:records:read" }));
    let ((status, body), _) = read(unscoped).await;
    assert_eq!((status, body.contains("records_scope_missing")), (403, true), "{body}");
    // Another namespace's reader sees nothing of the bank's.
    let shop = idp.token(
        "shop-auditor",
        300,
        serde_json::json!({ "scope": "switchboard:records:read", "switchboard_agents": ["shop/*"] }),
    );
    let ((status, body), bearer) = read(shop).await;
    assert_eq!((status, body.contains(&id)), (200, false), "{body}");
    let (status, _) = get_with(addr(&fleet), &format!("/v1/sessions/{id}"), &[("authorization", &bearer)]).await;
    assert_eq!(status, 404);
    // A caller's own token (no scope) is refused, naming the scope it lacks.
    let ((status, body), _) = read(caller).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("records_not_allowed") && body.contains("switchboard:records:read"), "{body}");
    // An expired token, and one signed by another key, are not accepted.
    let expired = idp.token("auditor", -120, serde_json::json!({ "scope": "switchboard:records:read" }));
    let ((status, body), _) = read(expired).await;
    assert_eq!((status, body.contains("invalid_token")), (401, true), "{body}");
    let forged = Idp::new().token("auditor", 300, serde_json::json!({ "scope": "switchboard:records:read" }));
    let ((status, body), _) = read(forged).await;
    assert_eq!((status, body.contains("invalid_token")), (401, true), "{body}");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// The summary model: the simulator's echo ("You said: <the request's text>"), through the
/// real Bedrock client, so the summary shows exactly what the model was given.
pub(crate) async fn echo_summariser()
-> (switchboard_sim::SimHandle, (Arc<dyn switchboard_models::TextModel>, SummaryConfig)) {
    let sim = Simulator::start(SimConfig::new(Script::echo())).await.expect("simulator");
    let bedrock = BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path());
    let model = BedrockTextModel::connect(&bedrock).await.expect("a Bedrock client");
    // Room for the whole echo (a real summary is a few sentences).
    let config = SummaryConfig { max_tokens: 4000, max_chars: 16_000, ..SummaryConfig::new("amazon.nova-lite-v1:0") };
    (sim, (Arc::new(model), config))
}

async fn fleet(recorder: Arc<Recorder>, auth: Auth, config: GatewayConfig) -> Fleet {
    let script = banking_script().expect("script");
    Fleet::recording(&[], auth, config, ResumeStore::default(), script, Some(recorder)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_client_never_comes_back_is_abandoned_and_reported() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-abandoned-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (hook, mut posts) = receiver().await;
    let webhook = WebhookConfig {
        url: hook.parse().expect("url"),
        secret: b"sixteen or more bytes".to_vec(),
        retry: Default::default(),
    };
    // A 1 s resume window; parked sessions are given up 3 s after they parked.
    let config = RecordConfig { abandon_after: Duration::from_secs(3), ..RecordConfig::default() };
    let (recorder, stop) = recorder_with(store.clone(), Some(webhook), config, None);
    let gateway = GatewayConfig { resume_window: Duration::from_secs(1), ..GatewayConfig::default() };
    let fleet = fleet(recorder, Auth::default(), gateway).await;

    // A client that says hello and vanishes (no close frame: its connection just drops).
    let mut client = Client::connect(&fleet.url).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    client.say("Hello there").await;
    client.turn().await;
    drop(client);
    let parked = with_outcome(&store, &id, "parked").await;
    assert!(parked.summary.ended_at.is_some(), "{:?}", parked.summary);

    // A session that ends normally meanwhile is left as it is.
    let mut other = Client::connect(&fleet.url).await;
    other.send(&ClientMessage::SessionStart(Default::default())).await;
    let other_hello = other.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let other_id = session_id(&other_hello);
    other.send(&ClientMessage::Close {}).await;
    assert_eq!(other.closed().await.0, 1000);

    let abandoned = with_outcome(&store, &id, "abandoned").await;
    assert_eq!(abandoned.summary.turns, 1, "{:?}", abandoned.summary);
    // The reports: the ended session's and the abandoned one's (each refused once, then
    // delivered: the receiver answers its very first POST 503).
    let mut reports = std::collections::HashMap::new();
    while reports.len() < 2 {
        let (_, body) = tokio::time::timeout(Duration::from_secs(30), posts.recv())
            .await
            .expect("the reports in time")
            .expect("a report");
        let report: Report = serde_json::from_str(&body).expect("a report");
        reports.insert(report.session_id.clone(), report);
    }
    assert_eq!(reports[&id].outcome, "abandoned");
    assert_eq!(reports[&id].turns, 1);
    assert_eq!(reports[&other_id].outcome, "ended");
    assert_eq!(with_outcome(&store, &other_id, "ended").await.summary.outcome, "ended");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_summarises_each_ended_session_from_its_redacted_record() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-summary-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (hook, mut posts) = receiver().await;
    let webhook = WebhookConfig {
        url: hook.parse().expect("url"),
        secret: b"sixteen or more bytes".to_vec(),
        retry: Default::default(),
    };
    let (_sim, summary) = echo_summariser().await;
    let (recorder, stop) = recorder_with(store.clone(), Some(webhook), RecordConfig::default(), Some(summary));
    let fleet = fleet(recorder.clone(), Auth::default(), GatewayConfig::default()).await;
    let id = conversation(&fleet.url, &[], || async {}).await.id;

    // The report waits for the summary (the receiver refuses the first POST: take the retry).
    let mut body = String::new();
    for _ in 0..2 {
        let post = tokio::time::timeout(Duration::from_secs(30), posts.recv()).await.expect("a report in time");
        body = post.expect("a report").1;
    }
    let report: Report = serde_json::from_str(&body).expect("a report");
    let summary = report.summary.clone().expect("the report carries a summary");
    let stored = with_outcome(&store, &id, "ended").await.summary.summary.expect("the record keeps the summary");
    assert_eq!(summary, stored);
    // What the model read: who said what at which Agent, the transfers and tools, the
    // outcome; with every secret already redacted (the idv Agent's account and sort-code
    // rules, the built-in card, e-mail and phone detectors).
    for needle in [
        "You said: Agent bank/triage: Hello, you're through to Example Bank.",
        "\nCaller: Hello, I'm [redacted:email], call me on [redacted:phone], my number is [redacted:card]\n",
        "[transferred from triage to idv",
        "[bank/idv used the tool perform_idv_check]",
        "[redacted:account]",
        "[bank/banking used the tool check_balance]",
        "Agent bank/banking: ",
        "[the session is ended]",
    ] {
        assert!(summary.contains(needle), "{needle:?} in the summary: {summary}");
    }
    for secret in SECRETS {
        assert!(!summary.contains(secret), "{secret} in the summary: {summary}");
    }
    let written = r#"switchboard_gateway_record_summaries_total{outcome="written"} 1"#;
    assert!(recorder.metrics.render().contains(written), "{}", recorder.metrics.render());
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}
