//! Where a session may go: the operator's routing table joined with the ready endpoints
//! of each Agent's Service. Pure: the watchers in [`crate::watch`] build a new
//! [`Directory`] on every change and publish it; sessions read the latest one.
//!
//! Names: a client asks for `<namespace>/<name>`, or a bare `<name>` when only one
//! namespace has an Agent of that name. No name means the gateway's `--default-agent`, or
//! else the one Agent marked `gateway.default` (two such Agents in different namespaces
//! make the default ambiguous, and the client must name one).
//!
//! Candidates: an Agent whose rollout waits for its AgentTests runs its edited spec on
//! candidate pods, behind the Service `<name>-candidate` that the routing table lists
//! ([`RoutingTable::candidates`]). A test session ([`Reach::Candidates`]) reaches such an
//! Agent there and nowhere else — never its live pods, which run the spec under test's
//! predecessor — and every other Agent at its live pods. Other sessions never reach a
//! candidate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use switchboard_core::protocol::{ErrorCode, close_code};
use switchboard_crds::contract::CANDIDATE_SUFFIX;
use switchboard_crds::routing::{Route, RouteVariant, RoutingTable};

/// A route resolved for a session: the Agent and the ready pod addresses it has now.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The Agent's route.
    pub route: Route,
    /// Its ready pods' session addresses (may be empty for handoff targets).
    pub ready: Vec<SocketAddr>,
    /// Whether those are its candidate pods (a test session at an Agent whose rollout waits
    /// for its tests).
    pub candidate: bool,
    /// The Agent's variants and their weights now (empty: it runs none).
    pub variants: Vec<RouteVariant>,
}

/// Which pods a session reaches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// Every Agent's live pods.
    #[default]
    Live,
    /// A test session: the candidate pods of an Agent that has them, the live pods of others.
    Candidates,
}

impl Target {
    /// `<namespace>/<name>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.route.namespace, self.route.name)
    }

    /// The variant a session whose stickiness key is `key` gets, by the weights now
    /// ([`switchboard_crds::agent::pick_variant`]); none when the Agent runs no variants.
    pub fn pick_variant(&self, key: &str) -> Option<String> {
        let weights = self.variants.iter().map(|v| (v.name.as_str(), v.weight));
        switchboard_crds::agent::pick_variant(weights, key).map(str::to_owned)
    }
}

/// Why a session cannot go where it asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No name and no default.
    #[error("name an agent (?agent=<name> or session_start.agent): there is no default agent")]
    NoDefault,
    /// No Agent of that name (or not accepted by the operator).
    #[error("unknown agent {0:?}; check the name, and that the Agent is Accepted (kubectl get agents)")]
    Unknown(String),
    /// No Accepted Agent claims this phone number.
    #[error("no agent answers {0} (no Accepted Agent lists it in spec.telephony.numbers)")]
    UnknownNumber(String),
    /// A phone number several routes claim (only a hand-written table can).
    #[error("the number {number} is claimed by several agents ({agents}); a number answers one")]
    NumberClaimedTwice {
        /// The number.
        number: String,
        /// `namespace/name` of each.
        agents: String,
    },
    /// A bare name several namespaces have.
    #[error("agent {name:?} exists in several namespaces ({namespaces}); ask for <namespace>/{name}")]
    Ambiguous {
        /// The name asked for.
        name: String,
        /// Where it exists.
        namespaces: String,
    },
    /// `gateway.expose: false`.
    #[error("agent {0:?} is not exposed to clients (gateway.expose: false); it is reached by handoff")]
    NotExposed(String),
    /// Listed, but no pod is ready.
    #[error("agent {0:?} has no ready pod right now; try again shortly")]
    NoReadyPod(String),
    /// A test session at an Agent whose candidate has no ready pod (its live pods are never
    /// used instead: they run another spec than the one under test).
    #[error("agent {0:?} has no ready candidate pod right now (its rollout waits for its tests); try again shortly")]
    NoReadyCandidate(String),
    /// A handoff to an Agent the source does not declare (`spec.handoffs`), that is not the
    /// agent the session came from, or in another namespace.
    #[error(
        "agent {from:?} may not hand off to {to:?}: a handoff goes only to an Agent of its own namespace that it \
         lists in spec.handoffs, or back to the agent that transferred the session"
    )]
    HandoffNotAllowed {
        /// `<namespace>/<name>` of the source.
        from: String,
        /// The target asked for.
        to: String,
    },
}

