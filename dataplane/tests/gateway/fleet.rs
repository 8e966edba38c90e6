//! A fleet of runtime processes for the Example Bank agents, and a gateway routing to them
//! from a routing table and endpoints given directly (as the watchers would publish them).
//! The runtimes' warnings and errors are printed; with `FLEET_DEBUG` set, all their logs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use switchboard_crds::routing::{Route, RoutingTable, SESSION_PATH};
use switchboard_crds::{Catalog, RuntimeSpec, contract};
use switchboard_demo_tools::{Accounts, Callers, DemoTools, Trusted};
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_gateway::server::Server;
use switchboard_gateway::{Directory, Gateway, GatewayConfig};
use switchboard_record::Recorder;
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator, banking_script};
use tokio::sync::{oneshot, watch};

use crate::served;

/// The seed of the fleet gateway's private key.
pub const KEY: [u8; 32] = [7; 32];

/// One runtime process.
pub struct Pod {
    pub agent: String,
    pub addr: SocketAddr,
    child: Child,
}

impl Pod {
    /// Kills the process at once (SIGKILL), as a node failure would.
    pub fn kill(&mut self) {
        // A frozen process would not die of SIGKILL until it ran again.
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM, as the kubelet does to a pod being deleted or rolled.
    pub fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success(), "kill -TERM");
    }

    /// Freezes the process (SIGSTOP): its sockets stay open and answer nothing, as a hung
    /// or partitioned pod's would.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen process go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success(), "kill {signal}");
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `patience` for the process to exit; its status, if it did.
    pub async fn exited_within(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gateway replica: the gateway, its session URL, and its SIGTERM.
pub type Replica = (Arc<Gateway>, String, oneshot::Sender<()>);

async fn serve(
    config: GatewayConfig,
    directory: watch::Receiver<Directory>,
    auth: Auth,
    store: Store,
    record: Option<Arc<Recorder>>,
) -> Replica {
    let signer = switchboard_core::grant::GatewaySigner::from_seed(&KEY);
    let gateway = match record {
        Some(record) => Gateway::recording(config, directory, signer, auth, store, record),
        None => Gateway::new(config, directory, signer, auth, store),
    }
    .expect("gateway");
    let server = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), gateway.clone()).await.expect("binds");
    let url = format!("ws://{}{SESSION_PATH}", server.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    (gateway, url, stop)
}

pub struct Fleet {
    pub pods: Vec<Pod>,
    pub gateway: Arc<Gateway>,
    pub url: String,
    pub directory: watch::Sender<Directory>,
    /// The first gateway's SIGTERM: it drains when this is dropped.
    _stop: oneshot::Sender<()>,
    /// The simulator every pod talks to.
    pub sim: SimHandle,
    _tools: DemoTools,
    _dir: PathBuf,
}

impl Fleet {
    /// `replicas` runtime processes per agent (agents not named get one), a gateway.
    pub async fn start(replicas: &[(&str, usize)]) -> Self {
        Self::with_auth(replicas, Auth::default()).await
    }

    /// Like [`Fleet::start`], admitting clients by `auth`.
    pub async fn with_auth(replicas: &[(&str, usize)], auth: Auth) -> Self {
        Self::with(replicas, auth, GatewayConfig::default(), Store::default()).await
    }

    /// Like [`Fleet::start`], with the gateway's `auth`, `config` and session `store`.
    pub async fn with(replicas: &[(&str, usize)], auth: Auth, config: GatewayConfig, store: Store) -> Self {
        Self::with_script(replicas, auth, config, store, banking_script().expect("script")).await
    }

    /// Like [`Fleet::with`], the simulator running `script`.
    pub async fn with_script(
        replicas: &[(&str, usize)],
        auth: Auth,
        config: GatewayConfig,
        store: Store,
        script: Script,
    ) -> Self {
        Self::recording(replicas, auth, config, store, script, None).await
    }

