//! The gateway's routing table: which Agents exist, where their runtime pods listen, and
//! whether they are ready. The operator publishes it; the gateway watches it.
//!
//! # Where it lives
//!
//! A ConfigMap (by default `switchboard-routes` in the operator's namespace; the operator's
//! `--routes-namespace` / `--routes-name` flags move it) whose data key [`ROUTES_KEY`]
//! (`routes.json`) holds one [`RoutingTable`] as JSON. A gateway watches that one ConfigMap
//! (a field selector on its name) and reloads the table on every change; the operator
//! rewrites it within a second of an Agent appearing, changing, becoming ready or going.
//!
//! # Format
//!
//! ```json
//! {
//!   "apiVersion": "switchboard.dev/v1alpha1",
//!   "kind": "RoutingTable",
//!   "routes": [
//!     {
//!       "name": "triage", "namespace": "bank", "mode": "hybrid",
//!       "service": "triage.bank.svc", "port": 8080, "path": "/v1/session",
//!       "handoffs": ["idv"], "expose": true, "default": true,
//!       "ready": true, "readyReplicas": 2
//!     }
//!   ],
//!   "agents": {
//!     "bank/triage": { "role": "…", "persona": { "name": "…", "voice": "matthew", … },
//!                      "tools": […], "handoffs": […], "workflow": { "entry": "…", … } }
//!   }
//! }
//! ```
//!
//! `agents` holds what the web console shows of each Agent ([`summary::AgentSummary`]:
//! bounded, never a prompt), while the table stays under [`summary::SUMMARY_BUDGET`]; an
//! Agent without one is shown by its route alone. Gateways that do not serve the console
//! ignore it.
//!
//! Only Agents whose `Accepted` condition is `True` are listed, in namespace and name order,
//! so equal tables serialise to equal bytes. An Agent that is listed but not `ready` has no
//! ready pod: the gateway should refuse new sessions for it (or queue them) rather than
//! forget it, since handoffs to it may become possible any moment.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{Mode, RedactRule, default_identity_keys};

pub mod capacity;
pub mod outage;
pub mod summary;

pub use capacity::RouteCapacity;
pub use outage::{NamespaceOutage, OUTAGE_SWITCH_CONFIG_MAP, RouteOutage};
use summary::{AgentSummary, SUMMARY_BUDGET};

/// `kind` of a serialised routing table.
pub const ROUTING_TABLE_KIND: &str = "RoutingTable";
/// The ConfigMap data key that holds the table.
pub const ROUTES_KEY: &str = "routes.json";
/// The default name of the ConfigMap that holds the table.
pub const DEFAULT_ROUTES_NAME: &str = "switchboard-routes";
pub use crate::contract::{RUNTIME_PORT, SESSION_PATH};

/// Every routable Agent the operator knows.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoutingTable {
    /// Always `switchboard.dev/v1alpha1`.
    pub api_version: String,
    /// Always `RoutingTable`.
    pub kind: String,
    /// One route per Accepted Agent, sorted by namespace then name.
    pub routes: Vec<Route>,
    /// What the web console shows of each routed Agent, by `namespace/name` (see
    /// [`summary`]); absent for Agents past the budget.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(skip)]
    pub agents: BTreeMap<String, AgentSummary>,
    /// Test-only routes: for each Agent whose rollout is held until its AgentTests pass,
    /// by `namespace/name`, the DNS name of its candidate pods' Service
    /// (`<name>-candidate.<namespace>.svc`, same port and path as its route). Only a test
    /// session may reach them; a client's sessions never do.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub candidates: BTreeMap<String, String>,
    /// The variants of each Agent that runs some (`spec.variants`), by `namespace/name`,
    /// with their weights: the gateway picks one per new session. The weights live here
    /// alone, so changing them changes no pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variants: BTreeMap<String, Vec<RouteVariant>>,
    /// Outage mode of each Agent that has one (`spec.outage`), by `namespace/name`: the
    /// switch, the fallback and the breaker the gateway applies to its new sessions. It
    /// lives here alone, so flipping the switch changes no pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outages: BTreeMap<String, RouteOutage>,
    /// The namespaces switched into outage mode as a whole (the ConfigMap
    /// [`OUTAGE_SWITCH_CONFIG_MAP`] with `active: "true"`), by namespace: every Agent of
    /// one sends its new sessions to its fallback, and an Agent without `spec.outage`
    /// to this message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace_outages: BTreeMap<String, NamespaceOutage>,
}

