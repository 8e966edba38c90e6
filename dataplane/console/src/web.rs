//! The console's page: `GET /` serves the page and `GET /ui/<file>` its script and styles
//! (the files under `ui/`), all compiled into the binary (no external assets, no build step,
//! so it works offline). It talks to the folder's agents by text, and by voice with the browser's
//! microphone for voice and hybrid agents; shows each reply under the agent's name, handoffs,
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
/// (render.js), voice capture and playback (voice.js), the Agents panel (agents.js), the
/// workflow graph in plain SVG (graph.js), the live session (app.js), the microphone and
/// push-to-talk (talk.js), past sessions and their replay (history.js), the look
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
    router
}

fn serve(content_type: &'static str, body: &'static str) -> axum::response::Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_speaks_the_session_protocol() {
        let scripts: String = ASSETS.iter().map(|(_, _, body)| *body).collect();
        for needle in [
            "session_start",
            "resume_token",
            "last_seq",
            "bidi_text_input",
            "bidi_audio_stream",
            "bidi_interruption",
            "tool_consent",
            "by_handoff",
            "memory_update",
            "workflow_transition",
            "bidi_session_state",
            "bidi_usage",
            "/v1/sessions",
            "bidi_audio_input_end",
            "at_us",
            "access_token",
            "Authorization",
            "bidi_audio_played",
            "/v1/console/price",
            "/v1/console/redact",
        ] {
            assert!(scripts.contains(needle), "the page handles {needle}");
        }
    }

    #[test]
    fn the_page_loads_every_asset() {
        for (name, _, _) in ASSETS {
            assert!(PAGE.contains(&format!("/ui/{name}")), "page.html loads {name}");
        }
    }
}
