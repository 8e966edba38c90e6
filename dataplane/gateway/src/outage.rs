//! Outage mode: when an Agent's model service fails beyond its threshold, or a person
//! switches it on, new sessions of that Agent go to its fallback instead of a runtime that
//! cannot answer them — its own crate, `switchboard-outage` (each Agent's breaker, the trips
//! shared by the replicas, the switches the sessions under way are told of, the fallback
//! message and the metrics), under the path it always had. What the gateway adds is the
//! I/O: a new session's verdict performed on its client's socket ([`admit`]), the trips
//! shared through the gateway's Redis ([`share`]), and each breaker's changes published as
//! Kubernetes Events on the Agent ([`publish_events`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::protocol::close_code;
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_serve::frames::Conn;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::session::client_io::ClientIo;
use crate::session::machine::Close;
use crate::{Directory, Gateway};

pub use switchboard_outage::{
    DEFAULT_MESSAGE, Diverted, EVENT_QUEUE, OutageEvent, OutageMetrics, Outages, Turn, Turns, breaker, fallback,
    metrics, notice, serves_text, shared, turns,
};

/// The routing table the outage crate follows ([`notice::Switches::follow`], [`shared`]).
impl AsRef<RoutingTable> for Directory {
    fn as_ref(&self) -> &RoutingTable {
        self.table()
    }
}

/// Starts sharing `gateway`'s breaker trips with the other replicas through Redis at `url`
/// (`ca`: trusted for `rediss://`; [`shared`]) until the gateway shuts down. Connects on
/// first use.
pub fn share(gateway: &Arc<Gateway>, url: &str, ca: Option<Vec<u8>>) -> redis::RedisResult<()> {
    let conn = crate::resume::connect_lazily(url, ca)?;
    shared::spawn(gateway.outages.clone(), gateway.directory.clone(), conn, gateway.shutdown.clone());
    Ok(())
}

/// Lets a new session of `route`'s Agent through (`Ok(None)`), serves it in text
/// (`Ok(Some(cause))`: the Agent's fallback has `text`, the Agent speaks, and the client
/// reads text, [`serves_text`]), or
/// tells its client the fallback and returns the close (4513). Sessions under way (resumed,
/// continued) always go on.
pub async fn admit(
    gateway: &Gateway,
    route: &Route,
    under_way: bool,
    modalities: &[String],
    client: &mut Conn<ClientIo>,
) -> Result<Option<&'static str>, Close> {
    if under_way {
        return Ok(None);
    }
    let Some(outage) = gateway.directory.borrow().table().outage_in_effect(&route.namespace, &route.name) else {
        return Ok(None);
    };
    let Err(diverted) = gateway.outages.admit(route, &outage, Instant::now()) else { return Ok(None) };
    if serves_text(route, &outage, modalities) {
        let agent = format!("{}/{}", route.namespace, route.name);
        gateway.outages.metrics.text.with_label_values(&[&agent, diverted.cause]).inc();
        tracing::info!(%agent, cause = diverted.cause, "outage mode: the new session is served in text by the text model");
        return Ok(Some(diverted.cause));
    }
    let message = fallback(route, &outage, diverted);
    gateway.metrics.refused.with_label_values(&["outage"]).inc();
    let _ = tokio::time::timeout(Duration::from_secs(5), client.send(Message::text(message.to_json()))).await;
    Err((close_code::OUTAGE, "outage: see bidi_session_fallback".into()))
}

/// Publishes each change as a Kubernetes Event on its Agent (as `switchboard-gateway`),
/// until the sender goes. A failure to publish is logged, never fatal.
pub async fn publish_events(client: kube::Client, instance: String, mut changes: mpsc::Receiver<OutageEvent>) {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let reporter = Reporter { controller: "switchboard-gateway".to_owned(), instance: Some(instance) };
    let recorder = Recorder::new(client, reporter);
    while let Some(change) = changes.recv().await {
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(switchboard_crds::API_VERSION.to_owned()),
            kind: Some("Agent".to_owned()),
            namespace: Some(change.namespace.clone()),
            name: Some(change.agent.clone()),
            ..Default::default()
        };
        let event = Event {
            type_: if change.warning { EventType::Warning } else { EventType::Normal },
            reason: change.reason.to_owned(),
            note: Some(change.note),
            action: "Outage".to_owned(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(agent = %change.agent, namespace = %change.namespace, "cannot publish the outage Event {}: {error}", change.reason);
        }
    }
}
