//! What the console's live view asks the gateway for, in local mode and behind `switchboard
//! gateway --console` alike (both behind the gateway's own admission, as `/v1/agents`):
//!
//! - `GET /v1/console/price?model=<id>`: the model's price from the record's price table
//!   ([`switchboard_gateway::record::Prices`]: `--record-price` over the defaults), so the
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
use switchboard_gateway::record::{Prices, Redactor};

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
    if let Err(refused) = super::gateway::admit(&gateway, &headers, query.access_token.as_deref()) {
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
    let scope = match super::gateway::admit(&gateway, &headers, credential.access_token.as_deref()) {
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
