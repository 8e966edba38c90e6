//! `switchboard gateway`: the session gateway — one WebSocket endpoint for every Agent of
//! the cluster, following the operator's routing table and the Agents' ready endpoints,
//! and publishing its public key for the operator to give runtime pods.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use switchboard_core::grant::GatewaySigner;
use switchboard_crds::contract;
use switchboard_crds::gateway_key::PublicKey;
use switchboard_gateway::publish;
use switchboard_gateway::resume::Store;
use switchboard_gateway::server::Server;
use switchboard_gateway::static_routes;
use switchboard_gateway::watch::{self, Sources};
use switchboard_gateway::{Gateway, GatewayConfig, budget};
use switchboard_webrtc_edge::Edge;

/// Options of `switchboard gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Address to serve `/v1/session`, `/healthz`, `/readyz` and `/metrics` on.
    #[arg(long, env = contract::env::LISTEN, default_value = contract::LISTEN_ADDR)]
    listen: SocketAddr,

    /// The gateway's Ed25519 private key, PKCS#8 PEM (`openssl genpkey -algorithm ed25519`;
    /// the Helm chart generates it into a Secret that only the gateway mounts): the gateway
    /// signs the session context it gives runtimes, which verify it with the public key.
    #[arg(long, env = contract::env::GATEWAY_KEY_FILE)]
    gateway_key_file: PathBuf,

    /// Publish the public key (no secret) in this ConfigMap of --routes-namespace, under
    /// `public-key`, when the gateway starts: the operator reads it there and gives it to
    /// runtime pods (the Helm chart creates the ConfigMap, lets the gateway patch it, and
    /// tells the operator its name). Not done with --routes-file.
    #[arg(long, env = contract::env::GATEWAY_KEY_CONFIG_MAP)]
    public_key_config_map: Option<String>,

    /// Namespace of the routing table ConfigMap (the operator's namespace).
    #[arg(long, env = "SWITCHBOARD_ROUTES_NAMESPACE", default_value = "switchboard-system")]
    routes_namespace: String,

    /// Name of the routing table ConfigMap.
    #[arg(long, env = "SWITCHBOARD_ROUTES_NAME", default_value = switchboard_crds::routing::DEFAULT_ROUTES_NAME)]
    routes_name: String,

    /// Route by this routing table file instead of the cluster's (the operator's JSON
    /// format; each route's `service:port` is the runtime's address; re-read when it
    /// changes): a gateway without Kubernetes.
    #[arg(long, env = "SWITCHBOARD_ROUTES_FILE")]
    routes_file: Option<PathBuf>,

    /// Route to Agents of this namespace only (default: every namespace the table lists).
    #[arg(long, env = "SWITCHBOARD_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,

    /// The Agent (`<namespace>/<name>` or a bare name) of sessions that name none; default:
    /// the one Agent with `gateway.default: true`.
    #[arg(long, env = "SWITCHBOARD_DEFAULT_AGENT")]
    default_agent: Option<String>,

    /// Largest client message in bytes; larger ones close the session with 1009.
    #[arg(long, env = "SWITCHBOARD_MAX_MESSAGE_BYTES", default_value_t = 65536)]
    max_message_bytes: usize,

    /// Most concurrent sessions; more are refused with 1013.
    #[arg(long, env = "SWITCHBOARD_MAX_SESSIONS", default_value_t = 10_000)]
    max_sessions: usize,

    /// Most connections the listener holds at once (WebSockets included); more are
    /// answered HTTP 503 with `Retry-After: 1` and closed, and counted in
    /// `switchboard_gateway_sessions_refused_total{reason="max_connections"}`. Default:
    /// `--max-sessions` plus 1024, and with a container memory limit at most one
    /// connection per 128 KiB of it (4096 for 512 MiB), so that clients holding
    /// connections open cannot exhaust the memory.
    #[arg(long, env = "SWITCHBOARD_MAX_CONNECTIONS")]
    max_connections: Option<usize>,

    /// Outbound calls (`POST /v1/calls`) under way at once on this replica; more are
    /// answered 429.
    #[arg(long, env = "SWITCHBOARD_MAX_OUTBOUND_CALLS", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_outbound_calls: u64,

    /// Outbound calls one API key may place a minute (bursts of as many); more are
    /// answered 429.
    #[arg(long, env = "SWITCHBOARD_OUTBOUND_CALLS_PER_MINUTE", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    outbound_calls_per_minute: u32,

    #[command(flatten)]
    call_webhooks: super::call_webhook::CallWebhookArgs,

    /// Seconds a connection has to send a whole HTTP request head, from its start or from
    /// its previous response (so also how long an idle keep-alive connection stays open);
    /// slower ones are closed.
    #[arg(long, env = "SWITCHBOARD_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10)]
    header_read_timeout_seconds: u64,

    /// Seconds live sessions may go on after SIGTERM before their clients are told to
    /// reconnect (close 1001).
    #[arg(long, env = "SWITCHBOARD_DRAIN_SECONDS", default_value_t = 30)]
    drain_seconds: u64,

    /// Seconds the listener stays open after SIGTERM, answering new connections with 1013
    /// (try again), while the Service's endpoints and every node's proxy drop this replica;
    /// runs beside the drain. A shorter time than the cluster takes to stop routing here
    /// makes clients fail their WebSocket handshake during a rollout.
    #[arg(long, env = "SWITCHBOARD_SHUTDOWN_DELAY_SECONDS", default_value_t = 5)]
    shutdown_delay_seconds: u64,

    /// Serve the web console (`/`, the page `switchboard local` serves) for people to talk to
    /// the cluster's Agents, watch them work and open recorded sessions. Off by default. Its
    /// page asks for an API key or token when the gateway wants one; its agent list and
    /// sessions are checked as any client's, and its own origin may open sessions.
    #[arg(long, env = "SWITCHBOARD_CONSOLE")]
    console: bool,

    /// Without credentials (no --api-keys-file, no JWT): let any client open test sessions on
    /// the candidate pods of Agents whose rollout waits for their AgentTests
    /// (`session_start.candidate`). Off by default: such a session runs a spec nobody has
    /// approved yet, so it needs a credential marked for tests (`candidates=test`, or a
    /// token with the candidates scope). With credentials it has no effect.
    #[arg(long, env = "SWITCHBOARD_OPEN_TEST_SESSIONS")]
    open_test_sessions: bool,

    /// Redis (`redis://host:6379`, `rediss://` for TLS) shared by every gateway replica:
    /// a client resumes its session through any of them, a draining replica moves its
    /// sessions at once, and an Agent's outage breaker tripped by one replica opens on the
    /// others too. Without it, sessions wait for resume in this process only.
    /// Credentials go in the URL (`redis://:password@host:6379`, or `user:password@` with
    /// Redis ACLs; the chart reads it from a Secret). The gateway starts and serves new
    /// sessions while Redis is down; resumes are refused with 1013 until it answers.
    #[arg(long, env = "SWITCHBOARD_REDIS_URL")]
    redis_url: Option<String>,

    /// PEM CA certificates trusted for a `rediss://` --redis-url (a private CA).
    #[arg(long, env = "SWITCHBOARD_REDIS_CA_FILE", requires = "redis_url")]
    redis_ca_file: Option<PathBuf>,

    /// Seconds a session whose client went away waits for it to resume (with the token
    /// of its latest `bidi_connection_start`).
    #[arg(long, env = "SWITCHBOARD_RESUME_SECONDS", default_value_t = 30)]
    resume_seconds: u64,

    /// Bytes of recent messages kept per session, replayed to a client that resumes.
    #[arg(long, env = "SWITCHBOARD_REPLAY_BUFFER_BYTES", default_value_t = 1024 * 1024)]
    replay_buffer_bytes: usize,

    /// PEM CA certificates trusted, on top of the system's roots, for --jwks-url (a private
    /// identity provider) and --record-webhook-url.
    #[arg(long, env = "SWITCHBOARD_CA_FILE")]
    ca_file: Option<PathBuf>,

    /// Most messages a second one session may send (bursts of twice that); more close it
    /// with 1008. Voice sends 50 audio frames a second.
    #[arg(long, env = "SWITCHBOARD_MAX_MESSAGES_PER_SECOND", default_value_t = 200)]
    max_messages_per_second: u32,

    /// Seconds a session may go without a message from its client before it is closed
    /// with 4408.
    #[arg(long, env = "SWITCHBOARD_IDLE_SECONDS", default_value_t = 600)]
    idle_seconds: u64,

    /// Seconds between WebSocket pings to each client and each runtime connection.
    #[arg(long, env = "SWITCHBOARD_PING_SECONDS", default_value_t = 5)]
    ping_seconds: u64,

    /// Milliseconds of the caller's audio gathered into one frame to the runtime (a frame
    /// waits at most this long): fewer, larger frames cost the gateway and the runtime less
    /// CPU per call. The runtime is told, and no longer gathers them for its own events to
    /// the voice model when those are no longer (`--voice-audio-chunk-ms`, the same default):
    /// the audio reaches the model when it did. 0 sends each frame as it comes.
    #[arg(long, env = "SWITCHBOARD_AUDIO_BATCH_MS",
          default_value_t = switchboard_runtime::DEFAULT_VOICE_AUDIO_CHUNK.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(0..=200))]
    audio_batch_ms: u64,

    /// Seconds of silence (not even a pong) after which a client counts as gone (its
    /// session parks for resume) or a runtime as lost (the session moves to another pod).
    #[arg(long, env = "SWITCHBOARD_PING_TIMEOUT_SECONDS", default_value_t = 15)]
    ping_timeout_seconds: u64,

    /// Bytes all sessions together may hold (replay buffers, history, memory, typed inputs,
    /// and a fixed overhead a session) before new sessions are refused with 1013
    /// (`memory_budget`); past it, live sessions shed most of their replay buffers. Default:
    /// 60 % of the container's memory limit (cgroup), or none without one; 0: none.
    #[arg(long, env = "SWITCHBOARD_MEMORY_BUDGET_BYTES")]
    memory_budget_bytes: Option<usize>,

    /// The WebRTC edge (`POST /v1/webrtc`): the UDP address its one socket binds, every
    /// call multiplexed on it (e.g. `0.0.0.0:3478`). Off when not given.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_UDP")]
    webrtc_udp: Option<SocketAddr>,

    /// The address WebRTC clients reach that socket at, put in the SDP answers' candidates:
    /// an IP (the bound port) or IP:port, for pods behind a NAT or a load balancer. Default:
    /// the bound address (which then must be a specific IP).
    #[arg(long, env = "SWITCHBOARD_WEBRTC_ADVERTISE", value_parser = parse_advertise)]
    webrtc_advertise: Option<SocketAddr>,

    /// ICE-TCP, the fallback for clients whose network blocks UDP: the TCP address the edge
    /// listens on beside its UDP socket (e.g. `0.0.0.0:3478`), offered in every answer as a
    /// passive TCP candidate at the advertised IP and this port. Off when not given.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_TCP")]
    webrtc_tcp: Option<SocketAddr>,

    /// Most WebRTC calls at once; more offers are answered 503.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_MAX_CALLS", default_value_t = switchboard_webrtc_edge::DEFAULT_MAX_CALLS)]
    webrtc_max_calls: usize,

    /// How hard libopus works on each 20 ms frame of reply audio, 0-10: the largest part of
    /// the CPU a WebRTC call costs the gateway. 5 (libwebrtc's on phones) keeps a voice's
    /// spectrum as 9 (libopus's own default) does for about a quarter less; 4 and below lose
    /// some of it.
    #[arg(long, env = "SWITCHBOARD_WEBRTC_OPUS_COMPLEXITY", default_value_t = switchboard_webrtc_edge::DEFAULT_OPUS_COMPLEXITY,
          value_parser = clap::value_parser!(u8).range(0..=10))]
    webrtc_opus_complexity: u8,

    #[command(flatten)]
    auth: super::gateway_auth::AuthArgs,

    #[command(flatten)]
    turn: super::turn::TurnArgs,

    #[command(flatten)]
    record: super::record::RecordArgs,

    #[command(flatten)]
    capacity: super::capacity::CapacityArgs,

    #[command(flatten)]
    app_context: super::app_context::AppContextArgs,
}

