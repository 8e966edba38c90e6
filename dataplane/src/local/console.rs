//! The web console served by the gateway on a cluster (`switchboard gateway --console`, chart
//! value `gateway.console.enabled`; off by default): the same page as local mode's
//! ([`super::web`]), behind the gateway's own authentication. The page itself is public (it
//! holds no data); `GET /v1/agents` answers only a client the gateway would admit to a
//! session (an API key or a JWT as `Authorization: Bearer`, `X-Api-Key` or the
//! `access_token` query parameter, the page's origin), and lists only the Agents that
//! credential may reach, from the gateway's routing table: name, mode and handoff targets
//! (the gateway has no persona or workflow; the page says so). The page asks for the key or
//! token when the gateway wants one and sends it the same ways: `Authorization: Bearer` on
//! its requests and `access_token` on the session's WebSocket, whose own checks are the
//! gateway's as for any client.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use switchboard_core::protocol::{ErrorCode, close_code};
use switchboard_crds::routing::RoutingTable;
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Scope;

/// One Agent of the routing table, as the console lists it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClusterAgent {
    /// `namespace/name`, as `session_start.agent` takes it.
    pub name: String,
    /// `voice`, `text` or `hybrid`.
    pub mode: String,
    /// The Agents it hands over to.
    pub handoffs: Vec<Handoff>,
    /// Whether a pod of it is ready.
    pub ready: bool,
}

/// A handoff target.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Handoff {
    /// The target Agent's name.
    pub agent: String,
}

/// What `GET /v1/agents` answers on a cluster (the shape of [`super::web::AgentList`]).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClusterAgents {
    /// The Agents a session may start with (exposed), the default first.
    pub agents: Vec<ClusterAgent>,
    /// The Agents reached only by handoff.
    pub by_handoff: Vec<ClusterAgent>,
    /// The default Agent, if any.
    pub default: Option<String>,
}

impl ClusterAgents {
    /// The Agents of `table` that `scope` may reach.
    pub fn new(table: &RoutingTable, scope: &Scope) -> Self {
        let mut routes: Vec<_> = table.routes.iter().filter(|r| scope.allows_agent(&r.namespace, &r.name)).collect();
        routes.sort_by_key(|r| (!r.default, r.namespace.clone(), r.name.clone()));
        let entry = |r: &switchboard_crds::routing::Route| ClusterAgent {
            name: format!("{}/{}", r.namespace, r.name),
            mode: r.mode.to_string(),
            handoffs: r.handoffs.iter().map(|agent| Handoff { agent: agent.clone() }).collect(),
            ready: r.ready,
        };
        let default = routes.iter().find(|r| r.default).map(|r| format!("{}/{}", r.namespace, r.name));
        let (agents, by_handoff): (Vec<_>, Vec<_>) = routes.into_iter().partition(|r| r.expose || r.default);
        ClusterAgents {
            agents: agents.into_iter().map(entry).collect(),
            by_handoff: by_handoff.into_iter().map(entry).collect(),
            default,
        }
    }
}

/// The console's routes on the gateway: the page, its assets, and the Agents list.
pub fn routes(gateway: Arc<Gateway>) -> Router {
    super::web::page_routes().merge(Router::new().route("/v1/agents", get(agents)).with_state(gateway))
}

#[derive(Deserialize)]
struct Credential {
    access_token: Option<String>,
}

async fn agents(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Query(query): Query<Credential>) -> Response {
    // The same check a session's WebSocket gets; the slot it holds is let go at once.
    let scope = match gateway.auth.admit(&headers, query.access_token.as_deref()) {
        Ok(admission) => admission.scope.clone(),
        Err(refusal) => {
            let status = match refusal.reason {
                ErrorCode::Origin => StatusCode::FORBIDDEN,
                _ if refusal.code == close_code::TOO_MANY_SESSIONS => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::UNAUTHORIZED,
            };
            let body = serde_json::json!({ "code": refusal.reason.as_str(), "message": refusal.message });
            return (status, Json(body)).into_response();
        }
    };
    let list = ClusterAgents::new(gateway.directory.borrow().table(), &scope);
    Json(list).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_crds::Mode;
    use switchboard_crds::routing::Route;

    fn route(namespace: &str, name: &str, expose: bool, default: bool) -> Route {
        Route {
            name: name.into(),
            namespace: namespace.into(),
            mode: Mode::Text,
            service: format!("{name}.{namespace}.svc"),
            port: 8080,
            path: "/v1/session".into(),
            handoffs: vec!["idv".into()],
            expose,
            default,
            ready: true,
            ready_replicas: 1,
            redact: Vec::new(),
        }
    }

    fn names(agents: &[ClusterAgent]) -> Vec<&str> {
        agents.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn the_list_is_what_the_credential_may_reach_default_first() {
        let table = RoutingTable::new(vec![
            route("bank", "disputes", true, false),
            route("bank", "idv", false, false),
            route("bank", "triage", true, true),
            route("shop", "till", true, false),
        ]);
        let all = ClusterAgents::new(&table, &Scope::unrestricted());
        assert_eq!(names(&all.agents), ["bank/triage", "bank/disputes", "shop/till"]);
        assert_eq!(names(&all.by_handoff), ["bank/idv"]);
        assert_eq!(all.default.as_deref(), Some("bank/triage"));
        assert_eq!(all.agents[0].handoffs, [Handoff { agent: "idv".into() }]);
        let shop = ClusterAgents::new(&table, &Scope::parse(["shop/*"]).expect("a scope"));
        assert_eq!(names(&shop.agents), ["shop/till"]);
        assert!(shop.by_handoff.is_empty() && shop.default.is_none(), "nothing of the bank: {shop:?}");
    }
}
