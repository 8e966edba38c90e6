//! The edge's dispatch connection to the gateway (`/v1/calls/edge`, a WebSocket with the
//! edge's API key), held while the edge places calls: it first names the edge's outbound
//! trunks ([`FromEdge::Trunks`], the default first); the calls to place come down it
//! ([`ToEdge::Place`]), each with its trunk (by name, else the default) and the trunk's
//! address resolved here before the SIP task places it; the calls' reports go up it. Lost, it is opened again (1 s, doubling to 10 s);
//! reports made meanwhile are dropped (the gateway fails the calls of an edge it loses).

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::outbound::{CallState, EDGE_PATH, FromEdge, ToEdge};
use switchboard_sip::call::Transport;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use crate::dialling::Route;
use crate::gateway::GatewayConfig;
use crate::outbound::{Outbound, Placement, report};

/// The largest message taken from the gateway (a call to place is well under it).
const MAX_MESSAGE: usize = 16 * 1024;

/// The dispatch URL of the gateway whose session URL is `session_url`: the same scheme and
/// authority, the path [`EDGE_PATH`].
pub fn dispatch_url(session_url: &str) -> Option<String> {
    let (scheme, rest) = session_url.split_once("://")?;
    let authority = rest.split(['/', '?']).next().filter(|a| !a.is_empty())?;
    Some(format!("{scheme}://{authority}{EDGE_PATH}"))
}

/// The dispatch task: runs until `shutdown`.
pub(crate) async fn run(
    gateway: std::sync::Arc<GatewayConfig>,
    outbound: Outbound,
    placements: mpsc::Sender<Placement>,
    mut reports: mpsc::Receiver<FromEdge>,
    report_tx: mpsc::Sender<FromEdge>,
    shutdown: CancellationToken,
) {
    let Some(url) = dispatch_url(&gateway.url) else {
        return tracing::error!(url = gateway.url, "no dispatch URL for outbound calls from the gateway's URL");
    };
    let mut pause = Duration::from_secs(1);
    loop {
        let request = match crate::gateway::request(&url, gateway.api_key.as_deref()) {
            Ok(request) => request,
            Err(error) => return tracing::error!(url, "outbound calls cannot be taken: {error}"),
        };
        let limits = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
        let connected = tokio::select! {
            connected = tokio_tungstenite::connect_async_with_config(request, Some(limits), true) => connected,
            () = shutdown.cancelled() => return,
        };
        match connected {
            Ok((socket, _)) => {
                let trunks: Vec<String> =
                    outbound.routes.iter().map(|r| format!("{}={}", r.name, r.trunk.uri())).collect();
                tracing::info!(url, ?trunks, "taking outbound calls from the gateway");
                pause = Duration::from_secs(1);
                let (mut sink, mut stream) = socket.split();
                // Its trunks first, through the reports' queue (emptied while it was closed).
                if report_tx.try_send(FromEdge::Trunks { names: outbound.names() }).is_err() {
                    tracing::warn!(url, "the edge's trunks could not be named to the gateway: calls name none");
                }
                loop {
                    tokio::select! {
                        frame = stream.next() => match frame {
                            Some(Ok(Message::Text(text))) => match serde_json::from_str::<ToEdge>(text.as_str()) {
                                Ok(call) => place(&outbound, &placements, &report_tx, call).await,
                                Err(error) => tracing::warn!("a message from the gateway does not read: {error}"),
                            },
                            Some(Ok(Message::Close(_))) | None => break,
                            Some(Ok(_)) => {}
                            Some(Err(error)) => {
                                tracing::warn!(%error, "the dispatch connection failed");
                                break;
                            }
                        },
                        Some(report) = reports.recv() => {
                            let Ok(text) = serde_json::to_string(&report) else { continue };
                            if sink.send(Message::text(text)).await.is_err() {
                                break;
                            }
                        }
                        () = shutdown.cancelled() => {
                            let _ = sink.close().await;
                            return;
                        }
                    }
                }
                tracing::warn!(url, "the gateway's dispatch connection closed; opening it again");
            }
            Err(error) => tracing::warn!(url, %error, "cannot reach the gateway to take outbound calls; trying again"),
        }
        // Reports made while no connection is open are dropped.
        while reports.try_recv().is_ok() {}
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shutdown.cancelled() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// Resolves the trunk and hands the call to the SIP task (or reports why it cannot be placed).
async fn place(
    outbound: &Outbound,
    placements: &mpsc::Sender<Placement>,
    reports: &mpsc::Sender<FromEdge>,
    call: ToEdge,
) {
    let ToEdge::Place { id, to, agent, ticket, trunk, answering_machine } = call;
    let Some(route) = outbound.route(trunk.as_deref()) else {
        let why = format!("this SIP edge has no outbound trunk named {:?}", trunk.unwrap_or_default());
        return report(reports, &id, CallState::Failed, None, Some(why));
    };
    let target = match target(outbound, route, &to) {
        Ok(target) => target,
        Err(why) => return report(reports, &id, CallState::Failed, None, Some(why)),
    };
    let Target { host, port, transport, what } = target;
    let peer: Option<SocketAddr> = match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(mut addresses) => addresses.next(),
        Err(error) => {
            tracing::warn!(%host, %error, "{what} does not resolve");
            None
        }
    };
    let Some(peer) = peer else {
        let reason = format!("{what} {host} does not resolve");
        return report(reports, &id, CallState::Failed, None, Some(reason));
    };
    let tls = if transport == Transport::Tls { route.tls.clone() } else { None };
    let trunk = route.trunk.clone();
    let placement =
        Placement { id: id.clone(), to, agent, ticket, peer, transport, host, tls, trunk, answering_machine };
    if placements.try_send(placement).is_err() {
        report(reports, &id, CallState::Failed, Some(503), Some("the SIP edge is too busy to place it".into()));
    }
}

/// Where the INVITE of a call goes ([`target`]).
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
    transport: Transport,
    /// What that is, for the log.
    what: &'static str,
}

