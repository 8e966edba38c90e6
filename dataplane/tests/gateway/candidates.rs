//! Test sessions on candidate pods: an Agent whose rollout waits for its AgentTests
//! (`gateRollout`) runs its edited spec on a candidate pod behind `<agent>-candidate`,
//! which the routing table lists. A session that asks for candidates
//! (`session_start.candidate`), with a credential marked for tests, is served there by that
//! Agent — at the start, after a handoff, after a resume — and by the live pods of every
//! other Agent; no other session ever is. Real runtime processes; the candidate differs
//! from the live pods in its text model, which its `bidi_connection_start` names.

use std::process::{Command, Output};

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_gateway::auth::Auth;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::resume::{position, resume_start};

/// The live pods' text model (the Example Bank's default) and the candidate's.
const LIVE_MODEL: &str = "amazon.nova-lite-v1:0";
const CANDIDATE_MODEL: &str = "amazon.nova-pro-v1:0";
const TESTER: (&str, &str) = ("x-api-key", "tester-key");
const WEB: (&str, &str) = ("x-api-key", "web-key");

fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn start(candidate: bool) -> ClientMessage {
    ClientMessage::SessionStart(SessionStart { candidate, ..Default::default() })
}

/// `(agent, model, candidate)` of each `bidi_connection_start` in `seen`.
fn starts(seen: &[ServerMessage]) -> Vec<(String, String, bool)> {
    seen.iter()
        .filter_map(|m| match m {
            ServerMessage::BidiConnectionStart { agent, model, candidate, .. } => {
                Some((agent.clone(), model.clone(), *candidate))
            }
            _ => None,
        })
        .collect()
}

/// Triage, identity verification at idv, then the balance at banking.
async fn to_banking(client: &mut Client) -> Vec<ServerMessage> {
    client.verify_at_idv().await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.turn().await
}

/// Runs `switchboard test` from the repository root.
fn switchboard_test(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("test")
        .args(args)
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env_remove("RUST_LOG")
        .env_remove("SWITCHBOARD_LOG")
        .output()
        .expect("switchboard runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_session_meets_held_agents_at_their_candidate_pods_and_no_other_session_does() {
    let keys = format!("tester {} candidates=test\nweb {}\n", digest("tester-key"), digest("web-key"));
    let mut fleet = Fleet::with_auth(&[], Auth::new(Some(&keys), vec![]).expect("keys")).await;
    fleet.hold("banking", |spec| spec.model.text_model_id = CANDIDATE_MODEL.into());

    // A credential not marked for tests may not ask for candidates.
    let mut web = Client::connect_with(&fleet.url, &[WEB]).await;
    web.send(&start(true)).await;
    assert_eq!(web.closed().await.0, close_code::NOT_EXPOSED, "{:?}", web.seen);
    let refused = web.seen.iter().find_map(|m| match m {
        ServerMessage::BidiError { code, message, .. } if code == "candidate_not_allowed" => Some(message.clone()),
        _ => None,
    });
    let refused = refused.unwrap_or_else(|| panic!("candidate_not_allowed: {:?}", web.seen));
    assert!(refused.contains("\"web\"") && refused.contains("candidates=test"), "{refused}");
    assert!(starts(&web.seen).is_empty(), "no runtime session was opened");

    // The test session: triage and idv (not held) at their live pods, banking at its
    // candidate, which answers from the same tools.
    let mut test = Client::connect_with(&fleet.url, &[TESTER]).await;
    test.send(&start(true)).await;
    let balance = to_banking(&mut test).await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
    let live = |agent: &str| (agent.to_owned(), LIVE_MODEL.to_owned(), false);
    assert_eq!(
        starts(&test.seen),
        [live("triage"), live("idv"), ("banking".into(), CANDIDATE_MODEL.into(), true)],
        "only the held agent is met at its candidate"
    );

    // Resumed, the test session is still one: banking's candidate serves it again.
    let (token, last_seq) = position(&test.seen);
    drop(test);
    let mut back = Client::connect_with(&fleet.url, &[TESTER]).await;
    back.send(&resume_start(&token, last_seq)).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert_eq!(starts(&back.seen), [("banking".into(), CANDIDATE_MODEL.into(), true)], "{:?}", back.seen);
    drop(back);

    // The same credential's ordinary session, and another's, meet the live pods only.
    for key in [TESTER, WEB] {
        let mut client = Client::connect_with(&fleet.url, &[key]).await;
        client.send(&start(false)).await;
        to_banking(&mut client).await;
        assert_eq!(starts(&client.seen), [live("triage"), live("idv"), live("banking")], "{key:?}");
    }

    // The candidate pod is gone (no ready candidate): a test session's handoff to banking
    // fails, and is never made to the live pods, which run the spec before the edit.
    let table = fleet.directory.borrow().table().clone();
    fleet.pods_of("banking-candidate").for_each(|pod| pod.kill());
    fleet.publish(table);
    let mut test = Client::connect_with(&fleet.url, &[TESTER]).await;
    test.send(&start(true)).await;
    test.verify_at_idv().await;
    test.say("My balance please").await;
    let failed = test.until(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "handoff_failed")).await;
    let Some(ServerMessage::BidiError { message, recoverable: true, .. }) = failed.last() else {
        panic!("a recoverable handoff_failed: {failed:?}");
    };
    assert!(message.contains("no ready candidate pod"), "{message}");
    assert!(starts(&test.seen).iter().all(|(agent, ..)| agent != "banking"), "{:?}", test.seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchboard_test_checks_that_held_agents_answer_from_their_candidates() {
    let keys = format!("tester {} candidates=test\n", digest("tester-key"));
    let mut fleet = Fleet::with_auth(&[], Auth::new(Some(&keys), vec![]).expect("keys")).await;
    fleet.hold("banking", |spec| spec.model.text_model_id = CANDIDATE_MODEL.into());
    let run = |candidate: &str| {
        let args = ["examples/banking/tests/balance.yaml", "--gateway", &fleet.url, "--api-key", "tester-key"];
        switchboard_test(&[&args[..], &["--candidate", candidate]].concat())
    };

    // banking's held rollout passes the balance scenario on its candidate pod.
    let passed = tokio::task::block_in_place(|| run("banking"));
    let stdout = String::from_utf8_lossy(&passed.stdout);
    assert!(passed.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&passed.stderr));
    assert!(stdout.contains("served by their candidate pods: banking"), "{stdout}");

    // idv has no candidate: its live pods serve the test session, and the run says so
    // rather than passing what is not under test.
    let failed = tokio::task::block_in_place(|| run("idv"));
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success(), "{stdout}");
    assert!(stdout.contains("idv served by its candidate pods"), "{stdout}");
    assert!(stdout.contains("its live pods served it"), "{stdout}");
}