impl RouteError {
    /// The WebSocket close code for this refusal.
    pub fn close_code(&self) -> u16 {
        match self {
            Self::NoDefault
            | Self::Unknown(_)
            | Self::UnknownNumber(_)
            | Self::Ambiguous { .. }
            | Self::NumberClaimedTwice { .. } => close_code::UNKNOWN_AGENT,
            Self::NotExposed(_) => close_code::NOT_EXPOSED,
            Self::NoReadyPod(_) | Self::NoReadyCandidate(_) => close_code::NO_READY_POD,
            Self::HandoffNotAllowed { .. } => close_code::NOT_EXPOSED,
        }
    }

    /// The `bidi_error` code of this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NoDefault => ErrorCode::NoDefault,
            Self::Unknown(_) | Self::UnknownNumber(_) => ErrorCode::UnknownAgent,
            Self::Ambiguous { .. } | Self::NumberClaimedTwice { .. } => ErrorCode::AmbiguousAgent,
            Self::NotExposed(_) => ErrorCode::NotExposed,
            Self::NoReadyPod(_) | Self::NoReadyCandidate(_) => ErrorCode::NoReadyPod,
            Self::HandoffNotAllowed { .. } => ErrorCode::HandoffNotAllowed,
        }
    }

    /// The metric label of this refusal (its code).
    pub fn metric_label(&self) -> &'static str {
        self.code().metric_label()
    }
}

/// The routing table and every Agent's ready endpoints, as of one moment.
#[derive(Clone, Debug, Default)]
pub struct Directory {
    table: Arc<RoutingTable>,
    /// `(namespace, service name)` -> ready session addresses.
    endpoints: Arc<HashMap<(String, String), Vec<SocketAddr>>>,
    /// The gateway's `--default-agent`, over the table's `gateway.default`.
    default_agent: Option<String>,
    /// False until the first routing table arrived (the gateway is not ready before).
    loaded: bool,
}

impl Directory {
    /// A directory of `table` and `endpoints`.
    pub fn new(
        table: Arc<RoutingTable>,
        endpoints: Arc<HashMap<(String, String), Vec<SocketAddr>>>,
        default_agent: Option<String>,
    ) -> Self {
        Self { table, endpoints, default_agent, loaded: true }
    }

    /// Nothing loaded yet, with the gateway's default agent.
    pub fn empty(default_agent: Option<String>) -> Self {
        Self { default_agent, ..Self::default() }
    }

    /// Whether a routing table was loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// The same endpoints with another table.
    pub fn with_table(&self, table: Arc<RoutingTable>) -> Self {
        Self { table, loaded: true, ..self.clone() }
    }

    /// The same table with other endpoints.
    pub fn with_endpoints(&self, endpoints: Arc<HashMap<(String, String), Vec<SocketAddr>>>) -> Self {
        Self { endpoints, ..self.clone() }
    }

    /// The routing table.
    pub fn table(&self) -> &RoutingTable {
        &self.table
    }