/// One variant of an Agent and its share of new sessions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteVariant {
    /// The variant's name (`spec.variants[].name`).
    pub name: String,
    /// Its percent of new sessions.
    pub weight: u32,
}

/// Where and how the gateway reaches one Agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// The Agent's name (what a client names in `session_start`).
    pub name: String,
    /// The Agent's namespace.
    pub namespace: String,
    /// voice, text or hybrid.
    pub mode: Mode,
    /// DNS name of the Agent's Service, `<name>.<namespace>.svc`.
    pub service: String,
    /// The Service port of the runtime's WebSocket endpoint.
    pub port: u16,
    /// The WebSocket path on the runtime pods.
    pub path: String,
    /// Agents (same namespace) this one may hand a session to.
    pub handoffs: Vec<String>,
    /// Whether clients may start sessions with this agent directly.
    pub expose: bool,
    /// Whether this is its namespace's default agent.
    pub default: bool,
    /// Whether at least one runtime pod is ready.
    pub ready: bool,
    /// How many runtime pods are ready.
    pub ready_replicas: i32,
    /// The Agent's own redaction rules for the conversation record (`spec.record.redact`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact: Vec<RedactRule>,
    /// The memory keys that say who the caller is (`spec.identityKeys`; absent: the
    /// default, `[verifiedUser]`). A session continued from the record comes back without
    /// them: the caller is verified again.
    #[serde(default = "default_identity_keys", skip_serializing_if = "is_default_identity_keys")]
    pub identity_keys: Vec<String>,
    /// Where the Agent's model streams count against a quota and how its new sessions wait
    /// (`spec.capacity` with `spec.model.region`; absent: the defaults).
    #[serde(default, skip_serializing_if = "RouteCapacity::is_default")]
    pub capacity: RouteCapacity,
    /// What the Agent takes from the host app's backend when a session starts with it
    /// (`spec.appContext`; absent: nothing).
    #[serde(default, skip_serializing_if = "crate::agent::AppContext::is_default")]
    pub app_context: crate::agent::AppContext,
    /// The phone numbers (E.164) the Agent answers (`spec.telephony.numbers`): a call the
    /// SIP edge takes for one of them reaches this Agent. The operator lists a number under
    /// one route only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numbers: Vec<String>,
    /// What a model fills in after each session that started here (`spec.record.analysis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::agent::AnalysisSettings>,
    /// Answering-machine detection on the Agent's outbound calls
    /// (`spec.telephony.answeringMachine`), handed to the SIP edge with each call it places.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answering_machine: Option<crate::agent::AnsweringMachine>,
}

fn is_default_identity_keys(keys: &[String]) -> bool {
    keys == default_identity_keys().as_slice()
}

impl Route {
    /// The route to a resolved Agent's runtimes at `service:port`, ready with one replica:
    /// how a process that runs the runtimes itself (local mode, tests) routes to them. The
    /// operator builds its routes from the Agent and its status instead.
    pub fn ready_at(spec: &crate::RuntimeSpec, service: impl Into<String>, port: u16) -> Self {
        Self {
            name: spec.agent.name.clone(),
            namespace: spec.agent.namespace.clone(),
            mode: spec.mode,
            service: service.into(),
            port,
            path: SESSION_PATH.to_owned(),
            handoffs: spec.handoffs.iter().map(|h| h.agent.clone()).collect(),
            expose: spec.gateway.expose,
            default: spec.gateway.default,
            ready: true,
            ready_replicas: 1,
            redact: spec.record.redact.clone(),
            identity_keys: spec.identity_keys.clone(),
            capacity: RouteCapacity::of(&spec.capacity, &spec.model, spec.mode),
            numbers: spec.telephony.numbers.clone(),
            analysis: spec.record.analysis.clone(),
            app_context: spec.app_context.clone(),
            answering_machine: spec.telephony.answering_machine.clone(),
        }
    }

    /// `ws://<service>:<port><path>`, the URL the gateway dials for a session.
    pub fn url(&self) -> String {
        format!("ws://{}:{}{}", self.service, self.port, self.path)
    }
}

/// A routing table document that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RoutingTableError {
    /// Not JSON, or not a routing table.
    #[error("routing table is not valid: {0}")]
    Parse(String),
    /// A table of another version or kind.
    #[error(
        "routing table has apiVersion {found:?} and kind {kind:?}; expected {} {}",
        crate::API_VERSION,
        ROUTING_TABLE_KIND
    )]
    Version {
        /// The apiVersion found.
        found: String,
        /// The kind found.
        kind: String,
    },
}

