//! Variants compared on live traffic: the triage Agent's runtimes hold two variants (the
//! Agent's own, Ava, and `zoe`: another Persona and text model), the routing table gives
//! their weights, and the gateway picks one per new session. New sessions split by weight;
//! a resumed session keeps its variant when the weights move; the new weights take effect
//! on the same runtime processes (no redeploy); the gateway's metrics count what the
//! runtimes served.

use std::collections::BTreeMap;

use switchboard_core::protocol::ServerMessage;
use switchboard_crds::RuntimeSpec;
use switchboard_crds::routing::RouteVariant;
use switchboard_crds::runtime::{NamedPersona, RuntimeVariant};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::resume::{position, resume_start};

/// The `zoe` variant's text model (the Agent's own is the example's default).
const ZOE_MODEL: &str = "amazon.nova-micro-v1:0";

/// The triage Agent with a `zoe` variant: its own Persona (greeting as Zoe) and text model.
fn with_zoe(spec: &mut RuntimeSpec) {
    if spec.agent.name != "triage" {
        return;
    }
    let mut persona = spec.persona.spec.clone();
    persona.display_name = "Zoe".into();
    persona.greeting = Some("Hello, you're through to Example Bank. I'm Zoe. How can I help?".into());
    spec.variants = vec![
        RuntimeVariant {
            name: "control".into(),
            persona: None,
            workflow: None,
            text_model_id: None,
            system_prompt: None,
        },
        RuntimeVariant {
            name: "zoe".into(),
            persona: Some(NamedPersona { name: "triage-zoe".into(), spec: persona }),
            workflow: None,
            text_model_id: Some(ZOE_MODEL.into()),
            system_prompt: None,
        },
    ];
}

/// Publishes the triage Agent's variant weights, as the operator does from `spec.variants`.
fn weigh(fleet: &mut Fleet, control: u32, zoe: u32) {
    let mut table = fleet.directory.borrow().table().clone();
    let weights = [("control", control), ("zoe", zoe)];
    let variants = weights.iter().map(|(name, weight)| RouteVariant { name: (*name).into(), weight: *weight });
    table.variants.insert("bank/triage".into(), variants.collect());
    fleet.publish(table);
}

/// Which variant greeted: by the greeting's name, checked against the model the session
/// runs (both come from the variant's core on the runtime).
fn variant_of(seen: &[ServerMessage]) -> &'static str {
    let model = seen.iter().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { model, .. } => Some(model.as_str()),
        _ => None,
    });
    let greeting = replies(seen).into_iter().next().unwrap_or_default();
    match (greeting.contains("I'm Zoe"), greeting.contains("I'm Ava")) {
        (true, false) => {
            assert_eq!(model, Some(ZOE_MODEL), "zoe's sessions run its model: {seen:?}");
            "zoe"
        }
        (false, true) => {
            assert_ne!(model, Some(ZOE_MODEL), "the Agent's own model: {seen:?}");
            "control"
        }
        _ => panic!("a greeting from Ava or Zoe: {seen:?}"),
    }
}

async fn fleet() -> Fleet {
    let script = switchboard_sim::banking_script().expect("script");
    Fleet::edited(&[], Auth::default(), GatewayConfig::default(), Store::default(), script, None, with_zoe).await
}

async fn greeted(url: &str) -> (Client, &'static str) {
    let mut client = Client::start(url, None).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let variant = variant_of(&hello);
    (client, variant)
}

fn counted(metrics: &str, variant: &str) -> u64 {
    let needle = format!("switchboard_gateway_variant_sessions_total{{agent=\"bank/triage\",variant=\"{variant}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&needle)).map_or(0, |n| n.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_split_by_weight_and_new_weights_need_no_redeploy() {
    let mut fleet = fleet().await;
    let pids: Vec<_> = fleet.pods.iter().map(|p| p.addr).collect();
    weigh(&mut fleet, 50, 50);
    const SESSIONS: usize = 80;
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..SESSIONS {
        let (client, variant) = greeted(&fleet.url).await;
        *seen.entry(variant).or_default() += 1;
        client.close().await;
    }
    // 80 fair draws: each side within 20..=60 fails by chance about once in 10^5 runs.
    let zoe = seen.get("zoe").copied().unwrap_or(0);
    assert!((20..=60).contains(&zoe), "an even split within tolerance: {seen:?}");
    let metrics = fleet.gateway.metrics.render();
    assert_eq!(counted(&metrics, "zoe"), zoe as u64, "the metric counts what the runtimes served");
    assert_eq!(counted(&metrics, "control"), (SESSIONS - zoe) as u64);

    // Promote zoe: every new session is hers, on the same runtime processes.
    weigh(&mut fleet, 0, 100);
    for _ in 0..10 {
        let (client, variant) = greeted(&fleet.url).await;
        assert_eq!(variant, "zoe");
        client.close().await;
    }
    // Roll back.
    weigh(&mut fleet, 100, 0);
    for _ in 0..10 {
        let (client, variant) = greeted(&fleet.url).await;
        assert_eq!(variant, "control");
        client.close().await;
    }
    assert_eq!(fleet.pods.iter().map(|p| p.addr).collect::<Vec<_>>(), pids, "no runtime was restarted");
    assert!(fleet.pods.iter_mut().all(|p| p.running()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_keeps_its_variant_when_the_weights_move() {
    let mut fleet = fleet().await;
    weigh(&mut fleet, 100, 0);
    let (mut client, variant) = greeted(&fleet.url).await;
    assert_eq!(variant, "control");
    client.say("Hello").await;
    client.turn().await;
    let (token, last_seq) = position(&client.seen);
    drop(client);

    // All new sessions go to zoe now; the parked one is Ava's still.
    weigh(&mut fleet, 0, 100);
    let (fresh, variant) = greeted(&fleet.url).await;
    assert_eq!(variant, "zoe");
    fresh.close().await;

    let mut back = Client::connect(&fleet.url).await;
    back.send(&resume_start(&token, last_seq)).await;
    let resumed = back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let model = resumed.iter().rev().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { model, agent, .. } if agent == "triage" => Some(model.clone()),
        _ => None,
    });
    assert!(model.is_some_and(|m| m != ZOE_MODEL), "resumed on its own variant: {resumed:?}");
    back.say("Hi there").await;
    let turn = back.turn().await;
    assert!(!replies(&turn).is_empty(), "the resumed session goes on: {turn:?}");
    let metrics = fleet.gateway.metrics.render();
    assert_eq!((counted(&metrics, "control"), counted(&metrics, "zoe")), (1, 1), "{metrics}");
}