    /// Every routed Agent (`namespace/name`) with how many ready pods it has now.
    pub fn ready_pods(&self) -> impl Iterator<Item = (String, usize)> + '_ {
        self.table
            .routes
            .iter()
            .map(|route| (format!("{}/{}", route.namespace, route.name), self.pods(route, Reach::Live).0.len()))
    }

    /// Where a client's new session goes: `requested`, or the default. The Agent must be
    /// exposed and have a ready pod (of those `reach` allows).
    pub fn for_client(&self, requested: Option<&str>, reach: Reach) -> Result<Target, RouteError> {
        let route = match requested.or(self.default_agent.as_deref()) {
            Some(name) => self.find(name)?,
            None => self.table_default()?,
        };
        if !route.expose && requested.is_some() {
            return Err(RouteError::NotExposed(route.name.clone()));
        }
        self.ready(route, reach)
    }

    /// Where a handoff from the Agent `from` to `to` goes: an Agent of `from`'s namespace
    /// that `from` declares (its route's `handoffs`), or `return_to`, the agent the session
    /// came from (a return). Exposure does not matter; another namespace is never reached,
    /// whatever the name.
    pub fn for_handoff(
        &self,
        from: &Route,
        to: &str,
        return_to: Option<&str>,
        reach: Reach,
    ) -> Result<Target, RouteError> {
        let name = match to.split_once('/') {
            Some((namespace, name)) if namespace == from.namespace => name,
            Some(_) => return Err(not_allowed(from, to)),
            None => to,
        };
        let declared = from.handoffs.iter().any(|h| h == name) || return_to == Some(name);
        if !declared {
            return Err(not_allowed(from, to));
        }
        let route = self
            .table
            .route(&from.namespace, name)
            .ok_or_else(|| RouteError::Unknown(format!("{}/{name}", from.namespace)))?;
        self.ready(route, reach)
    }

    /// The variants of `route`'s Agent, with their weights.
    fn variants_of(&self, route: &Route) -> Vec<RouteVariant> {
        self.table.variants.get(&format!("{}/{}", route.namespace, route.name)).cloned().unwrap_or_default()
    }

    /// `namespace/name` (any exposure), whether or not it has a ready pod (of those `reach`
    /// allows).
    pub fn lookup(&self, namespace: &str, name: &str, reach: Reach) -> Option<Target> {
        let route = self.table.route(namespace, name)?;
        let (ready, candidate) = self.pods(route, reach);
        let variants = self.variants_of(route);
        Some(Target { route: route.clone(), ready, candidate, variants })
    }

    fn ready(&self, route: &Route, reach: Reach) -> Result<Target, RouteError> {
        let (ready, candidate) = self.pods(route, reach);
        if ready.is_empty() {
            let name = route.name.clone();
            return Err(if candidate { RouteError::NoReadyCandidate(name) } else { RouteError::NoReadyPod(name) });
        }
        let variants = self.variants_of(route);
        Ok(Target { route: route.clone(), ready, candidate, variants })
    }

    /// The ready pods `reach` allows of `route`'s Agent, and whether they are its candidate's.
    fn pods(&self, route: &Route, reach: Reach) -> (Vec<SocketAddr>, bool) {
        let candidate = reach == Reach::Candidates && self.table.candidate(&route.namespace, &route.name).is_some();
        let service = if candidate { format!("{}{}", route.name, CANDIDATE_SUFFIX) } else { route.name.clone() };
        let ready = self.endpoints.get(&(route.namespace.clone(), service)).cloned().unwrap_or_default();
        (ready, candidate)
    }

    fn find(&self, name: &str) -> Result<&Route, RouteError> {
        if name.starts_with('+') {
            return self.by_number(name);
        }
        if let Some((namespace, name)) = name.split_once('/') {
            return self.table.route(namespace, name).ok_or_else(|| RouteError::Unknown(format!("{namespace}/{name}")));
        }
        let mut matches = self.table.routes.iter().filter(|r| r.name == name);
        let first = matches.next().ok_or_else(|| RouteError::Unknown(name.to_owned()))?;
        let others: Vec<&str> = matches.map(|r| r.namespace.as_str()).collect();
        if others.is_empty() {
            return Ok(first);
        }
        let namespaces = std::iter::once(first.namespace.as_str()).chain(others).collect::<Vec<_>>().join(", ");
        Err(RouteError::Ambiguous { name: name.to_owned(), namespaces })
    }

    /// The Agent that claims the phone `number` (`spec.telephony.numbers`). The operator
    /// lets one Agent claim a number; two in a table (a hand-written one) answer neither.
    fn by_number(&self, number: &str) -> Result<&Route, RouteError> {
        let mut claims = self.table.by_number(number).into_iter();
        let first = claims.next().ok_or_else(|| RouteError::UnknownNumber(number.to_owned()))?;
        let others: Vec<String> = claims.map(|r| format!("{}/{}", r.namespace, r.name)).collect();
        if others.is_empty() {
            return Ok(first);
        }
        let namespaces =
            std::iter::once(format!("{}/{}", first.namespace, first.name)).chain(others).collect::<Vec<_>>();
        Err(RouteError::NumberClaimedTwice { number: number.to_owned(), agents: namespaces.join(", ") })
    }

    fn table_default(&self) -> Result<&Route, RouteError> {
        let mut defaults = self.table.routes.iter().filter(|r| r.default);
        match (defaults.next(), defaults.next()) {
            (Some(route), None) => Ok(route),
            _ => Err(RouteError::NoDefault),
        }
    }
}

fn not_allowed(from: &Route, to: &str) -> RouteError {
    RouteError::HandoffNotAllowed { from: format!("{}/{}", from.namespace, from.name), to: to.to_owned() }
}

#[cfg(test)]
mod tests {
    use switchboard_crds::Mode;
    use switchboard_crds::routing::{RUNTIME_PORT, SESSION_PATH};

    use super::*;

