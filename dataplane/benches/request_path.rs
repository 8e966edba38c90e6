//! Where a text turn's request path spends its time: one turn after another (no
//! concurrency, so no queueing), timed stage by stage with an SDK interceptor:
//!
//! 1. the agent core's `Session::handle` of the user's text (prompt, tools, the request);
//! 2. from the model call to the SDK's serialisation (the request's copy and conversion to
//!    SDK types, the orchestrator's configuration);
//! 3. the SDK's serialisation of the request to JSON;
//! 4. from there to signing (retry loop, endpoint resolution);
//! 5. SigV4 signing (identity, canonical request, signature);
//! 6. from transmit to the first model event: HTTP/2 + TLS both ways, the simulator's
//!    parsing and reply (its time to first token is 0 here), event-stream decoding.
//!
//! The real `aws-sdk-bedrockruntime` client talks to the simulator over TLS and HTTP/2;
//! the simulator runs on its own thread with its own tokio runtime. This process uses the
//! same global allocator as the `switchboard` binary.
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench request_path
//! ```
//!
//! Environment: `BENCH_TURNS` (default 500; the first 20 are warm-up and not counted).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_bedrockruntime::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_bedrockruntime::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_bedrockruntime::error::BoxError;
use futures_util::StreamExt;
use switchboard_core::{AgentCore, Effect, Input, Session, SessionInit};
use switchboard_crds::Catalog;
use switchboard_models::TextModel;
use switchboard_models::bedrock::{BedrockTextModel, build_client};
use switchboard_sim::{Script, SimConfig, Simulator};

#[path = "measure/mod.rs"]
mod measure;
use measure::{env_or, percentile};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WARM_UP: usize = 20;

/// The instants at which the SDK reached each interceptor hook of one call.
#[derive(Debug, Clone, Default)]
struct Marks(Arc<Mutex<Vec<Instant>>>);

impl Marks {
    fn mark(&self) {
        self.0.lock().expect("marks lock").push(Instant::now());
    }

    fn take(&self) -> Vec<Instant> {
        std::mem::take(&mut *self.0.lock().expect("marks lock"))
    }
}

/// Implements the named read-only hooks of [`Intercept`], each marking the instant the SDK
/// reached it.
macro_rules! mark_at {
    ($($hook:ident: $context:ident),* $(,)?) => {
        $(
            fn $hook(&self, _: &$context<'_>, _: &RuntimeComponents, _: &mut ConfigBag) -> Result<(), BoxError> {
                self.mark();
                Ok(())
            }
        )*
    };
}

impl Intercept for Marks {
    fn name(&self) -> &'static str {
        "request_path_marks"
    }

    mark_at!(
        read_before_serialization: BeforeSerializationInterceptorContextRef,
        read_after_serialization: BeforeTransmitInterceptorContextRef,
        read_before_signing: BeforeTransmitInterceptorContextRef,
        read_before_transmit: BeforeTransmitInterceptorContextRef,
    );
}

const STAGES: [&str; 7] = [
    "core: Session::handle",
    "request copy + SDK conversion",
    "SDK: serialise",
    "SDK: endpoint, retry loop",
    "SDK: SigV4 sign",
    "transmit -> first event",
    "total",
];

fn main() {
    let turns: usize = env_or("BENCH_TURNS", 500usize).max(WARM_UP + 1);
    let (config_tx, config_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        runtime.block_on(async move {
            let script = Script::parse(
                "timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0, tokensPerDelta: 8 }\ndefault: { text: \"You said: {text}. Here is a reply of a few words.\" }\n",
            )
            .expect("the script parses");
            let sim = Simulator::start(SimConfig::new(script)).await.expect("the simulator starts");
            config_tx.send(switchboard_models::bedrock::BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path())).expect("sends the config");
            std::future::pending::<()>().await;
        });
    });
    let config = config_rx.recv().expect("the simulator's config");
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        let marks = Marks::default();
        let client = build_client(&config).await.expect("the client builds");
        let client =
            aws_sdk_bedrockruntime::Client::from_conf(client.config().to_builder().interceptor(marks.clone()).build());
        let model = BedrockTextModel::from_client(client);
        let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
        let catalog = Catalog::load_paths(&[examples]).expect("the examples load");
        let triage = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("triage")).expect("triage");
        let core = Arc::new(AgentCore::new(catalog.resolve_agent(triage).expect("resolves")).expect("runnable"));
        let mut stages: Vec<Vec<f64>> = vec![Vec::with_capacity(turns); STAGES.len()];
        let mut request_bytes = 0;
        for i in 0..turns {
            let init =
                SessionInit { session_id: format!("s{i}"), today: "2026-11-22".into(), ..SessionInit::default() };
            let (mut session, _) = Session::start(core.clone(), init);
            marks.take();
            let start = Instant::now();
            let effects = session.handle(Input::user_text(format!("session {i} turn 0")), Instant::now());
            let handled = Instant::now();
            let request = effects
                .into_iter()
                .find_map(|e| if let Effect::CallModel(r) = e { Some(r) } else { None })
                .expect("the turn calls the model");
            let mut stream = model.stream(&request);
            let first = stream.next().await;
            let first_event = Instant::now();
            assert!(matches!(first, Some(Ok(_))), "the model call failed: {first:?}");
            while stream.next().await.is_some() {}
            let hooks = marks.take();
            let [serialising, serialised, signing, transmitting] = hooks[..] else {
                panic!("expected 4 interceptor marks, got {}", hooks.len());
            };
            if i < WARM_UP {
                continue;
            }
            request_bytes = serde_json::to_vec(&request).map_or(0, |v| v.len());
            let points = [start, handled, serialising, serialised, signing, transmitting, first_event];
            for (k, pair) in points.windows(2).enumerate() {
                stages[k].push((pair[1] - pair[0]).as_secs_f64() * 1e6);
            }
            stages[STAGES.len() - 1].push((first_event - start).as_secs_f64() * 1e6);
        }
        println!(
            "{} turns of the triage agent (request {request_bytes} bytes as JSON), one after another; microseconds",
            turns - WARM_UP
        );
        println!("{:>32} {:>9} {:>9}", "stage", "median", "p90");
        for (name, mut values) in STAGES.iter().zip(stages) {
            values.sort_by(f64::total_cmp);
            println!("{name:>32} {:>9.1} {:>9.1}", percentile(&values, 0.5), percentile(&values, 0.9));
        }
    });
}
