//! The console's page: `GET /` serves the page, `GET /ui/<file>` its script and styles
//! (the files under `ui/`) and `GET /ui/client/<file>` the TypeScript client it speaks the
//! session protocol through (`clients/typescript`, compiled to browser ES modules and
//! committed under `ui/client/` by its `npm run vendor`; its tests fail when that copy
//! differs from its sources), all compiled into the binary (no external assets, no build
//! step, so it works offline). It talks to the folder's agents by text, and by voice with the browser's
//! microphone for voice and hybrid agents — over WebRTC (`POST /v1/webrtc`, the session on
//! the call's data channel) unless that cannot connect, then over the WebSocket, saying
//! which; shows each reply under the agent's name, handoffs,
//! tool calls, consent requests, memory, the workflow node, the session state and per-turn
//! figures; and opens and replays past sessions from the conversation record
//! (`/v1/sessions`, served by the gateway when a record is kept). `GET /v1/agents` lists the
//! agents it offers to start with (exposed ones and the default) and, apart, those reached
//! only by handoff (`gateway.expose: false`), which the page shows but does not let a user
//! pick; each with what the Agents panel and the workflow graph show (the `agents` module).
//! The live view's prices and redacted memory come from the gateway ([`crate::live`]).
//! Local mode serves these with its own agent list ([`routes`]); the gateway with
//! `--console` with a list from its routing table ([`crate::gateway`]); runtime pods do not.

use axum::Json;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

pub use crate::agents::{AgentEntry, AgentList};

/// The page.
pub const PAGE: &str = include_str!("../ui/page.html");

/// The page's scripts and styles, served at `/ui/<name>`: drawing a conversation
/// (render.js), voice capture and playback with the client's Microphone and Player (voice.js), the Agents panel (agents.js), the
/// workflow graph in plain SVG (graph.js), the live session (app.js), the voice session's
/// transport (WebRTC or the WebSocket, and why), the microphone and push-to-talk (talk.js), past sessions and their replay (history.js), the look
/// (console.css). Plain files, no framework or graph library: the page is small enough that
/// one would cost more than it saves.
pub const ASSETS: [(&str, &str, &str); 8] = [
    ("render.js", JAVASCRIPT, include_str!("../ui/render.js")),
    ("voice.js", JAVASCRIPT, include_str!("../ui/voice.js")),
    ("agents.js", JAVASCRIPT, include_str!("../ui/agents.js")),
    ("graph.js", JAVASCRIPT, include_str!("../ui/graph.js")),
    ("app.js", JAVASCRIPT, include_str!("../ui/app.js")),
    ("talk.js", JAVASCRIPT, include_str!("../ui/talk.js")),
    ("history.js", JAVASCRIPT, include_str!("../ui/history.js")),
    ("console.css", "text/css; charset=utf-8", include_str!("../ui/console.css")),
];

/// The TypeScript client's modules, served at `/ui/client/<name>` (page.html imports
/// index.js): the page's one implementation of the session protocol — `Session` (the
/// WebSocket, `session_start`, resume, typed messages), `Microphone` and `Player`, and its
/// WebRTC transport (`webRtcFirst`: the session on a call's data channel, the voice on its
/// Opus tracks, the WebSocket when WebRTC cannot connect; `CallMicrophone`, `LevelMeter`).
pub const CLIENT: [(&str, &str); 6] = [
    ("index.js", include_str!("../ui/client/index.js")),
    ("protocol.js", include_str!("../ui/client/protocol.js")),
    ("audio.js", include_str!("../ui/client/audio.js")),
    ("session.js", include_str!("../ui/client/session.js")),
    ("browser.js", include_str!("../ui/client/browser.js")),
    ("webrtc.js", include_str!("../ui/client/webrtc.js")),
];

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// Local mode's routes: the page, its assets, and `list` at `GET /v1/agents`.
pub fn routes(list: AgentList) -> Router {
    page_routes().route("/v1/agents", get(move || async move { Json(list) }))
}

