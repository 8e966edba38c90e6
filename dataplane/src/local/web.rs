//! Local mode's web page: `GET /` serves one self-contained page (no external assets, so it
//! works offline) to chat with the folder's agents by text, and by voice with the browser's
//! microphone for voice and hybrid agents; `GET /v1/agents` lists the agents it offers.
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
    /// The agents, the default first.
    pub agents: Vec<AgentEntry>,
    /// The default agent.
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
        for needle in ["session_start", "bidi_text_input", "bidi_audio_stream", "bidi_interruption", "tool_consent"] {
            assert!(PAGE.contains(needle), "the page handles {needle}");
        }
    }
}
