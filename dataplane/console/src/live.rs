//! What the console's live view asks the gateway for, in local mode and behind `switchboard
//! gateway --console` alike (both behind the gateway's own admission, as `/v1/agents`):
//!
//! - `GET /v1/console/price?model=<id>`: the model's price from the record's price table
//!   ([`switchboard_record::Prices`]: `--record-price` over the defaults), so the
//!   page shows each live turn's cost as the record will count it; 404 `unpriced` for a
//!   model the table does not know.
//! - `POST /v1/console/redact` `{"agents": [...], "values": {key: value}}`: the values
//!   redacted as the record redacts a session that reached those agents (built-in
//!   detectors, the gateway's `--record-redact` rules, each Agent's `spec.record.redact`).
//!   The memory view shows only what this answers.
//!
//! Why the gateway redacts and not the page: the rules and detectors are the gateway's
//! (one implementation, the record's own, not a second one in JavaScript that would drift
//! from Rust's regex dialect and the Luhn check), and the session's own messages stay as
//! they are for any client program — the page is one client among others, and asks.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use switchboard_crds::agent::RedactRule;
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Scope;
use switchboard_record::{Prices, Redactor};

/// The most bytes a redaction request may carry (memory values are bounded by the runtime
/// far below this).
pub const REDACT_BODY_MAX: usize = 256 * 1024;
/// The most agents one redaction request may name (a session reaches a few).
pub const AGENTS_MAX: usize = 32;
/// The most values one redaction request may carry.
pub const VALUES_MAX: usize = 256;

/// The console's live routes on `gateway`.
pub fn routes(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/console/price", get(price))
        .route("/v1/console/redact", post(redact).layer(DefaultBodyLimit::max(REDACT_BODY_MAX)))
        .with_state(gateway)
}

#[derive(Deserialize)]
struct Credential {
    access_token: Option<String>,
}

#[derive(Deserialize)]
struct PriceQuery {
    model: String,
    access_token: Option<String>,
}

/// A model's price, USD per million tokens.
#[derive(Serialize)]
struct PriceView {
    model: String,
    input: f64,
    output: f64,
    speech_input: f64,
    speech_output: f64,
}

fn refuse(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "code": code, "message": message.into() }))).into_response()
}

async fn price(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Query(query): Query<PriceQuery>) -> Response {
    if let Err(refused) = crate::admission::admit(&gateway, &headers, query.access_token.as_deref()) {
        return refused.into_response();
    }
    if query.model.is_empty() || query.model.len() > 256 {
        return refuse(StatusCode::BAD_REQUEST, "bad_request", "model: a model id of 1 to 256 characters");
    }
    let defaults;
    let prices = match &gateway.record {
        Some(record) => &record.prices,
        None => {
            defaults = Prices::default();
            &defaults
        }
    };
    match prices.of(&query.model) {
        Some(p) => Json(PriceView {
            model: query.model,
            input: p.input,
            output: p.output,
            speech_input: p.speech_input,
            speech_output: p.speech_output,
        })
        .into_response(),
        None => {
            refuse(StatusCode::NOT_FOUND, "unpriced", format!("the price table has no price for {:?}", query.model))
        }
    }
}

/// What the page sends to have memory values redacted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactRequest {
    /// The agents the session reached (`name` or `namespace/name`).
    pub agents: Vec<String>,
    /// The values, by memory key.
    pub values: BTreeMap<String, serde_json::Value>,
}

async fn redact(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    Query(credential): Query<Credential>,
    body: Result<Json<RedactRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let scope = match crate::admission::admit(&gateway, &headers, credential.access_token.as_deref()) {
        Ok(scope) => scope,
        Err(refused) => return refused.into_response(),
    };
    let Json(request) = match body {
        Ok(body) => body,
        Err(e) => return refuse(e.status(), "bad_request", e.body_text()),
    };
    if request.agents.len() > AGENTS_MAX || request.values.len() > VALUES_MAX {
        return refuse(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("at most {AGENTS_MAX} agents and {VALUES_MAX} values per request"),
        );
    }
    let rules = rules_of(&gateway, &scope, &request.agents);
    let redactor: Arc<Redactor> = match &gateway.record {
        Some(record) => record.redactor_for(&rules),
        None => Arc::new(
            Redactor::default()
                .extended(rules.iter().map(|r| (r.name.as_str(), r.pattern.as_str())))
                .unwrap_or_default(),
        ),
    };
    let mut values = request.values;
    for value in values.values_mut() {
        redactor.value(value);
    }
    Json(serde_json::json!({ "values": values })).into_response()
}

