//! Waiting for the cluster to reach a state: poll a check until it yields a value or a
//! deadline passes (and then fail with the last thing seen).

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::bail;

/// Polls `check` every 100 ms until it returns `Ok(Some(v))`; fails after `timeout` with
/// `what` and the last error or "not yet".
pub async fn until<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
    E: Debug,
{
    let start = Instant::now();
    loop {
        let last = match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => "not yet".to_owned(),
            Err(e) => format!("{e:?}"),
        };
        if start.elapsed() >= timeout {
            bail!("timed out after {timeout:?} waiting for {what}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
