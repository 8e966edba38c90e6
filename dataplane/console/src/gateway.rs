//! The web console served by the gateway on a cluster (`switchboard gateway --console`, chart
//! value `gateway.console.enabled`; off by default): the same page as local mode's
//! (the `web` module), behind the gateway's own authentication. The page itself is public (it
//! holds no data); `GET /v1/agents` answers only a client the gateway would admit to a
//! session (an API key or a JWT as `Authorization: Bearer`, `X-Api-Key` or the
//! `access_token` query parameter, the page's origin), and lists only the Agents that
//! credential may reach, from the gateway's routing table: name, mode, readiness and what
//! the operator carries for the console in the table (role, persona and voice without the
//! prompt, tools, handoffs, workflow graph: [`switchboard_crds::routing::summary`]); an
//! Agent the table has no summary of (past its size budget, or a hand-written routes file)
//! is listed with its handoff targets alone, and the page says so. The page asks for the key or
//! token when the gateway wants one and sends it the same ways: `Authorization: Bearer` on
//! its requests and `access_token` on the session's WebSocket, whose own checks are the
//! gateway's as for any client.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use switchboard_crds::routing::RoutingTable;
use switchboard_crds::routing::summary::AgentSummary;
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Scope;

/// One Agent of the routing table, as the console lists it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClusterAgent {
    /// `namespace/name`, as `session_start.agent` takes it.
    pub name: String,
    /// `voice`, `text` or `hybrid`.
    pub mode: String,
    /// Whether a pod of it is ready.
    pub ready: bool,
    /// What the page shows of it.
    #[serde(flatten)]
    pub about: About,
}

/// What the console knows of an Agent besides its route.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum About {
    /// The operator's summary (persona, tools, handoffs, workflow), as local mode's entries.
    Summary(Box<AgentSummary>),
    /// The route alone: its handoff targets.
    Route {
        /// The Agents it hands over to.
        handoffs: Vec<Handoff>,
    },
}

/// A handoff target.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Handoff {
    /// The target Agent's name.
    pub agent: String,
}

/// What `GET /v1/agents` answers on a cluster (the shape of [`crate::web::AgentList`]).
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
            ready: r.ready,
            about: match table.summary(&r.namespace, &r.name) {
                Some(summary) => About::Summary(Box::new(summary.clone())),
                None => {
                    About::Route { handoffs: r.handoffs.iter().map(|agent| Handoff { agent: agent.clone() }).collect() }
                }
            },
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

/// The console's routes on the gateway: the page, its assets, the Agents list, and what
/// the live view asks for ([`crate::live`]).
pub fn routes(gateway: Arc<Gateway>) -> Router {
    crate::web::page_routes()
        .merge(crate::live::routes(gateway.clone()))
        .merge(Router::new().route("/v1/agents", get(agents)).with_state(gateway))
}

#[derive(Deserialize)]
struct Credential {
    access_token: Option<String>,
}

async fn agents(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Query(query): Query<Credential>) -> Response {
    let scope = match crate::admission::admit(&gateway, &headers, query.access_token.as_deref()) {
        Ok(scope) => scope,
        Err(refused) => return refused.into_response(),
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
            identity_keys: switchboard_crds::agent::default_identity_keys(),
            capacity: Default::default(),
            numbers: vec![],
            analysis: None,
            answering_machine: None,
            app_context: Default::default(),
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
        assert_eq!(all.agents[0].about, About::Route { handoffs: vec![Handoff { agent: "idv".into() }] });
        let shop = ClusterAgents::new(&table, &Scope::parse(["shop/*"]).expect("a scope"));
        assert_eq!(names(&shop.agents), ["shop/till"]);
        assert!(shop.by_handoff.is_empty() && shop.default.is_none(), "nothing of the bank: {shop:?}");
    }

    #[test]
    fn an_agent_with_a_summary_is_listed_as_local_mode_lists_it() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
        let catalog = switchboard_crds::Catalog::load_paths(&[dir.as_path()]).expect("the banking example loads");
        let spec = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("banking")).expect("banking");
        let spec = catalog.resolve_agent(spec).expect("resolves");
        let (table, _) = RoutingTable::new(vec![route(&spec.agent.namespace, "banking", true, false)])
            .with_summaries([(format!("{}/banking", spec.agent.namespace), AgentSummary::of(&spec))]);
        let cluster = serde_json::to_value(ClusterAgents::new(&table, &Scope::unrestricted())).expect("json");
        let local = serde_json::to_value(crate::agents::AgentEntry::from_spec(&spec)).expect("json");
        let entry = &cluster["agents"][0];
        for key in ["role", "description"] {
            assert_eq!(entry[key], local[key], "{key}");
        }
        for key in ["name", "display_name", "voice", "language"] {
            assert_eq!(entry["persona"][key], local["persona"][key], "persona.{key}");
        }
        let names = |v: &serde_json::Value, list: &str, field: &str| -> Vec<String> {
            v[list]
                .as_array()
                .expect("a list")
                .iter()
                .map(|t| t[field].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(names(entry, "tools", "name"), names(&local, "tools", "name"));
        assert_eq!(names(entry, "handoffs", "agent"), names(&local, "handoffs", "agent"));
        assert_eq!(names(&entry["workflow"], "nodes", "id"), names(&local["workflow"], "nodes", "id"));
        assert_eq!(entry["workflow"]["entry"], local["workflow"]["entry"]);
        assert_eq!(entry["handoffs"].as_array().map(Vec::len), Some(spec.handoffs.len()), "one handoffs list: {entry}");
        assert!(!entry.to_string().contains(&spec.persona.spec.system_prompt), "no prompt");
    }
}
