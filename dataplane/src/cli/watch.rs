//! Files a long-running command reads again when they change: a mounted Secret or
//! ConfigMap (the API keys, a JWKS) is replaced whole when edited, so its modification time
//! says when to read it again.

use std::path::PathBuf;
use std::time::Duration;

/// Reads `path` again whenever it changed (checked every `every`; a mounted Secret or
/// ConfigMap is replaced whole) and hands its text to `apply`, which returns how many keys
/// it now holds; a file that cannot be read or used leaves what is in use, and says why.
pub(crate) async fn watch_file(
    path: PathBuf,
    every: Duration,
    what: &'static str,
    apply: impl Fn(&str) -> Result<usize, String> + Send + 'static,
) {
    let modified = |path: &PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut seen = modified(&path);
    loop {
        tokio::time::sleep(every).await;
        let now = modified(&path);
        if now == seen {
            continue;
        }
        seen = now;
        match std::fs::read_to_string(&path).map_err(|e| e.to_string()).and_then(|text| apply(&text)) {
            Ok(keys) => tracing::info!(keys, path = %path.display(), "{what} reloaded"),
            Err(error) => {
                tracing::warn!(path = %path.display(), "the {what} changed but are not usable; the previous keys stay: {error}")
            }
        }
    }
}