impl Default for RoutingTable {
    /// A table with no routes.
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl RoutingTable {
    /// A table of `routes`, sorted by namespace then name.
    pub fn new(mut routes: Vec<Route>) -> Self {
        routes.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Self {
            api_version: crate::API_VERSION.to_owned(),
            kind: ROUTING_TABLE_KIND.to_owned(),
            routes,
            agents: BTreeMap::new(),
            candidates: BTreeMap::new(),
            variants: BTreeMap::new(),
            outages: BTreeMap::new(),
            namespace_outages: BTreeMap::new(),
        }
    }

    /// The redaction rules of every Agent of `namespace` (`spec.record.redact`), each once,
    /// in a stable order: a session is recorded under all of them from its first line, since
    /// it may reach any of them (handoffs stay in the namespace), and what a caller says
    /// before reaching the Agent that deems it secret is as secret as what they say after.
    pub fn redact_rules(&self, namespace: &str) -> Vec<RedactRule> {
        let mut rules: Vec<RedactRule> = Vec::new();
        for rule in self.routes.iter().filter(|route| route.namespace == namespace).flat_map(|route| &route.redact) {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
        rules.sort_by(|a, b| (&a.name, &a.pattern).cmp(&(&b.name, &b.pattern)));
        rules
    }

    /// The memory keys any Agent of `namespace` treats as the caller's identity (its
    /// `identityKeys`), and always `verifiedUser`: what a session of that namespace must
    /// not carry where identity has to be established again.
    pub fn identity_keys(&self, namespace: &str) -> std::collections::BTreeSet<&str> {
        self.routes
            .iter()
            .filter(|route| route.namespace == namespace)
            .flat_map(|route| route.identity_keys.iter().map(String::as_str))
            .chain([crate::agent::VERIFIED_USER])
            .collect()
    }

    /// The Service host of Agent `namespace/name`'s candidate pods, while its rollout is
    /// held (a test-only route; see [`RoutingTable::candidates`]).
    pub fn candidate(&self, namespace: &str, name: &str) -> Option<&str> {
        self.candidates.get(&format!("{namespace}/{name}")).map(String::as_str)
    }

    /// The table with `summaries` (`namespace/name` -> summary) of its routed Agents, in
    /// name order, as long as the table's text stays under [`SUMMARY_BUDGET`]: past it,
    /// the remaining Agents go without; the second value says how many. Summaries of Agents
    /// without a route are dropped.
    pub fn with_summaries(mut self, summaries: impl IntoIterator<Item = (String, AgentSummary)>) -> (Self, usize) {
        let routed: std::collections::HashSet<String> =
            self.routes.iter().map(|r| format!("{}/{}", r.namespace, r.name)).collect();
        let mut summaries: Vec<_> = summaries.into_iter().filter(|(key, _)| routed.contains(key)).collect();
        summaries.sort_by(|a, b| a.0.cmp(&b.0));
        // Pretty-printed inside the table, a summary takes about twice its compact size
        // (indentation); the whole text is measured once at the end to be sure.
        let mut used = self.to_json().len();
        let mut left_out = 0usize;
        for (key, summary) in summaries {
            let size = 2 * (key.len() + serde_json::to_string(&summary).map_or(usize::MAX / 4, |s| s.len()));
            if used.saturating_add(size) > SUMMARY_BUDGET {
                left_out += 1;
                continue;
            }
            used += size;
            self.agents.insert(key, summary);
        }
        if self.to_json().len() > SUMMARY_BUDGET {
            left_out += self.agents.len();
            self.agents.clear();
        }
        (self, left_out)
    }

    /// The variant a session of Agent `namespace/name` whose stickiness key is `key` gets
    /// (see [`crate::agent::pick_variant`]); none when the Agent runs no variants.
    pub fn pick_variant(&self, namespace: &str, name: &str, key: &str) -> Option<String> {
        let variants = self.variants.get(&format!("{namespace}/{name}"))?;
        crate::agent::pick_variant(variants.iter().map(|v| (v.name.as_str(), v.weight)), key).map(str::to_owned)
    }

    /// The console's summary of Agent `namespace/name`, if the table carries one.
    pub fn summary(&self, namespace: &str, name: &str) -> Option<&AgentSummary> {
        self.agents.get(&format!("{namespace}/{name}"))
    }

    /// Reads a table from the JSON stored under [`ROUTES_KEY`], checking apiVersion and kind.
    pub fn parse(text: &str) -> Result<Self, RoutingTableError> {
        let table: RoutingTable = serde_json::from_str(text).map_err(|e| RoutingTableError::Parse(e.to_string()))?;
        if table.api_version != crate::API_VERSION || table.kind != ROUTING_TABLE_KIND {
            return Err(RoutingTableError::Version { found: table.api_version, kind: table.kind });
        }
        Ok(table)
    }

    /// The JSON stored under [`ROUTES_KEY`]; equal tables give equal text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| unreachable!("RoutingTable serialises: {e}"))
    }

    /// The route of Agent `namespace/name`.
    pub fn route(&self, namespace: &str, name: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.namespace == namespace && r.name == name)
    }