/// Where the INVITE of a call to `to` goes: the trunk of `route`, over its transport, or
/// with none ([`Outbound::direct`]) the SIP URI's own host over UDP.
fn target(outbound: &Outbound, route: &Route, to: &str) -> Result<Target, String> {
    if !outbound.direct {
        let trunk = &route.trunk;
        let (host, port, transport) = (trunk.host.clone(), trunk.port, trunk.transport);
        return Ok(Target { host, port, transport, what: "the outbound trunk" });
    }
    let destination = switchboard_sip::trunk::outbound::Destination::parse(to).map_err(|e| e.to_string())?;
    match destination.host_port() {
        Some((host, port)) => Ok(Target { host, port, transport: Transport::Udp, what: "the callee's host" }),
        None => Err(format!(
            "no outbound trunk routes the number {to}: call a SIP URI (sip:USER@HOST[:PORT]), or give local mode a \
             trunk (--sip-outbound-trunk sip:HOST[:PORT])"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{Target, dispatch_url, target};
    use crate::Outbound;
    use switchboard_sip::call::Transport;
    use switchboard_sip::trunk::outbound::OutboundTrunk;

    #[test]
    fn with_no_trunk_a_uri_is_called_at_its_host_and_a_number_is_refused() {
        let trunk = OutboundTrunk::new("sip:10.0.0.9:5070", "switchboard", None).expect("trunk");
        let mut outbound = Outbound::new(trunk, None, std::time::Duration::from_secs(5)).expect("outbound");
        let at = |host: &str, port, transport, what| Target { host: host.into(), port, transport, what };
        let trunk = at("10.0.0.9", 5070, Transport::Udp, "the outbound trunk");
        assert_eq!(target(&outbound, &outbound.routes[0].clone(), "+442079460018"), Ok(trunk));
        let trunk = at("10.0.0.9", 5070, Transport::Udp, "the outbound trunk");
        assert_eq!(target(&outbound, &outbound.routes[0].clone(), "sip:a@127.0.0.1:5090"), Ok(trunk));
        outbound.direct = true;
        let host = at("127.0.0.1", 5090, Transport::Udp, "the callee's host");
        assert_eq!(target(&outbound, &outbound.routes[0].clone(), "sip:a@127.0.0.1:5090"), Ok(host));
        let refused =
            target(&outbound, &outbound.routes[0].clone(), "+442079460018").expect_err("a number needs a trunk");
        assert!(refused.contains("--sip-outbound-trunk"), "{refused}");
        let tcp = OutboundTrunk::new("sip:10.0.0.9;transport=tcp", "switchboard", None).expect("trunk");
        let outbound = Outbound::new(tcp, None, std::time::Duration::from_secs(5)).expect("outbound");
        let trunk = at("10.0.0.9", 5060, Transport::Tcp, "the outbound trunk");
        assert_eq!(
            target(&outbound, &outbound.routes[0].clone(), "+442079460018"),
            Ok(trunk),
            "over the trunk's transport"
        );
    }

    #[test]
    fn the_dispatch_url_is_the_gateways_with_the_edge_path() {
        assert_eq!(
            dispatch_url("ws://127.0.0.1:8080/v1/session").as_deref(),
            Some("ws://127.0.0.1:8080/v1/calls/edge")
        );
        assert_eq!(
            dispatch_url("wss://gw.example.com/v1/session?x=1").as_deref(),
            Some("wss://gw.example.com/v1/calls/edge")
        );
        assert_eq!(dispatch_url("ws://gateway:8080").as_deref(), Some("ws://gateway:8080/v1/calls/edge"));
        assert_eq!(dispatch_url("gateway"), None);
        assert_eq!(dispatch_url("ws:///v1/session"), None);
    }
}
