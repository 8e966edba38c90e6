//! The gateway's capacity flags: the model quota per `<account>/<region>` pool and each
//! namespace's guaranteed share ([`switchboard_gateway::capacity`]).

use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_gateway::capacity::CapacityConfig;
use switchboard_gateway::capacity::policy::Failover;

/// Capacity flags of `switchboard gateway`.
#[derive(Debug, clap::Args)]
pub struct CapacityArgs {
    /// The live model streams a pool allows, `<account>/<region>=<streams>` (e.g.
    /// `default/us-east-1=40`); repeatable, or comma-separated in the variable. An Agent's
    /// pool is its `spec.capacity.account` (default `default`) and `spec.model.region`.
    /// Sessions of pools without a quota are not counted. With --redis-url the count is
    /// shared by every replica; without, it is this process'.
    #[arg(long = "capacity-quota", env = "SWITCHBOARD_CAPACITY_QUOTAS", value_delimiter = ',', value_parser = parse_quota)]
    quotas: Vec<(String, u32)>,

    /// A namespace's guaranteed share of every pool's quota, `<namespace>=<fraction>` (e.g.
    /// `retail=0.5`); repeatable. When a slot frees, namespaces under their share are
    /// served before the rest; a namespace not listed only bursts into unused slots.
    #[arg(long = "capacity-share", env = "SWITCHBOARD_CAPACITY_SHARES", value_delimiter = ',', value_parser = parse_share)]
    shares: Vec<(String, f64)>,

    /// Most sessions waiting for a slot in one pool, across the replicas; more are refused
    /// with `capacity_full`.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_MAX_QUEUE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    capacity_max_queue: u32,

    /// Seconds a gateway's slots outlive its last heartbeat (it beats every third of it):
    /// how long the slots of a replica that died stay counted.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_LEASE_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=600))]
    capacity_lease_seconds: u64,

    /// Milliseconds between looks for a waiting session's turn.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_POLL_MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=10_000))]
    capacity_poll_ms: u64,

    /// Seconds a session is assumed to hold its slot before any has ended (the first
    /// estimates of the wait; then it is learnt).
    #[arg(long, env = "SWITCHBOARD_CAPACITY_HOLD_SECONDS", default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..))]
    capacity_hold_seconds: u64,

    /// Model failures of a pool's sessions (throttled, unavailable, unreachable, timed out)
    /// within --capacity-region-failure-window-seconds that mark its region failing: new
    /// sessions of Agents with a fallback region (`spec.model.voiceFallback.region`) go
    /// there meanwhile. With --redis-url every replica sees the mark.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_REGION_FAILURES", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    capacity_region_failures: u32,

    /// The window in which --capacity-region-failures failures mark a region failing.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_REGION_FAILURE_WINDOW_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    capacity_region_failure_window_seconds: u64,

    /// How long a region marked failing sends new sessions to fallback regions (failures
    /// meanwhile extend it); then they go to it again.
    #[arg(long, env = "SWITCHBOARD_CAPACITY_REGION_FAILOVER_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    capacity_region_failover_seconds: u64,
}

fn parse_quota(text: &str) -> Result<(String, u32), String> {
    let (pool, streams) =
        text.split_once('=').ok_or_else(|| format!("{text:?} is not <account>/<region>=<streams>"))?;
    let (account, region) = pool.split_once('/').ok_or_else(|| format!("{pool:?} is not <account>/<region>"))?;
    if account.is_empty() || region.is_empty() || region.contains('/') {
        return Err(format!("{pool:?} is not <account>/<region>"));
    }
    let streams = streams.parse().map_err(|_| format!("{streams:?} is not a number of streams"))?;
    Ok((pool.to_owned(), streams))
}

fn parse_share(text: &str) -> Result<(String, f64), String> {
    let (namespace, share) = text.split_once('=').ok_or_else(|| format!("{text:?} is not <namespace>=<fraction>"))?;
    let share: f64 = share.parse().map_err(|_| format!("{share:?} is not a fraction"))?;
    if namespace.is_empty() || !(0.0..=1.0).contains(&share) {
        return Err(format!("{text:?}: the share must be from 0 to 1, for a namespace"));
    }
    Ok((namespace.to_owned(), share))
}

impl CapacityArgs {
    /// The settings, shared through `redis` (the session store's URL and CA) when given.
    pub fn config(self, redis: Option<(String, Option<Vec<u8>>)>) -> anyhow::Result<CapacityConfig> {
        let Self {
            quotas,
            shares,
            capacity_max_queue,
            capacity_lease_seconds,
            capacity_poll_ms,
            capacity_hold_seconds,
            capacity_region_failures,
            capacity_region_failure_window_seconds,
            capacity_region_failover_seconds,
        } = self;
        let total: f64 = shares.iter().map(|(_, s)| s).sum();
        anyhow::ensure!(
            total <= 1.0 + 1e-9,
            "--capacity-share: the shares add up to {total}, more than the whole quota"
        );
        Ok(CapacityConfig {
            quotas: quotas.into_iter().collect::<BTreeMap<_, _>>(),
            shares: shares.into_iter().collect(),
            max_queue: capacity_max_queue,
            lease: Duration::from_secs(capacity_lease_seconds),
            poll: Duration::from_millis(capacity_poll_ms),
            initial_hold: Duration::from_secs(capacity_hold_seconds),
            redis,
            failover: Failover {
                failures: capacity_region_failures,
                window_ms: capacity_region_failure_window_seconds * 1000,
                hold_ms: capacity_region_failover_seconds * 1000,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_and_shares_are_read_and_bad_ones_refused() {
        assert_eq!(parse_quota("default/us-east-1=40"), Ok(("default/us-east-1".into(), 40)));
        for bad in ["x=1", "/us-east-1=1", "a/=1", "a/b/c=1", "a/b=-1", "a/b"] {
            assert!(parse_quota(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_share("retail=0.5"), Ok(("retail".into(), 0.5)));
        for bad in ["retail=1.5", "=0.5", "retail", "retail=x"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
    }
}
