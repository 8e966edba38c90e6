use super::seal::{SEAL_BYTES, open, seal};
use super::*;
use crate::resume::Replay;
use crate::session::kept::Kept;

#[test]
fn continuation_state_opens_only_untouched_for_its_key_and_signer() {
    let signer = GatewaySigner::from_seed(&[5; 32]);
    let text = seal_text(&signer, "continue:s:web", &parked()).expect("seals");
    assert_eq!(open_text(&signer, "continue:s:web", &text).expect("opens").session_id, "s");
    assert!(matches!(open_text(&signer, "continue:s:web2", &text), Err(StoreError::Tampered)), "another credential");
    let other = GatewaySigner::from_seed(&[6; 32]);
    assert!(matches!(open_text(&other, "continue:s:web", &text), Err(StoreError::Tampered)), "another gateway");
    let changed = text.replace("triage", "banking");
    assert_ne!(changed, text);
    assert!(matches!(open_text(&signer, "continue:s:web", &changed), Err(StoreError::Tampered)), "edited");
    assert!(matches!(open_text(&signer, "continue:s:web", "short"), Err(StoreError::Tampered)));
}

fn parked() -> Parked {
    Parked {
        text_only: None,
        session_id: "s".into(),
        namespace: "bank".into(),
        agent: "triage".into(),
        voice: None,
        modalities: vec![],
        model: None,
        audio: None,
        kept: Kept::default(),
        handoff: None,
        generation: 0,
        replay: Replay::default(),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        reach: crate::directory::Reach::Candidates,
        variants: [("bank/triage".to_owned(), "warm".to_owned())].into(),
        placed: Some(crate::resume::Placement {
            agent: "bank/triage".into(),
            region: "us-west-2".into(),
            cause: "full".into(),
        }),
    }
}

#[test]
fn a_sealed_session_opens_only_unchanged_at_its_key_with_the_key_that_sealed_it() {
    let signer = GatewaySigner::from_seed(&[5; 32]);
    let value = seal(&signer, "k", &parked()).expect("sealed");
    let opened = open(&signer, "k", &value).expect("opens");
    assert_eq!((opened.agent.as_str(), opened.traceparent), ("triage", parked().traceparent));
    assert_eq!(opened.placed, parked().placed, "where it was placed is kept");
    assert_eq!(opened.reach, crate::directory::Reach::Candidates, "a test session stays one");
    assert_eq!(opened.variants, parked().variants, "a session keeps its variants");
    let changed = String::from_utf8_lossy(&value[SEAL_BYTES..]).replace("triage", "banking");
    let forged = [&value[..SEAL_BYTES], changed.as_bytes()].concat();
    assert!(matches!(open(&signer, "k", &forged), Err(StoreError::Tampered)), "changed");
    assert!(matches!(open(&signer, "other", &value), Err(StoreError::Tampered)), "moved to another key");
    let other = GatewaySigner::from_seed(&[6; 32]);
    assert!(matches!(open(&other, "k", &value), Err(StoreError::Tampered)), "another gateway's key");
    let unsealed = serde_json::to_vec(&parked()).expect("json");
    assert!(matches!(open(&signer, "k", &unsealed), Err(StoreError::Tampered)), "written without a seal");
    assert!(matches!(open(&signer, "k", b"short"), Err(StoreError::Tampered)));
}