    /// Every route that claims the phone `number` (E.164): one in a table the operator
    /// wrote; more only in a hand-written one.
    pub fn by_number(&self, number: &str) -> Vec<&Route> {
        self.routes.iter().filter(|r| r.numbers.iter().any(|n| n == number)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(ns: &str, name: &str) -> Route {
        Route {
            name: name.into(),
            namespace: ns.into(),
            mode: Mode::Text,
            service: format!("{name}.{ns}.svc"),
            port: RUNTIME_PORT,
            path: SESSION_PATH.into(),
            handoffs: vec![],
            expose: true,
            default: false,
            ready: false,
            ready_replicas: 0,
            redact: Vec::new(),
            identity_keys: crate::agent::default_identity_keys(),
            capacity: RouteCapacity::default(),
            numbers: vec![],
            analysis: None,
            answering_machine: None,
            app_context: Default::default(),
        }
    }

    #[test]
    fn a_namespace_switch_puts_every_agent_of_it_into_outage_mode_and_no_other() {
        let person = crate::agent::Person {
            name: "advisor".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        };
        let own = RouteOutage {
            active: false,
            person: Some(person),
            message: None,
            breaker: crate::agent::Breaker::default(),
            text: false,
        };
        let mut table = RoutingTable::new(vec![route("bank", "triage"), route("bank", "idv"), route("retail", "shop")]);
        table.outages.insert("bank/triage".into(), own.clone());
        assert_eq!(table.outage_in_effect("bank", "triage"), Some(own.clone()), "off: the Agent's own");
        assert_eq!(table.outage_in_effect("bank", "idv"), None, "off: none without spec.outage");

        table.namespace_outages.insert("bank".into(), NamespaceOutage { message: Some("Closed today.".into()) });
        let triage = table.outage_in_effect("bank", "triage").expect("its own, switched on");
        assert_eq!(triage, RouteOutage { active: true, ..own }, "its own fallback and breaker");
        let idv = table.outage_in_effect("bank", "idv").expect("the namespace's");
        assert!(idv.active && !idv.breaker.enabled, "{idv:?}");
        assert_eq!((idv.person, idv.message.as_deref()), (None, Some("Closed today.")));
        assert_eq!(table.outage_in_effect("retail", "shop"), None, "another namespace is not touched");
        let keys: Vec<_> = table.outages_in_effect().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["bank/idv", "bank/triage"]);
        // The table carries the switch through JSON.
        assert_eq!(RoutingTable::parse(&table.to_json()).expect("parses"), table);
    }

    #[test]
    fn the_namespace_switch_reads_true_or_false_and_says_what_else_is_wrong() {
        let data = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        assert_eq!(NamespaceOutage::from_data(&data(&[("active", "true")])), Ok(Some(NamespaceOutage::default())));
        assert_eq!(
            NamespaceOutage::from_data(&data(&[("active", " true\n"), ("message", "Closed.")])),
            Ok(Some(NamespaceOutage { message: Some("Closed.".into()) }))
        );
        assert_eq!(NamespaceOutage::from_data(&data(&[("active", "false")])), Ok(None));
        let wrong = NamespaceOutage::from_data(&data(&[("active", "yes")])).expect_err("not a boolean");
        assert!(wrong.contains("\"yes\""), "{wrong}");
        assert!(NamespaceOutage::from_data(&data(&[])).expect_err("missing").contains("data.active"));
        let long = "x".repeat(crate::agent::MAX_FALLBACK_MESSAGE + 1);
        assert!(NamespaceOutage::from_data(&data(&[("active", "true"), ("message", &long)])).is_err());
        assert!(NamespaceOutage::from_data(&data(&[("active", "true"), ("message", "  ")])).is_err());
    }

    #[test]
    fn a_namespaces_identity_keys_and_redaction_rules_are_those_of_all_its_agents() {
        let rule = |name: &str, pattern: &str| RedactRule { name: name.into(), pattern: pattern.into() };
        let mut idv = route("bank", "idv");
        idv.identity_keys = vec!["customer".into()];
        idv.redact = vec![rule("sort-code", "x"), rule("account", "y")];
        let mut banking = route("bank", "banking");
        banking.redact = vec![rule("account", "y")];
        let mut other = route("evil", "idv");
        other.identity_keys = vec!["boss".into()];
        other.redact = vec![rule("evil", "z")];
        let table = RoutingTable::new(vec![idv, banking, other, route("bank", "triage")]);
        assert_eq!(table.identity_keys("bank").into_iter().collect::<Vec<_>>(), ["customer", "verifiedUser"]);
        assert_eq!(table.identity_keys("nobody").into_iter().collect::<Vec<_>>(), ["verifiedUser"]);
        assert_eq!(table.redact_rules("bank"), [rule("account", "y"), rule("sort-code", "x")]);
        assert!(table.redact_rules("nobody").is_empty());
        // Default identity keys are left out of the JSON, and come back when read.
        let json = serde_json::to_value(&table).expect("json");
        assert!(json["routes"][0].get("identityKeys").is_none(), "{json}");
        assert_eq!(json["routes"][1]["identityKeys"], serde_json::json!(["customer"]));
        let read: RoutingTable = serde_json::from_value(json).expect("reads");
        assert_eq!(read, table);
    }

    #[test]
    fn tables_sort_and_round_trip() {
        let table = RoutingTable::new(vec![route("b", "x"), route("a", "z"), route("a", "y")]);
        let names: Vec<_> = table.routes.iter().map(|r| format!("{}/{}", r.namespace, r.name)).collect();
        assert_eq!(names, ["a/y", "a/z", "b/x"]);
        let parsed = RoutingTable::parse(&table.to_json()).expect("parses");
        assert_eq!(parsed, table);
        assert_eq!(parsed.route("b", "x").map(Route::url).as_deref(), Some("ws://x.b.svc:8080/v1/session"));
        assert!(table.to_json().contains("\"readyReplicas\": 0"));
    }

    #[test]
    fn other_kinds_are_refused() {
        let text = r#"{"apiVersion":"v1","kind":"RoutingTable","routes":[]}"#;
        assert!(matches!(RoutingTable::parse(text), Err(RoutingTableError::Version { .. })));
        assert!(matches!(RoutingTable::parse("nope"), Err(RoutingTableError::Parse(_))));
    }

    fn summary(name: &str, description_len: usize) -> AgentSummary {
        serde_json::from_value(serde_json::json!({
            "description": "d".repeat(description_len),
            "persona": {"name": "p", "display_name": name, "voice": "matthew", "language": "en-US"},
            "workflow": {"name": "w", "entry": "start", "nodes": [{"id": "start", "kind": "message"}]}
        }))
        .expect("a summary")
    }

    #[test]
    fn summaries_ride_along_while_the_table_fits_its_budget() {
        let table = RoutingTable::new(vec![route("a", "x"), route("a", "y")]);
        let (with, left_out) = table
            .clone()
            .with_summaries([("a/x".to_owned(), summary("X", 10)), ("a/gone".to_owned(), summary("G", 10))]);
        assert_eq!(left_out, 0);
        assert_eq!(with.summary("a", "x").map(|s| s.persona.display_name.as_str()), Some("X"));
        assert!(with.summary("a", "y").is_none() && with.agents.len() == 1, "only routed Agents: {:?}", with.agents);
        assert_eq!(RoutingTable::parse(&with.to_json()).expect("parses"), with);
        // Too large for one ConfigMap: the routes stay, summaries go past the budget.
        let routes: Vec<Route> = (0..400).map(|i| route("a", &format!("agent-{i:03}"))).collect();
        let big = (0..400).map(|i| (format!("a/agent-{i:03}"), summary("B", 2_000)));
        let (table, left_out) = RoutingTable::new(routes).with_summaries(big);
        assert_eq!(table.routes.len(), 400);
        assert!(left_out > 0 && !table.agents.is_empty(), "some fit, some not: {left_out}");
        assert_eq!(table.agents.len() + left_out, 400);
        assert!(table.to_json().len() <= SUMMARY_BUDGET, "{} bytes", table.to_json().len());
    }
}
