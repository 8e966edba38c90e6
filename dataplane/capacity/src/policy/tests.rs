use proptest::prelude::*;

use super::*;

fn rules(quota: u32, shares: &[(&str, f64)]) -> Rules {
    Rules {
        quota,
        shares: shares.iter().map(|(ns, s)| ((*ns).to_owned(), *s)).collect(),
        max_queue: 3,
        initial_hold_ms: 60_000,
    }
}

fn req<'a>(id: &'a str, ns: &'a str, prio: i32, queue: bool) -> Request<'a> {
    Request { id, ns, prio, gw: "g1", queue }
}

fn pool() -> Pool {
    let mut pool = Pool::default();
    pool.heartbeat("g1", 0, 1_000_000);
    pool.heartbeat("g2", 0, 1_000_000);
    pool
}

#[test]
fn a_burst_over_the_quota_queues_and_is_served_in_arrival_order() {
    let rules = rules(2, &[]);
    let mut pool = pool();
    assert_eq!(pool.request(&rules, &req("a", "bank", 0, true), 0), Outcome::Granted);
    assert_eq!(pool.request(&rules, &req("b", "bank", 0, true), 0), Outcome::Granted);
    let Outcome::Queued(c) = pool.request(&rules, &req("c", "bank", 0, true), 1) else { panic!("c waits") };
    let Outcome::Queued(d) = pool.request(&rules, &req("d", "bank", 0, true), 2) else { panic!("d waits") };
    assert_eq!((c.position, d.position), (1, 2));
    assert!(d.wait_ms > c.wait_ms, "the second waits longer: {c:?} {d:?}");
    assert_eq!(pool.request(&rules, &req("c", "bank", 0, true), 3), Outcome::Queued(c), "asking again keeps the place");
    pool.release(&rules, "a", 10_000);
    assert_eq!(pool.status(&rules, "c"), Status::Granted, "the first in line gets the slot");
    assert_eq!(pool.status(&rules, "d"), Status::Queued(Place { position: 1, wait_ms: pool.wait_ms(&rules, 1) }));
    assert_eq!(pool.hold_ms, 10_000, "the hold is learnt");
    pool.release(&rules, "b", 20_000);
    assert_eq!(pool.status(&rules, "d"), Status::Granted);
    assert!(pool.queue.is_empty());
}

#[test]
fn a_tenant_under_its_guarantee_goes_before_one_bursting_over_its_own() {
    // 4 slots; retail is guaranteed half. Bank bursts into all four while retail is idle.
    let rules = rules(4, &[("retail", 0.5), ("bank", 0.5)]);
    let mut pool = pool();
    for id in ["b1", "b2", "b3", "b4"] {
        assert_eq!(pool.request(&rules, &req(id, "bank", 0, true), 0), Outcome::Granted, "bank bursts");
    }
    // Bank asks for a fifth (first in line), then retail comes: retail is under its share.
    assert!(matches!(pool.request(&rules, &req("b5", "bank", 50, true), 1), Outcome::Queued(_)));
    let Outcome::Queued(r1) = pool.request(&rules, &req("r1", "retail", 0, true), 2) else { panic!("full") };
    assert_eq!(r1.position, 1, "retail's guarantee puts it ahead of bank's burst, whatever bank's priority");
    pool.release(&rules, "b1", 100);
    assert_eq!(pool.status(&rules, "r1"), Status::Granted);
    assert!(matches!(pool.status(&rules, "b5"), Status::Queued(_)), "bank over its share waits");
    // Bank holds 3, its guarantee 2: over. Retail again under (1 < 2): ahead again.
    assert!(matches!(pool.request(&rules, &req("r2", "retail", 0, true), 3), Outcome::Queued(p) if p.position == 1));
    pool.release(&rules, "b2", 200);
    assert_eq!(pool.status(&rules, "r2"), Status::Granted);
    // Retail at its guarantee: both classes equal now; priority then arrival decide.
    assert!(matches!(pool.request(&rules, &req("r3", "retail", 0, true), 4), Outcome::Queued(p) if p.position == 2));
    pool.release(&rules, "b3", 300);
    assert_eq!(pool.status(&rules, "b5"), Status::Granted, "bank's higher priority, once both are over");
}

#[test]
fn the_order_replays_grants_so_a_guarantee_is_not_counted_twice() {
    let rules = rules(2, &[("retail", 0.5)]);
    let mut pool = pool();
    pool.request(&rules, &req("b1", "bank", 0, true), 0);
    pool.request(&rules, &req("b2", "bank", 0, true), 0);
    pool.request(&rules, &req("b3", "bank", 0, true), 1);
    pool.request(&rules, &req("r1", "retail", 0, true), 2);
    pool.request(&rules, &req("r2", "retail", 0, true), 3);
    // retail's guarantee is one slot: r1 goes first; r2 is then over it and behind b3.
    assert_eq!(pool.order(&rules), vec!["r1", "b3", "r2"]);
}

