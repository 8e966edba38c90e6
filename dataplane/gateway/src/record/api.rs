//! The record's HTTP API on the gateway, for an operator's tools and the web page:
//! `GET /v1/sessions` (filters as query parameters: `since`, `until` in unix ms, `agent`
//! as `namespace/name`, `caller`, `outcome`, `limit`), `GET /v1/sessions/{id}`, and
//! `GET /v1/variants?agent=<namespace/name>[&since=&until=]` (an Agent's variants compared:
//! [`switchboard_record::compare`]), JSON.
//! Only a credential allowed to read the record gets an answer ([`crate::auth::Auth::records_reader`]),
//! and only about sessions that started in a namespace its scope reaches; where the record is
//! open without one (local mode on loopback), only a request that names the server by address
//! or as `localhost` ([`crate::auth::Auth::open_data`]: not a web page that rebound its own name).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::compare::CompareQuery;
use super::store::Filter;
use crate::Gateway;
use crate::auth::Scope;

/// `GET /v1/sessions`.
pub async fn list(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Query(filter): Query<Filter>) -> Response {
    let (record, scope) = match reader(&gateway, &headers) {
        Ok(reader) => reader,
        Err(response) => return *response,
    };
    // The query leaves other namespaces out before its limit; the check below stays for
    // what a scope's agent patterns say beyond namespaces.
    let filter = Filter { namespaces: scope.namespaces(), ..filter };
    match record.store.list(&filter).await {
        Ok(sessions) => {
            let sessions: Vec<_> = sessions.into_iter().filter(|s| in_scope(&scope, &s.first_agent)).collect();
            Json(json!({ "sessions": sessions })).into_response()
        }
        Err(error) => unavailable(&error),
    }
}

/// `GET /v1/sessions/{id}`.
pub async fn show(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (record, scope) = match reader(&gateway, &headers) {
        Ok(reader) => reader,
        Err(response) => return *response,
    };
    match record.store.show(&id).await {
        Ok(Some(session)) if in_scope(&scope, &session.summary.first_agent) => Json(session).into_response(),
        // Another namespace's session is not there, as far as this reader knows.
        Ok(_) => error(StatusCode::NOT_FOUND, "unknown_session", &format!("no recorded session {id}")),
        Err(error) => unavailable(&error),
    }
}

/// `GET /v1/variants`: the variants of an Agent in the reader's scope compared.
pub async fn compare(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    Query(query): Query<CompareQuery>,
) -> Response {
    let (record, scope) = match reader(&gateway, &headers) {
        Ok(reader) => reader,
        Err(response) => return *response,
    };
    let well_formed = query.agent.split_once('/').is_some_and(|(namespace, name)| {
        !namespace.is_empty() && !name.is_empty() && !name.contains('/') && query.agent.len() <= 253
    });
    if !well_formed {
        let message = format!("agent must be namespace/name (e.g. bank/triage); got {:?}", query.agent);
        return error(StatusCode::BAD_REQUEST, "invalid_agent", &message);
    }
    if !in_scope(&scope, &query.agent) {
        // Another namespace's Agent has no sessions, as far as this reader knows.
        let message = format!("no sessions of {} are in this credential's scope", query.agent);
        return error(StatusCode::NOT_FOUND, "unknown_agent", &message);
    }
    match record.store.compare_variants(&query).await {
        Ok(comparison) => Json(comparison).into_response(),
        Err(error) => unavailable(&error),
    }
}

fn reader(gateway: &Gateway, headers: &HeaderMap) -> Result<(Arc<super::Recorder>, Arc<Scope>), Box<Response>> {
    let Some(record) = gateway.record.clone() else {
        let message = "this gateway keeps no conversation record (start it with --record-database-url)";
        return Err(Box::new(error(StatusCode::NOT_FOUND, "no_record", message)));
    };
    let scope = gateway.auth.records_reader(headers).map_err(|refusal| Box::new(refusal.into_response()))?;
    Ok((record, scope))
}

fn in_scope(scope: &Scope, agent: &str) -> bool {
    agent.split_once('/').is_some_and(|(namespace, _)| scope.allows_namespace(namespace))
}

fn unavailable(failure: &super::store::StoreError) -> Response {
    tracing::warn!("reading the conversation record: {failure}");
    error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", &format!("{failure}; try again shortly"))
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": code, "message": message }))).into_response()
}