/// The redaction rules of `agents` (each `namespace/name`, or a bare name: every Agent of
/// that name, so a name several namespaces share gets all their rules), of those the
/// credential may reach; sorted and without repeats.
fn rules_of(gateway: &Gateway, scope: &Scope, agents: &[String]) -> Vec<RedactRule> {
    let directory = gateway.directory.borrow();
    let mut rules: Vec<RedactRule> = directory
        .table()
        .routes
        .iter()
        .filter(|route| scope.allows_agent(&route.namespace, &route.name))
        .filter(|route| {
            agents.iter().any(|asked| match asked.split_once('/') {
                Some((namespace, name)) => namespace == route.namespace && name == route.name,
                None => asked == &route.name,
            })
        })
        .flat_map(|route| route.redact.iter().cloned())
        .collect();
    rules.sort_by(|a, b| (&a.name, &a.pattern).cmp(&(&b.name, &b.pattern)));
    rules.dedup();
    rules
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use switchboard_core::grant::GatewaySigner;
    use switchboard_crds::Mode;
    use switchboard_crds::routing::{Route, RoutingTable};
    use switchboard_gateway::GatewayConfig;
    use switchboard_gateway::auth::Auth;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn route(name: &str, redact: Vec<RedactRule>) -> Route {
        Route {
            name: name.into(),
            namespace: "bank".into(),
            mode: Mode::Text,
            service: format!("{name}.bank.svc"),
            port: 8080,
            path: "/v1/session".into(),
            handoffs: vec![],
            expose: true,
            default: name == "triage",
            ready: true,
            ready_replicas: 1,
            redact,
            identity_keys: switchboard_crds::agent::default_identity_keys(),
            capacity: Default::default(),
            numbers: vec![],
            analysis: None,
            answering_machine: None,
            app_context: Default::default(),
        }
    }

    /// The live routes of a gateway (no record, no credentials) whose table has triage and
    /// idv, idv with an account-number rule.
    async fn serve() -> SocketAddr {
        let account = RedactRule { name: "account".into(), pattern: r"\b\d{8}\b".into() };
        let table = RoutingTable::new(vec![route("triage", vec![]), route("idv", vec![account])]);
        let directory = switchboard_gateway::Directory::new(Arc::new(table), Arc::default(), None);
        let (_routes, receiver) = tokio::sync::watch::channel(directory);
        let auth = Auth::new(None, Vec::new()).expect("auth");
        let store = switchboard_gateway::resume::Store::default();
        let signer = GatewaySigner::from_seed(&[3; 32]);
        let gateway = Gateway::new(GatewayConfig::default(), receiver, signer, auth, store).expect("a gateway");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, routes(gateway)).await });
        addr
    }

    /// One HTTP/1.1 request; the status and body.
    async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("writes");
        stream.write_all(body.as_bytes()).await.expect("writes");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("reads");
        let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn memory_is_redacted_with_the_rules_of_the_agents_reached_and_the_built_in_detectors() {
        let addr = serve().await;
        let values = r#""values": {"verifiedUser": {"accountNumber": "12345678", "email": "ada@example.com"}}"#;
        let (status, body) =
            request(addr, "POST", "/v1/console/redact", &format!(r#"{{"agents": ["triage", "bank/idv"], {values}}}"#))
                .await;
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["values"]["verifiedUser"]["accountNumber"], "[redacted:account]", "{answer}");
        assert_eq!(answer["values"]["verifiedUser"]["email"], "[redacted:email]", "{answer}");
        // Before idv: its rule does not hold yet; the built-in detectors always do.
        let (status, body) =
            request(addr, "POST", "/v1/console/redact", &format!(r#"{{"agents": ["triage"], {values}}}"#)).await;
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["values"]["verifiedUser"]["accountNumber"], "12345678", "{answer}");
        assert_eq!(answer["values"]["verifiedUser"]["email"], "[redacted:email]", "{answer}");
    }

    #[tokio::test]
    async fn redaction_requests_are_bounded_and_checked() {
        let addr = serve().await;
        let many: Vec<String> = (0..=VALUES_MAX).map(|i| format!(r#""k{i}": 1"#)).collect();
        let body = format!(r#"{{"agents": [], "values": {{{}}}}}"#, many.join(","));
        assert_eq!(request(addr, "POST", "/v1/console/redact", &body).await.0, 400);
        let unknown = r#"{"agents": [], "values": {}, "rules": ["x=.*"]}"#;
        assert_eq!(request(addr, "POST", "/v1/console/redact", unknown).await.0, 422, "the page cannot bring rules");
    }

    #[tokio::test]
    async fn prices_come_from_the_record_s_table() {
        let addr = serve().await;
        let (status, body) = request(addr, "GET", "/v1/console/price?model=us.amazon.nova-lite-v1:0", "").await;
        assert_eq!(status, 200, "{body}");
        let price: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!((price["input"].as_f64(), price["output"].as_f64()), (Some(0.06), Some(0.24)), "{price}");
        let (status, body) = request(addr, "GET", "/v1/console/price?model=someone.else", "").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("unpriced"), "{body}");
    }
}