#[test]
fn priority_orders_within_a_class_and_equal_priorities_keep_arrival() {
    let rules = rules(1, &[]);
    let mut pool = pool();
    pool.request(&rules, &req("live", "bank", 0, true), 0);
    pool.request(&rules, &req("low", "bank", -5, true), 1);
    pool.request(&rules, &req("first", "bank", 0, true), 2);
    pool.request(&rules, &req("high", "bank", 10, true), 3);
    assert_eq!(pool.order(&rules), vec!["high", "first", "low"]);
}

#[test]
fn a_refusing_agent_and_a_full_queue_refuse_with_a_retry_hint() {
    let rules = rules(1, &[]);
    let mut pool = pool();
    assert_eq!(
        pool.request(&rules, &req("a", "bank", 0, false), 0),
        Outcome::Granted,
        "room: even a refuser is served"
    );
    let Outcome::Refused(refused) = pool.request(&rules, &req("r", "bank", 0, false), 1) else { panic!("refused") };
    assert!(!refused.queue_full);
    assert_eq!(refused.retry_after_ms, 60_000, "one hold of the one slot, before any was learnt");
    for id in ["q1", "q2", "q3"] {
        assert!(matches!(pool.request(&rules, &req(id, "bank", 0, true), 2), Outcome::Queued(_)));
    }
    let Outcome::Refused(full) = pool.request(&rules, &req("q4", "bank", 0, true), 3) else { panic!("queue full") };
    assert!(full.queue_full);
    assert_eq!(pool.queue.len(), 3, "the refused leave no place behind");
    pool.release(&rules, "q2", 4);
    assert_eq!(pool.queue.len(), 2, "a client that leaves frees its place");
    assert_eq!(pool.order(&rules), vec!["q1", "q3"]);
}

#[test]
fn a_gateway_that_stops_beating_loses_its_leases_and_its_waiters() {
    let rules = rules(2, &[]);
    let mut pool = Pool::default();
    pool.heartbeat("g1", 0, 1_000);
    pool.heartbeat("g2", 0, 5_000);
    pool.request(&rules, &req("a", "bank", 0, true), 0);
    pool.request(&rules, &Request { gw: "g2", ..req("b", "bank", 0, true) }, 0);
    pool.request(&rules, &req("c", "bank", 0, true), 0);
    pool.request(&rules, &Request { gw: "g2", ..req("d", "bank", 0, true) }, 0);
    pool.expire(999);
    assert_eq!(pool.used(), 2);
    pool.heartbeat("g2", 999, 5_000);
    pool.expire(1_000);
    pool.settle(&rules, 1_000);
    assert_eq!(pool.status(&rules, "a"), Status::Gone, "g1's lease lapsed with its heartbeat");
    assert_eq!(pool.status(&rules, "c"), Status::Gone, "and its waiter");
    assert_eq!(pool.status(&rules, "d"), Status::Granted, "the freed slot goes to who waits");
}

#[test]
fn a_forced_slot_is_taken_even_over_the_quota() {
    let rules = rules(1, &[]);
    let mut pool = pool();
    pool.request(&rules, &req("a", "bank", 0, true), 0);
    pool.force("resumed", "bank", "g1", 1);
    assert_eq!(pool.used(), 2);
    pool.release(&rules, "a", 2);
    pool.request(&rules, &req("b", "bank", 0, true), 3);
    assert!(matches!(pool.status(&rules, "b"), Status::Queued(_)), "still at the quota");
}

#[test]
fn guarantees_round_down_and_stay_within_the_quota() {
    let rules = rules(5, &[("a", 0.5), ("b", 2.0), ("c", -1.0)]);
    assert_eq!(rules.guaranteed("a"), 2);
    assert_eq!(rules.guaranteed("b"), 5);
    assert_eq!(rules.guaranteed("c"), 0);
    assert_eq!(rules.guaranteed("unlisted"), 0);
}

#[derive(Clone, Debug)]
enum Event {
    Request { ns: u8, prio: i8, queue: bool, gw: bool },
    Release(usize),
    Beat { gw: bool },
    Advance(u16),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0u8..3, -2i8..3, any::<bool>(), any::<bool>())
            .prop_map(|(ns, prio, queue, gw)| Event::Request { ns, prio, queue, gw }),
        3 => (0usize..64).prop_map(Event::Release),
        1 => any::<bool>().prop_map(|gw| Event::Beat { gw }),
        2 => (0u16..3000).prop_map(Event::Advance),
    ]
}

