//! Built-in tools: `currentTime` returns the date and time now (UTC); `endSession` and
//! `showCard` are handled by the core itself (it ends the session after the reply, it sends
//! the card) and only acknowledged here.

use switchboard_crds::agent::BuiltinKind;

use switchboard_core::ToolFailure;

/// Runs built-in `kind`.
pub fn run(kind: BuiltinKind) -> Result<serde_json::Value, ToolFailure> {
    match kind {
        BuiltinKind::CurrentTime => {
            let now = jiff::Timestamp::now();
            Ok(serde_json::json!({
                "utc": now.to_string(),
                "date": now.strftime("%Y-%m-%d").to_string(),
                "time": now.strftime("%H:%M:%S").to_string(),
                "weekday": now.strftime("%A").to_string(),
            }))
        }
        BuiltinKind::EndSession => Ok(serde_json::json!({ "ending": true })),
        // The session shows the card itself (`display_card`): acknowledged here only.
        BuiltinKind::ShowCard => Ok(serde_json::json!({ "shown": true })),
    }
}

/// Today's date, ISO 8601 (UTC), for the prompt's `{date}`.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}
