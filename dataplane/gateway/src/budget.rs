//! The gateway's memory budget: what its sessions hold, counted in bytes, and new sessions
//! refused (1013, `memory_budget`) before the pod's memory limit is reached, so a flood of
//! sessions costs the newcomers a retry instead of costing every live session its replica.
//!
//! Each session is bounded on its own: its replay buffer (`--replay-buffer-bytes`) and what
//! the gateway keeps of it ([`crate::session::kept::MAX_KEPT_BYTES`]: history, memory,
//! typed inputs), plus [`SESSION_OVERHEAD`] for its sockets and tasks. What a session holds
//! is counted while it lives (refreshed at every ping interval) and while it is parked in
//! this process. A new session is admitted only while the count leaves room for one more
//! session at its bound ([`MemoryBudget::admits`]), so the count passes the budget only by
//! what live sessions grow after their admission; past it ([`MemoryBudget::over`]), live
//! sessions keep an eighth of their replay buffers at their next ping interval.
//!
//! The budget defaults to 60 % of the container's memory limit (cgroup v2 `memory.max`,
//! or v1 `memory.limit_in_bytes`), leaving the rest for the process itself, allocator
//! slack and what is not counted; without a limit, to none.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What one live session costs beyond what it holds, an estimate: its two WebSocket
/// connections' read buffers ([`switchboard_serve::frames::READ_CHUNK`] each) and write buffers,
/// its relay task, channels and machine. dataplane/tests/gateway/budget.rs prints a
/// `switchboard gateway` process' RSS as sessions come; per session it stays below the
/// allocator's granularity there, so this errs high.
pub const SESSION_OVERHEAD: usize = 64 * 1024;

/// The share of the container's memory limit the budget takes by default.
pub const DEFAULT_SHARE: f64 = 0.6;

/// The bytes the sessions of one gateway hold, against a budget.
#[derive(Debug, Default)]
pub struct MemoryBudget {
    limit: Option<usize>,
    /// The most one session can hold (admission leaves room for it).
    per_session: usize,
    held: Arc<AtomicUsize>,
    /// Bytes held for the sessions elsewhere, counted as theirs ([`MemoryBudget::counting`]).
    also: Option<Arc<AtomicUsize>>,
}

impl MemoryBudget {
    /// A budget of `limit` bytes (none: unlimited, still counted) for sessions that hold at
    /// most `per_session` bytes each.
    pub fn new(limit: Option<usize>, per_session: usize) -> Self {
        Self { limit, per_session, held: Arc::default(), also: None }
    }

    /// Also counts `bytes` (the conversation record's entries waiting for its store): what
    /// the sessions made the gateway hold, whoever holds it.
    pub fn counting(mut self, bytes: Arc<AtomicUsize>) -> Self {
        self.also = Some(bytes);
        self
    }

    /// The budget, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The bytes counted now.
    pub fn held(&self) -> usize {
        let also = self.also.as_ref().map_or(0, |bytes| bytes.load(Ordering::Relaxed));
        self.held.load(Ordering::Relaxed).saturating_add(also)
    }

    /// Whether one more session fits: what is held, plus that session at its bound.
    pub fn admits(&self) -> bool {
        self.limit.is_none_or(|limit| self.held().saturating_add(self.per_session) <= limit)
    }

    /// Whether the sessions hold more than the budget (live sessions then shed what they
    /// can: their replay buffers).
    pub fn over(&self) -> bool {
        self.limit.is_some_and(|limit| self.held() > limit)
    }

    /// A new, empty account that counts toward this budget.
    pub fn account(&self) -> Account {
        Account { held: self.held.clone(), bytes: 0 }
    }
}

/// What one session (live or parked) holds; given back when dropped.
#[derive(Debug)]
pub struct Account {
    held: Arc<AtomicUsize>,
    bytes: usize,
}

impl Account {
    /// The session holds `bytes` now.
    pub fn set(&mut self, bytes: usize) {
        if bytes >= self.bytes {
            self.held.fetch_add(bytes - self.bytes, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
        }
        self.bytes = bytes;
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The container's memory limit, if it has one: cgroup v2, then v1. A v1 "no limit" is a
/// huge number (a page-rounded `i64::MAX`): anything above 1 PiB counts as none.
pub fn container_memory_limit() -> Option<usize> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let text = read("/sys/fs/cgroup/memory.max").or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?;
    parse_limit(&text)
}

fn parse_limit(text: &str) -> Option<usize> {
    let bytes = text.trim().parse::<u64>().ok()?;
    (bytes < 1 << 50).then(|| usize::try_from(bytes).ok()).flatten()
}

/// The default budget: [`DEFAULT_SHARE`] of `limit`.
pub fn default_budget(limit: Option<usize>) -> Option<usize> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    limit.map(|limit| (limit as f64 * DEFAULT_SHARE) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_add_up_and_give_back_and_admission_leaves_room_for_one_more() {
        let budget = MemoryBudget::new(Some(1000), 300);
        assert!(budget.admits());
        let mut a = budget.account();
        let mut b = budget.account();
        a.set(400);
        b.set(200);
        assert_eq!(budget.held(), 600);
        assert!(budget.admits(), "600 + 300 <= 1000");
        b.set(301);
        assert!(!budget.admits(), "701 + 300 > 1000");
        b.set(100);
        assert_eq!(budget.held(), 500);
        drop(a);
        assert_eq!(budget.held(), 100, "a session's bytes go with it");
        let record = Arc::new(AtomicUsize::new(0));
        let counted = MemoryBudget::new(Some(1000), 300).counting(record.clone());
        counted.account().set(0);
        record.store(800, Ordering::Relaxed);
        assert_eq!(counted.held(), 800);
        assert!(!counted.admits(), "what the record holds counts: 800 + 300 > 1000");
        let unlimited = MemoryBudget::new(None, usize::MAX);
        unlimited.account().set(usize::MAX / 2);
        assert!(unlimited.admits());
    }

    #[test]
    fn cgroup_limits_are_read_and_no_limit_is_none() {
        assert_eq!(parse_limit("536870912\n"), Some(512 << 20));
        assert_eq!(parse_limit("max\n"), None, "cgroup v2 without a limit");
        assert_eq!(parse_limit("9223372036854771712\n"), None, "cgroup v1 without a limit");
        assert_eq!(default_budget(Some(1000)), Some(600));
        assert_eq!(default_budget(None), None);
    }
}