proptest! {
    /// Whatever comes: the quota is never passed, a free slot never sits beside a waiter,
    /// the queue stays bounded, the order is a permutation of the queue, and a slot goes
    /// to an over-share tenant only when no under-share one waits.
    #[test]
    fn the_pool_keeps_its_rules(events in proptest::collection::vec(event(), 1..120)) {
        let rules = Rules { max_queue: 5, ..rules(3, &[("n0", 0.34), ("n1", 0.34)]) };
        let namespaces = ["n0", "n1", "n2"];
        let mut pool = Pool::default();
        let mut now = 0u64;
        let mut ids = Vec::new();
        for gw in ["g1", "g2"] {
            pool.heartbeat(gw, now, 5_000);
        }
        for event in events {
            match event {
                Event::Request { ns, prio, queue, gw } => {
                    let id = format!("t{}", ids.len());
                    let gw = if gw { "g1" } else { "g2" };
                    // As the store does: the asking gateway beats first.
                    pool.heartbeat(gw, now, 5_000);
                    let before = pool.clone();
                    let r = Request { id: &id, ns: namespaces[ns as usize], prio: i32::from(prio), gw, queue };
                    let outcome = pool.request(&rules, &r, now);
                    if let Outcome::Granted = outcome {
                        // Granted only if nobody that the policy puts first was waiting.
                        let mut check = before.clone();
                        check.queue.insert(id.clone(), Waiter {
                            ns: r.ns.to_owned(), prio: r.prio, seq: u64::MAX, gw: gw.to_owned(), since: now,
                        });
                        let first = check.order(&rules);
                        let free = rules.quota.saturating_sub(before.used()) as usize;
                        prop_assert!(first.iter().take(free).any(|t| *t == id), "granted out of turn");
                    }
                    ids.push(id);
                }
                Event::Release(i) => if let Some(id) = ids.get(i) { pool.release(&rules, id, now) },
                Event::Beat { gw } => pool.heartbeat(if gw { "g1" } else { "g2" }, now, 5_000),
                Event::Advance(ms) => {
                    now += u64::from(ms);
                    pool.expire(now);
                    pool.settle(&rules, now);
                }
            }
            prop_assert!(pool.used() <= rules.quota);
            prop_assert!(pool.queue.len() <= rules.max_queue as usize);
            prop_assert!(pool.queue.is_empty() || pool.used() == rules.quota, "a slot free beside a waiter");
            let mut order = pool.order(&rules);
            order.sort();
            let mut queued: Vec<String> = pool.queue.keys().cloned().collect();
            queued.sort();
            prop_assert_eq!(order, queued);
            for lease in pool.leases.values() {
                prop_assert!(pool.gateways.contains_key(&lease.gw), "a lease of a gone gateway");
            }
            let places = pool.places(&rules);
            let mut positions: Vec<u32> = places.values().map(|p| p.position).collect();
            positions.sort_unstable();
            prop_assert_eq!(positions, (1..=u32::try_from(places.len()).unwrap_or(0)).collect::<Vec<_>>());
        }
    }
}

#[test]
fn failures_within_the_window_mark_the_region_failing_for_a_while() {
    let rules = Failover { failures: 3, window_ms: 10_000, hold_ms: 60_000 };
    let mut p = Pool::default();
    assert!(p.is_idle());
    // Two, then a third after the window: not enough together.
    assert!(!p.failed(&rules, 1_000));
    assert!(!p.failed(&rules, 2_000));
    assert!(!p.failed(&rules, 12_500), "the first two are outside the window");
    assert!(!p.is_idle(), "failures are remembered");
    assert!(!p.failing(12_500));
    assert!(!p.failed(&rules, 13_000));
    assert!(p.failed(&rules, 14_000), "three within ten seconds");
    assert!(p.failing(14_000) && p.failing(73_999));
    // More failures while it fails extend the mark, without calling it new.
    for at in [20_000, 21_000] {
        assert!(!p.failed(&rules, at));
    }
    assert!(!p.failed(&rules, 22_000), "already failing");
    assert!(p.failing(81_999));
    assert!(!p.failing(82_000), "it lapses");
    assert_eq!(p.failing_until, 0, "a lapsed mark is forgotten");
    assert!(p.is_idle());
    // The state round-trips through the store's JSON, and old state reads as healthy.
    let old: Pool =
        serde_json::from_str(r#"{"leases":{},"queue":{},"gateways":{},"seq":3,"hold_ms":0}"#).expect("old state");
    assert_eq!((old.failures.len(), old.failing_until), (0, 0));
}