/// The page and its assets only (the gateway's console adds its own agent list:
/// [`crate::gateway`]).
pub fn page_routes() -> Router {
    let mut router = Router::new().route("/", get(|| async { serve("text/html; charset=utf-8", PAGE) }));
    for (name, content_type, body) in ASSETS {
        router = router.route(&format!("/ui/{name}"), get(move || async move { serve(content_type, body) }));
    }
    for (name, body) in CLIENT {
        router = router.route(&format!("/ui/client/{name}"), get(move || async move { serve(JAVASCRIPT, body) }));
    }
    router
}

fn serve(content_type: &'static str, body: &'static str) -> axum::response::Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console_scripts() -> String {
        ASSETS.iter().filter(|(name, _, _)| name.ends_with(".js")).map(|(_, _, body)| *body).collect()
    }

    fn client_modules() -> String {
        CLIENT.iter().map(|(_, body)| *body).collect()
    }

    /// The protocol itself (the socket, the start and resume, the client messages' framing,
    /// the credential in the URL, barge-in's report) is the client's.
    #[test]
    fn the_client_speaks_the_session_protocol() {
        let client = client_modules();
        for needle in [
            "session_start",
            "resume_token",
            "last_seq",
            "bidi_connection_start",
            "bidi_text_input",
            "bidi_audio_stream",
            "bidi_audio_input_end",
            "bidi_audio_played",
            "tool_consent",
            "access_token",
            "new WebSocket",
            "AudioWorkletNode",
            "new RTCPeerConnection",
            "application/sdp",
            "createDataChannel",
            "\"DELETE\"",
            "WebRtcUnavailable",
        ] {
            assert!(client.contains(needle), "the client handles {needle}");
        }
    }

    /// The console's scripts use the client for all of it, and handle what the page draws
    /// and asks of the gateway themselves.
    #[test]
    fn the_page_uses_the_client_and_draws_the_session() {
        let scripts = console_scripts();
        for needle in [
            "client.Session.create",
            "resumeFrom",
            "client.Microphone.start",
            "client.CallMicrophone.start",
            "client.webRtcFirst",
            "/v1/webrtc",
            "remote-audio",
            "client.Player",
            "sendText",
            "consent(",
            "endAudioInput",
            "bidi_interruption",
            "by_handoff",
            "memory_update",
            "workflow_transition",
            "workflow_line",
            "bidi_session_outage",
            "bidi_session_fallback",
            "display_card",
            "client_tool_call",
            "bidi_session_state",
            "bidi_usage",
            "/v1/sessions",
            "at_us",
            "Authorization",
            "/v1/console/price",
            "/v1/console/redact",
        ] {
            assert!(scripts.contains(needle), "the page handles {needle}");
        }
        for own in [
            "new WebSocket",
            "resume_token",
            "last_seq",
            "AudioWorklet",
            "atob(",
            "RTCPeerConnection",
            "application/sdp",
            "createDataChannel",
        ] {
            assert!(!scripts.contains(own), "the page leaves {own} to the client");
        }
    }

    #[test]
    fn the_page_loads_every_asset() {
        for (name, _, _) in ASSETS {
            assert!(PAGE.contains(&format!("/ui/{name}")), "page.html loads {name}");
        }
        assert!(PAGE.contains("/ui/client/index.js"), "page.html imports the client");
        let index = CLIENT[0].1;
        for (name, _) in &CLIENT[1..] {
            assert!(index.contains(&format!("\"./{name}\"")), "the client's index.js imports {name}");
        }
    }

    /// Every module `npm run vendor` wrote is compiled in and served (one added to the
    /// client's src/ must be listed in [`CLIENT`]).
    #[test]
    fn every_vendored_module_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/client");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("ui/client")
            .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut served: Vec<String> = CLIENT.iter().map(|(name, _)| (*name).to_owned()).collect();
        served.sort();
        assert_eq!(on_disk, served, "ui/client/ and CLIENT list the same modules");
    }
}