    fn route(ns: &str, name: &str, expose: bool, default: bool) -> Route {
        let handoffs = if name == "triage" { vec!["idv".to_owned(), "orders".to_owned()] } else { vec![] };
        Route {
            name: name.into(),
            namespace: ns.into(),
            mode: Mode::Text,
            service: format!("{name}.{ns}.svc"),
            port: RUNTIME_PORT,
            path: SESSION_PATH.into(),
            handoffs,
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

    fn directory() -> Directory {
        let table = RoutingTable::new(vec![
            route("bank", "triage", true, true),
            route("bank", "idv", false, false),
            route("bank", "banking", true, false),
            route("shop", "triage", true, false),
            route("shop", "orders", true, false),
        ]);
        let addr: SocketAddr = "10.0.0.1:8080".parse().expect("addr");
        let endpoints: HashMap<_, _> = [
            (("bank".into(), "triage".into()), vec![addr]),
            (("bank".into(), "idv".into()), vec![addr]),
            (("shop".into(), "triage".into()), vec![addr]),
        ]
        .into();
        Directory::new(Arc::new(table), Arc::new(endpoints), None)
    }

    #[test]
    fn a_phone_number_reaches_the_agent_that_claims_it_and_an_unknown_one_none() {
        let mut table = directory().table().clone();
        table.routes.iter_mut().find(|r| r.namespace == "bank" && r.name == "triage").expect("triage").numbers =
            vec!["+442079460000".into()];
        table.routes.iter_mut().find(|r| r.name == "idv").expect("idv").numbers = vec!["+442079460001".into()];
        let d = directory().with_table(Arc::new(table.clone()));
        assert_eq!(d.for_client(Some("+442079460000"), Reach::Live).map(|t| t.key()), Ok("bank/triage".into()));
        let unknown = d.for_client(Some("+15550000000"), Reach::Live).expect_err("nobody claims it");
        assert_eq!((unknown.close_code(), unknown.code()), (close_code::UNKNOWN_AGENT, ErrorCode::UnknownAgent));
        assert!(unknown.to_string().contains("spec.telephony.numbers"), "{unknown}");
        // A number does not open an Agent that is not exposed.
        assert_eq!(d.for_client(Some("+442079460001"), Reach::Live), Err(RouteError::NotExposed("idv".into())));
        // Two claims (a hand-written table): neither answers.
        table.routes.iter_mut().find(|r| r.name == "banking").expect("banking").numbers = vec!["+442079460000".into()];
        let d = directory().with_table(Arc::new(table));
        let twice = d.for_client(Some("+442079460000"), Reach::Live).expect_err("claimed twice");
        assert!(matches!(twice, RouteError::NumberClaimedTwice { .. }), "{twice}");
    }

    #[test]
    fn names_resolve_by_namespace_bare_name_or_default() {
        let d = directory();
        assert_eq!(d.for_client(None, Reach::Live).map(|t| t.key()), Ok("bank/triage".into()));
        assert_eq!(d.for_client(Some("shop/triage"), Reach::Live).map(|t| t.key()), Ok("shop/triage".into()));
        assert_eq!(
            d.for_client(Some("triage"), Reach::Live),
            Err(RouteError::Ambiguous { name: "triage".into(), namespaces: "bank, shop".into() })
        );
        assert_eq!(d.for_client(Some("nope"), Reach::Live), Err(RouteError::Unknown("nope".into())));
        assert_eq!(d.for_client(Some("bank/nope"), Reach::Live), Err(RouteError::Unknown("bank/nope".into())));
        let with_default = Directory { default_agent: Some("shop/triage".into()), ..directory() };
        assert_eq!(with_default.for_client(None, Reach::Live).map(|t| t.key()), Ok("shop/triage".into()));
    }

    #[test]
    fn clients_need_an_exposed_agent_with_a_ready_pod_handoffs_only_the_pod() {
        let d = directory();
        assert_eq!(d.for_client(Some("idv"), Reach::Live), Err(RouteError::NotExposed("idv".into())));
        assert_eq!(d.for_client(Some("bank/banking"), Reach::Live), Err(RouteError::NoReadyPod("banking".into())));
        let from = |ns: &str, name: &str| d.table().route(ns, name).cloned().expect("a route");
        assert_eq!(
            d.for_handoff(&from("bank", "triage"), "idv", None, Reach::Live).map(|t| t.key()),
            Ok("bank/idv".into())
        );
        assert_eq!(
            d.for_handoff(&from("shop", "triage"), "orders", None, Reach::Live),
            Err(RouteError::NoReadyPod("orders".into()))
        );
        assert_eq!(RouteError::NoReadyPod("x".into()).close_code(), close_code::NO_READY_POD);
    }

    #[test]
    fn handoffs_go_only_to_declared_targets_of_the_same_namespace_or_back() {
        let d = directory();
        let from = |ns: &str, name: &str| d.table().route(ns, name).cloned().expect("a route");
        let not_allowed =
            |from: &str, to: &str| Err(RouteError::HandoffNotAllowed { from: from.into(), to: to.into() });
        // shop/triage declares idv, but shop has none: bank's is never reached.
        assert_eq!(
            d.for_handoff(&from("shop", "triage"), "idv", None, Reach::Live),
            Err(RouteError::Unknown("shop/idv".into()))
        );
        assert_eq!(
            d.for_handoff(&from("shop", "triage"), "bank/idv", None, Reach::Live),
            not_allowed("shop/triage", "bank/idv")
        );
        // Not declared: refused even in the same namespace.
        assert_eq!(
            d.for_handoff(&from("bank", "triage"), "banking", None, Reach::Live),
            not_allowed("bank/triage", "banking")
        );
        // idv declares nothing, but may return to where the session came from.
        assert_eq!(d.for_handoff(&from("bank", "idv"), "triage", None, Reach::Live), not_allowed("bank/idv", "triage"));
        assert_eq!(
            d.for_handoff(&from("bank", "idv"), "triage", Some("triage"), Reach::Live).map(|t| t.key()),
            Ok("bank/triage".into())
        );
        assert_eq!(
            d.for_handoff(&from("bank", "triage"), "bank/idv", None, Reach::Live).map(|t| t.key()),
            Ok("bank/idv".into())
        );
        assert_eq!(not_allowed("a/b", "c").unwrap_err().close_code(), close_code::NOT_EXPOSED);
    }

    #[test]
    fn a_test_session_reaches_a_held_agent_only_at_its_candidate_and_others_at_their_live_pods() {
        let live: SocketAddr = "10.0.0.1:8080".parse().expect("addr");
        let candidate_pod: SocketAddr = "10.0.0.9:8080".parse().expect("addr");
        let mut table = RoutingTable::new(vec![
            route("bank", "triage", true, true),
            route("bank", "idv", false, false),
            route("bank", "banking", true, false),
        ]);
        table.candidates.insert("bank/triage".into(), "triage-candidate.bank.svc".into());
        table.candidates.insert("bank/idv".into(), "idv-candidate.bank.svc".into());
        let endpoints: HashMap<_, _> = [
            (("bank".into(), "triage".into()), vec![live]),
            (("bank".into(), "triage-candidate".into()), vec![candidate_pod]),
            (("bank".into(), "idv".into()), vec![live]),
            (("bank".into(), "banking".into()), vec![live]),
        ]
        .into();
        let d = Directory::new(Arc::new(table), Arc::new(endpoints), None);
        let pods = |t: Result<Target, RouteError>| t.map(|t| (t.ready, t.candidate));
        // A client's session never reaches a candidate; a test session reaches triage's.
        assert_eq!(pods(d.for_client(None, Reach::Live)), Ok((vec![live], false)));
        assert_eq!(pods(d.for_client(None, Reach::Candidates)), Ok((vec![candidate_pod], true)));
        // banking has no candidate: a test session is served by its live pods.
        assert_eq!(pods(d.for_client(Some("banking"), Reach::Candidates)), Ok((vec![live], false)));
        // idv's candidate has no ready pod: a test session's handoff is refused, never sent
        // to the live pods, which run another spec than the one under test.
        let triage = d.table().route("bank", "triage").cloned().expect("a route");
        assert_eq!(
            d.for_handoff(&triage, "idv", None, Reach::Candidates),
            Err(RouteError::NoReadyCandidate("idv".into()))
        );
        assert_eq!(pods(d.for_handoff(&triage, "idv", None, Reach::Live)), Ok((vec![live], false)));
        assert_eq!(RouteError::NoReadyCandidate("idv".into()).close_code(), close_code::NO_READY_POD);
        let looked = d.lookup("bank", "idv", Reach::Candidates).expect("listed");
        assert_eq!((looked.ready, looked.candidate), (vec![], true));
        // The console's pod counts are the live pods'.
        assert!(d.ready_pods().all(|(_, n)| n == 1));
    }

    #[test]
    fn two_table_defaults_are_no_default() {
        let table = RoutingTable::new(vec![route("a", "x", true, true), route("b", "y", true, true)]);
        let d = Directory::new(Arc::new(table), Arc::default(), None);
        assert_eq!(d.for_client(None, Reach::Live), Err(RouteError::NoDefault));
    }
}