#[tokio::test]
async fn memory_store_gives_a_parked_session_once_and_waits_while_parking() {
    let store = Store::default();
    let ttl = Duration::from_secs(30);
    assert!(matches!(store.take("k", Duration::ZERO).await.expect("take"), Taken::Unknown));
    store.hold("k", None, None, ttl, ttl).await.expect("hold");
    assert!(matches!(store.take("k", Duration::from_millis(60)).await.expect("take"), Taken::Held));
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.take("k", Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(120)).await;
    store.park("k", &parked(), ttl, None).await.expect("park");
    let taken = waiting.await.expect("joins").expect("take").parked();
    assert_eq!(taken.map(|p| p.agent).as_deref(), Some("triage"), "the early resume waited for the park");
    assert!(matches!(store.take("k", Duration::ZERO).await.expect("take"), Taken::Unknown), "taken once only");
    // Expiry.
    store.park("e", &parked(), Duration::from_millis(30), None).await.expect("park");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(matches!(store.take("e", Duration::ZERO).await.expect("take"), Taken::Unknown), "expired");
    // A hold released without a park (its park failed) does not hold resumes.
    store.hold("u", None, None, ttl, ttl).await.expect("hold");
    store.unmark("u").await.expect("unmark");
    assert!(matches!(store.take("u", Duration::from_secs(5)).await.expect("take"), Taken::Unknown));
}

#[tokio::test]
async fn a_parked_session_counts_toward_the_budget_until_taken_or_expired() {
    let budget = crate::budget::MemoryBudget::new(Some(1 << 20), 0);
    let store = Store::default();
    let mut account = budget.account();
    account.set(5000);
    store.park("k", &parked(), Duration::from_secs(30), Some(account)).await.expect("park");
    assert_eq!(budget.held(), 5000, "parked here, counted here");
    assert!(store.take("k", Duration::ZERO).await.expect("take").parked().is_some());
    assert_eq!(budget.held(), 0, "taken: given back");
    let mut account = budget.account();
    account.set(7000);
    store.park("e", &parked(), Duration::from_millis(20), Some(account)).await.expect("park");
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(matches!(store.take("other", Duration::ZERO).await.expect("take"), Taken::Unknown));
    assert_eq!(budget.held(), 0, "expired entries are swept, and their bytes given back");
}

#[test]
fn an_alias_opens_only_for_its_old_key_with_the_key_that_sealed_it() {
    let signer = GatewaySigner::from_seed(&[5; 32]);
    let value = super::seal::seal_alias(&signer, "old", "new");
    assert_eq!(super::seal::open_alias(&signer, "old", &value).expect("opens"), "new");
    assert!(matches!(super::seal::open_alias(&signer, "other", &value), Err(StoreError::Tampered)), "moved");
    let redirected = [&value[..SEAL_BYTES], b"another".as_slice()].concat();
    assert!(matches!(super::seal::open_alias(&signer, "old", &redirected), Err(StoreError::Tampered)), "redirected");
    let other = GatewaySigner::from_seed(&[6; 32]);
    assert!(matches!(super::seal::open_alias(&other, "old", &value), Err(StoreError::Tampered)), "another gateway");
}

#[tokio::test]
async fn memory_store_follows_a_rotated_token_to_the_session_and_forgets_an_ended_one() {
    let store = Store::default();
    let (lease, window) = (Duration::from_secs(15), Duration::from_secs(30));
    store.hold("k1", None, None, lease, window).await.expect("hold");
    // A handoff: the session's new token; the client may still hold the old one.
    store.hold("k2", Some("k1"), None, lease, window).await.expect("hold");
    assert_eq!(store.resolve("k1").await.expect("resolve"), "k2");
    let renewal = store.renew("k2", None, lease, window).await.expect("renew");
    assert_eq!(renewal, Renewal::Kept, "an in-memory hold is always its own");
    store.park("k2", &parked(), window, None).await.expect("park");
    let taken = store.take("k1", Duration::ZERO).await.expect("take").parked();
    assert_eq!(taken.map(|p| p.session_id).as_deref(), Some("s"), "the old token finds the parked session");
    assert!(matches!(store.take("k2", Duration::ZERO).await.expect("take"), Taken::Unknown), "taken once");
    // An ended session: its hold released, nothing to resume by either token.
    store.hold("k3", None, None, lease, window).await.expect("hold");
    store.hold("k4", Some("k3"), None, lease, window).await.expect("hold");
    store.unmark("k4").await.expect("unmark");
    assert!(matches!(store.take("k3", Duration::from_millis(100)).await.expect("take"), Taken::Unknown));
}
