//! Local mode's web page: `GET /` serves one self-contained page (no external assets, so it
//! works offline) to chat with the folder's agents by text, and by voice with the browser's
//! microphone for voice and hybrid agents; `GET /v1/agents` lists the agents it offers to
//! start with (exposed ones and the default) and, apart, those reached only by handoff
//! (`gateway.expose: false`), which the page shows but does not let a user pick.
//! Only local mode serves these; runtime pods do not.

use axum::Json;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;

/// The page.
pub const PAGE: &str = include_str!("page.html");

/// One agent on offer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AgentEntry {
    /// Its name.
    pub name: String,
    /// `voice`, `text` or `hybrid`.
    pub mode: String,
}

/// What `GET /v1/agents` answers.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AgentList {
    /// The agents a session may start with, the default first.
    pub agents: Vec<AgentEntry>,
    /// The agents reached only by handoff (`gateway.expose: false`): a session cannot
    /// start with them.
    pub by_handoff: Vec<AgentEntry>,
    /// The default agent (a session that names no agent gets it).
    pub default: Option<String>,
}

/// The page's routes.
pub fn routes(list: AgentList) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async {
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], PAGE)
                    .into_response()
            }),
        )
        .route("/v1/agents", get(move || async move { Json(list) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_speaks_the_session_protocol() {
        for needle in
            ["session_start", "bidi_text_input", "bidi_audio_stream", "bidi_interruption", "tool_consent", "by_handoff"]
        {
            assert!(PAGE.contains(needle), "the page handles {needle}");
        }
    }

    #[test]
    fn the_list_names_agents_reached_by_handoff_apart() {
        let entry = |name: &str, mode: &str| AgentEntry { name: name.into(), mode: mode.into() };
        let list = AgentList {
            agents: vec![entry("triage", "hybrid")],
            by_handoff: vec![entry("idv", "voice")],
            default: Some("triage".into()),
        };
        assert_eq!(
            serde_json::to_value(&list).expect("serialises"),
            serde_json::json!({
                "agents": [{ "name": "triage", "mode": "hybrid" }],
                "by_handoff": [{ "name": "idv", "mode": "voice" }],
                "default": "triage",
            })
        );
    }
}