/// `--webrtc-advertise`: IP:port, or an IP (port 0: the bound port).
fn parse_advertise(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
        .map_err(|_| format!("{text:?} is neither an IP address nor IP:port"))
}

/// Serves until SIGTERM/SIGINT, then drains.
pub async fn run(args: GatewayArgs) -> anyhow::Result<()> {
    let GatewayArgs {
        listen,
        gateway_key_file,
        public_key_config_map,
        routes_namespace,
        routes_name,
        routes_file,
        watch_namespace,
        default_agent,
        max_message_bytes,
        max_sessions,
        max_connections,
        header_read_timeout_seconds,
        drain_seconds,
        shutdown_delay_seconds,
        console,
        open_test_sessions,
        redis_url,
        redis_ca_file,
        resume_seconds,
        replay_buffer_bytes,
        ca_file,
        max_messages_per_second,
        idle_seconds,
        ping_seconds,
        audio_batch_ms,
        ping_timeout_seconds,
        memory_budget_bytes,
        webrtc_udp,
        webrtc_advertise,
        webrtc_tcp,
        webrtc_max_calls,
        webrtc_opus_complexity,
        auth,
        turn,
        record,
        capacity,
        app_context,
        max_outbound_calls,
        outbound_calls_per_minute,
        call_webhooks,
    } = args;
    anyhow::ensure!(webrtc_advertise.is_none() || webrtc_udp.is_some(), "--webrtc-advertise needs --webrtc-udp");
    anyhow::ensure!(webrtc_tcp.is_none() || webrtc_udp.is_some(), "--webrtc-tcp needs --webrtc-udp");
    anyhow::ensure!(webrtc_max_calls > 0, "--webrtc-max-calls must be above 0");
    let turn = turn.turn()?;
    anyhow::ensure!(turn.urls.is_empty() || webrtc_udp.is_some(), "--webrtc-turn needs --webrtc-udp");
    auth.check()?;
    anyhow::ensure!(max_messages_per_second > 0, "--max-messages-per-second must be above 0");
    anyhow::ensure!(idle_seconds > 0, "--idle-seconds must be above 0");
    anyhow::ensure!(
        ping_seconds > 0 && ping_timeout_seconds > ping_seconds,
        "--ping-seconds must be above 0 and --ping-timeout-seconds above it"
    );
    let mut auth = auth.auth(ca_file.as_deref()).await?;
    auth = app_context.apply(auth)?;
    if console {
        auth = auth.with_own_page();
    }
    if !auth.requires_keys() {
        tracing::warn!("no --api-keys-file: any client that reaches the gateway may open sessions");
        if open_test_sessions {
            tracing::warn!("--open-test-sessions: any client may open test sessions on candidate pods");
            auth = auth.with_open_tests();
        }
    }
    let pem = std::fs::read_to_string(&gateway_key_file).map_err(|e| {
        anyhow::anyhow!("cannot read the gateway key {}: {e}; check --gateway-key-file", gateway_key_file.display())
    })?;
    let key = GatewaySigner::from_pem(&pem).map_err(|e| anyhow::anyhow!("{}: {e}", gateway_key_file.display()))?;
    tracing::info!(public_key = %key.public(), "runtimes verify this gateway's session context with its public key");
    // On a cluster: the client the outage Events go out through.
    let mut events_client = None;
    let directory = match routes_file {
        Some(path) => {
            if let Some(name) = &public_key_config_map {
                tracing::warn!(configmap = %name, "routing by a file, without Kubernetes: the public key is not published");
            }
            static_routes::from_file(path, default_agent).await?
        }
        None => {
            let client = watch::connect()
                .await
                .map_err(|e| anyhow::anyhow!("cannot configure a Kubernetes client (kubeconfig or in-cluster): {e}"))?;
            if let Some(name) = public_key_config_map {
                let public: PublicKey = key.public().to_string().parse()?;
                publish::spawn(client.clone(), routes_namespace.clone(), name, public);
            }
            let sources = Sources { routes_namespace, routes_name, namespace: watch_namespace, default_agent };
            events_client = Some(client.clone());
            watch::start(client, sources)
        }
    };
    let redis_ca =
        match &redis_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                anyhow::anyhow!("cannot read the Redis CA {}: {e}; check --redis-ca-file", path.display())
            })?),
            None => None,
        };
    let capacity = capacity.config(redis_url.clone().map(|url| (url, redis_ca.clone())))?;
    let outage_ca = redis_ca.clone();
    let store = match &redis_url {
        Some(url) => {
            let ca = redis_ca;
            let store = Store::redis(url, key.clone(), ca).map_err(|e| anyhow::anyhow!("{e}; check --redis-url"))?;
            let probe = store.clone();
            tokio::spawn(async move {
                match probe.ping().await {
                    Ok(()) => {
                        tracing::info!("sessions wait for resume in Redis, shared with the other gateway replicas")
                    }
                    Err(error) => tracing::warn!(
                        "{error}; new sessions are served, resumes are refused until Redis answers (check --redis-url)"
                    ),
                }
            });
            store
        }
        None => Store::default(),
    };
    let config = GatewayConfig {
        max_message_bytes,
        max_sessions,
        drain_timeout: Duration::from_secs(drain_seconds),
        shutdown_delay: Duration::from_secs(shutdown_delay_seconds),
        resume_window: Duration::from_secs(resume_seconds),
        replay_bytes: replay_buffer_bytes,
        session_rate: max_messages_per_second,
        idle_timeout: Duration::from_secs(idle_seconds),
        ping_interval: Duration::from_secs(ping_seconds),
        audio_batch: Duration::from_millis(audio_batch_ms),
        ping_timeout: Duration::from_secs(ping_timeout_seconds),
        memory_budget: match memory_budget_bytes {
            Some(0) => None,
            Some(bytes) => Some(bytes),
            None => budget::default_budget(budget::container_memory_limit()),
        },
        http: switchboard_serve::Limits {
            header_read_timeout: Duration::from_secs(header_read_timeout_seconds),
            max_connections: max_connections
                .unwrap_or_else(|| default_max_connections(max_sessions, budget::container_memory_limit())),
        },
        capacity,
        calls: switchboard_gateway::calls::CallsConfig {
            max_live: usize::try_from(max_outbound_calls).unwrap_or(usize::MAX),
            per_minute: outbound_calls_per_minute,
        },
        call_webhooks: call_webhooks.config(ca_file.as_deref())?,
        ..GatewayConfig::default()
    };
    match config.memory_budget {
        Some(bytes) => tracing::info!(
            budget_mib = bytes >> 20,
            session_bound_kib = config.session_bound() >> 10,
            "new sessions are refused while the sessions' bytes leave no room for one more"
        ),
        None => tracing::info!("no memory budget (no container memory limit, or --memory-budget-bytes 0)"),
    }
    let record = record.start(None, ca_file.as_deref(), config.resume_window).await?;
    let gateway = match &record {
        Some(task) => Gateway::recording(config, directory, key, auth, store, task.recorder.clone())?,
        None => Gateway::new(config, directory, key, auth, store)?,
    };
    if let Some(url) = &redis_url {
        // A breaker's trip reaches the other replicas through the same Redis.
        switchboard_gateway::outage::share(&gateway, url, outage_ca)
            .map_err(|e| anyhow::anyhow!("{e}; check --redis-url"))?;
    }
    if let Some(client) = events_client {
        // Each breaker change of an Agent's outage mode is an Event on the Agent.
        let instance = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_default();
        tokio::spawn(switchboard_gateway::outage::publish_events(client, instance, gateway.outages.events()));
    }
    let stop = super::shutdown_signal()?;
    let webrtc = webrtc_udp.map(|listen| switchboard_webrtc_edge::WebrtcConfig {
        listen,
        advertise: webrtc_advertise,
        tcp: webrtc_tcp,
        max_calls: webrtc_max_calls,
        opus_complexity: webrtc_opus_complexity,
        turn,
        ..switchboard_webrtc_edge::WebrtcConfig::default()
    });
    let mut server = Server::bind(listen, gateway.clone()).await?;
    server = match webrtc {
        Some(webrtc) => server.with_channel(Edge::bind(&webrtc, gateway.config.max_message_bytes).await?),
        None => server.with_routes(switchboard_webrtc_edge::off_routes(gateway.clone())),
    };
    if console {
        server = server.with_routes(switchboard_console::gateway::routes(gateway));
        tracing::info!("the web console is served at /");
    }
    tracing::info!(addr = %server.local_addr()?, "gateway serving /v1/session");
    let served = server.run(stop).await;
    if let Some(record) = record {
        record.finish().await;
    }
    served?;
    Ok(())
}

/// Memory one connection may cost before it is a session, for the default cap: a request
/// head of up to 64 KiB being read, and its task and buffers.
const CONNECTION_MEMORY: usize = 128 * 1024;

/// `--max-connections` when not given: the sessions plus headroom, and no more than the
/// container's memory `limit` (when known) holds at [`CONNECTION_MEMORY`] each.
fn default_max_connections(max_sessions: usize, limit: Option<usize>) -> usize {
    let wanted = max_sessions.saturating_add(switchboard_gateway::CONNECTION_HEADROOM);
    limit.map_or(wanted, |limit| wanted.min(limit / CONNECTION_MEMORY).max(64))
}
