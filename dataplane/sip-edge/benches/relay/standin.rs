//! The stand-in gateway and the plain WebSocket path beside the edge. The stand-in answers
//! `session_start` with `bidi_connection_start` (voice) and sends every binary frame back as
//! reply audio; it tells the edge's sessions from the plain clients' by the agent their
//! `session_start` names ([`BASELINE_AGENT`]). A plain client sends the same marked 20 ms
//! frames as a phone, over its own WebSocket, and notes the echoes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use crate::timing::{Path, Timings};

/// The agent a plain WebSocket client's `session_start` names.
const BASELINE_AGENT: &str = "websocket-baseline";

/// Serves sessions on `listener` until the runtime stops.
pub async fn gateway(listener: TcpListener, timings: Arc<Timings>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        let _ = stream.set_nodelay(true);
        let timings = Arc::clone(&timings);
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
            let path = match ws.next().await {
                Some(Ok(Message::Text(start))) if start.contains(BASELINE_AGENT) => Path::WebSocket,
                Some(Ok(_)) => Path::Edge,
                _ => return,
            };
            let start = r#"{"type":"bidi_connection_start","session_id":"bench","agent":"triage","mode":"voice","model":"sim"}"#;
            if ws.send(Message::text(start)).await.is_err() {
                return;
            }
            while let Some(Ok(message)) = ws.next().await {
                match message {
                    Message::Binary(audio) => {
                        timings.arrived(path, &audio);
                        let Ok(()) = ws.send(Message::Binary(audio)).await else { return };
                    }
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        });
    }
}

/// A plain WebSocket client of the stand-in at `url`: a marked frame every 20 ms until
/// `stop`, its echoes noted.
pub async fn client(url: String, timings: Arc<Timings>, stop: Instant) -> Result<(), String> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.map_err(|e| e.to_string())?;
    let start = format!(r#"{{"type":"session_start","agent":"{BASELINE_AGENT}"}}"#);
    ws.send(Message::text(start)).await.map_err(|e| e.to_string())?;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while Instant::now() < stop {
        tokio::select! {
            _ = tick.tick() => {
                ws.send(Message::Binary(timings.next_frame().into())).await.map_err(|e| e.to_string())?;
            }
            got = ws.next() => match got {
                Some(Ok(Message::Binary(audio))) => timings.echoed(Path::WebSocket, &audio),
                Some(Ok(_)) => {}
                _ => return Err("the stand-in closed a plain session".into()),
            }
        }
    }
    let _ = ws.close(None).await;
    Ok(())
}