    /// Like [`Fleet::with_script`], the gateway keeping the conversation record with `record`.
    pub async fn recording(
        replicas: &[(&str, usize)],
        auth: Auth,
        config: GatewayConfig,
        store: Store,
        script: Script,
        record: Option<Arc<Recorder>>,
    ) -> Self {
        Self::edited(replicas, auth, config, store, script, record, |_| {}).await
    }

    /// Like [`Fleet::recording`], each Agent's resolved spec changed by `edit` first (e.g. a
    /// Persona setting the example does not use).
    pub async fn edited(
        replicas: &[(&str, usize)],
        auth: Auth,
        config: GatewayConfig,
        store: Store,
        script: Script,
        record: Option<Arc<Recorder>>,
        edit: impl Fn(&mut RuntimeSpec),
    ) -> Self {
        let sim = Simulator::start(SimConfig::new(script)).await.expect("simulator");
        let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
        let accounts = Accounts::load(&examples.join("tools/accounts.yaml")).expect("accounts");
        // The tool server acts only for the caller the gateway's identity assertion names.
        let key = switchboard_core::grant::GatewaySigner::from_seed(&KEY).public();
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let trusted = Trusted::new(key.into(), ["bank"]).expect("trusted");
        let tools = DemoTools::start(accounts, addr, Callers::Verified(trusted)).await.expect("tool server");
        let dir = std::env::temp_dir().join(format!("switchboard-fleet-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let public_key = switchboard_core::grant::GatewaySigner::from_seed(&KEY).public().to_string();
        let catalog = Catalog::load_paths(&[examples]).expect("examples");
        let mut routes = Vec::new();
        let mut pods = Vec::new();
        for agent in catalog.agents() {
            let mut spec = catalog.resolve_agent(agent).expect("resolves");
            // The fleet's Agents live in namespace bank, as the routes say (grants are bound to it).
            spec.agent.namespace = "bank".into();
            // The example's triage speaks first (a phone caller hears its greeting); the
            // fleet's tests were written for agents that listen first, so theirs do unless
            // `edit` says otherwise (handoff_greeting.rs, region.rs, turn_taking.rs do).
            spec.persona.spec.speak_first = false;
            edit(&mut spec);
            let name = spec.agent.name.clone();
            let spec_path = write_spec(&dir, &name, &spec, tools.addr);
            let count = replicas.iter().find(|(a, _)| *a == name).map_or(1, |(_, n)| *n);
            for _ in 0..count {
                pods.push(spawn(&name, spec.mode.as_str(), &spec_path, &public_key, &sim));
            }
            routes.push(Route {
                name: name.clone(),
                namespace: spec.agent.namespace.clone(),
                mode: spec.mode,
                service: format!("{name}.bank.svc"),
                port: contract::RUNTIME_PORT,
                path: SESSION_PATH.into(),
                handoffs: spec.handoffs.iter().map(|h| h.agent.clone()).collect(),
                expose: spec.gateway.expose,
                default: spec.gateway.default,
                ready: true,
                ready_replicas: i32::try_from(count).unwrap_or(1),
                redact: spec.record.redact.clone(),
                identity_keys: spec.identity_keys.clone(),
                capacity: switchboard_crds::routing::RouteCapacity::of(&spec.capacity, &spec.model, spec.mode),
                numbers: spec.telephony.numbers.clone(),
                analysis: spec.record.analysis.clone(),
                app_context: spec.app_context.clone(),
                answering_machine: spec.telephony.answering_machine.clone(),
            });
        }
        let mut endpoints: HashMap<(String, String), Vec<SocketAddr>> = HashMap::new();
        for pod in &pods {
            let namespace = routes.iter().find(|r| r.name == pod.agent).map_or("bank", |r| r.namespace.as_str());
            endpoints.entry((namespace.to_owned(), pod.agent.clone())).or_default().push(pod.addr);
        }
        let (directory, rx) =
            watch::channel(Directory::new(Arc::new(RoutingTable::new(routes)), Arc::new(endpoints), None));
        let (gateway, url, stop) = serve(config, rx.clone(), auth, store, record).await;
        Self { pods, gateway, url, directory, _stop: stop, sim, _tools: tools, _dir: dir }
    }

    /// Another gateway replica in front of the same pods, with its own `auth` (the same
    /// keys) and `store`: (gateway, URL, its SIGTERM).
    pub async fn replica(&self, auth: Auth, config: GatewayConfig, store: Store) -> Replica {
        serve(config, self.directory.subscribe(), auth, store, None).await
    }

    /// Holds `agent`'s rollout as the operator does for an AgentTest with `gateRollout`: a
    /// candidate pod runs its spec changed by `edit`, behind the Service
    /// `<agent>-candidate` that the routing table now lists. Returns the candidate's address.
    pub fn hold(&mut self, agent: &str, edit: impl Fn(&mut RuntimeSpec)) -> SocketAddr {
        let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
        let catalog = Catalog::load_paths(&[examples]).expect("examples");
        let found = catalog.agents().find(|a| a.metadata.name.as_deref() == Some(agent)).expect("the agent");
        let mut spec = catalog.resolve_agent(found).expect("resolves");
        spec.agent.namespace = "bank".into();
        edit(&mut spec);
        let name = format!("{agent}-candidate");
        let spec_path = write_spec(&self._dir, &name, &spec, self._tools.addr);
        let public_key = switchboard_core::grant::GatewaySigner::from_seed(&KEY).public().to_string();
        let pod = spawn(&name, spec.mode.as_str(), &spec_path, &public_key, &self.sim);
        let addr = pod.addr;
        self.pods.push(pod);
        let mut table = self.directory.borrow().table().clone();
        table.candidates.insert(format!("bank/{agent}"), format!("{name}.bank.svc"));
        self.publish(table);
        addr
    }

    /// Publishes `table` with the endpoints of the fleet's running pods (a candidate's under
    /// `<agent>-candidate`), as the watchers would.
    pub fn publish(&mut self, table: RoutingTable) {
        let mut endpoints: HashMap<(String, String), Vec<SocketAddr>> = HashMap::new();
        for pod in self.pods.iter_mut().filter_map(|p| p.running().then_some(&*p)) {
            endpoints.entry(("bank".into(), pod.agent.clone())).or_default().push(pod.addr);
        }
        self.directory.send_replace(Directory::new(Arc::new(table), Arc::new(endpoints), None));
    }

    /// The pods of `agent`.
    pub fn pods_of(&mut self, agent: &str) -> impl Iterator<Item = &mut Pod> {
        self.pods.iter_mut().filter(move |p| p.agent == agent)
    }
}

/// Writes `spec` for the runtime named `name`; the tool host, a Service name on a cluster,
/// is the tool server's address here.
fn write_spec(dir: &std::path::Path, name: &str, spec: &RuntimeSpec, tools: SocketAddr) -> PathBuf {
    let json = spec.to_canonical_json().replace("banking-tools:8080", &tools.to_string());
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, json).expect("spec");
    path
}

fn spawn(agent: &str, mode: &str, spec: &std::path::Path, public_key: &str, sim: &SimHandle) -> Pod {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, spec)
        .env(contract::env::MODE, mode)
        // Port 0: the runtime binds a free port itself and logs it (no port to race for).
        .env(contract::env::LISTEN, "127.0.0.1:0")
        .env(contract::env::GATEWAY_PUBLIC_KEY, public_key)
        .env("SWITCHBOARD_BEDROCK_ENDPOINT", sim.endpoint_url())
        .env("SWITCHBOARD_BEDROCK_CA_FILE", sim.ca_cert_path().expect("cert"))
        .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-secret")
        .env("SWITCHBOARD_LOG", "info")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env("NO_COLOR", "1");
    let name = agent.to_owned();
    let (child, addr) = served::spawn_serving(command, "runtime serving", Duration::from_secs(60), move |line| {
        if line.contains("ERROR") || line.contains("WARN") || std::env::var_os("FLEET_DEBUG").is_some() {
            eprintln!("[{name}] {line}");
        }
    });
    Pod { agent: agent.to_owned(), addr, child }
}
