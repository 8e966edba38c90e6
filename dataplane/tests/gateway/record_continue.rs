//! Continuing an ended session brings back a summary of it as well as its memory (but not
//! who the caller is) and last turns: once a model (the real Bedrock client against the
//! simulator's echo) has summarised the session's redacted record, the continued session's
//! agent has that summary in its system prompt.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::store::SessionRecord;
use switchboard_record::{RecordConfig, Store};
use switchboard_sim::banking_script;
use switchboard_sim::script::Rule;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::record::{Ended, conversation, ended, fleet, keys, kinds, newest_token, recorder, recorder_with};
use crate::record_access::echo_summariser;

/// A rule for the agents' model: asked what was said before, it answers with the start of
/// the summary in its system prompt (the core's "Summary of the earlier conversation").
const RECALL: &str = r#"
name: recall
when:
  userText: "(?i)what did we talk about"
  system: "Summary of the earlier conversation:\n(?P<earlier>[^\n]{0,60})"
reply:
  text: "Earlier: {earlier}"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_brings_back_the_records_summary_of_it() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-continue-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (_summary_sim, summary) = echo_summariser().await;
    let (recorder, stop) = recorder_with(store.clone(), None, RecordConfig::default(), Some(summary));
    let mut script = banking_script().expect("script");
    script.rules.insert(0, serde_yaml::from_str::<Rule>(RECALL).expect("rule"));
    let fleet =
        Fleet::recording(&[], keys(), GatewayConfig::default(), ResumeStore::default(), script, Some(recorder)).await;
    let Ended { id, token } = conversation(&fleet.url, &[("x-api-key", "web-key")], || async {}).await;
    ended(&store, &id).await;
    let mut written = None;
    for _ in 0..300 {
        written = store.show(&id).await.expect("store").and_then(|r| r.summary.summary);
        if written.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written = written.expect("the model summarised the session within 30 s");
    assert!(written.starts_with("You said: Agent bank/triage: "), "{written}");

    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    let start = SessionStart { continue_from: Some(id.clone()), continue_token: Some(token), ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.say("What did we talk about before?").await;
    let recalled = client.turn().await;
    let expected = format!("Earlier: {}", &written[..60]);
    assert!(replies(&recalled).iter().any(|r| r.contains(&expected)), "{expected:?} in {recalled:?}");
    // Who the caller is did not come back: no balance until she is verified again.
    client.say("What is my balance now?").await;
    let balance = client.turn().await;
    assert!(!replies(&balance).iter().any(|r| r.contains("1234.56")), "not verified yet: {balance:?}");
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_is_continued_only_by_its_own_client_once_and_its_caller_verifies_again() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, stop) = recorder(store.clone(), None);
    let fleet = fleet(recorder, keys()).await;
    let Ended { id, token } = conversation(&fleet.url, &[("x-api-key", "web-key")], || async {}).await;
    ended(&store, &id).await;
    let start = |from: &str, token: Option<&str>| {
        ClientMessage::SessionStart(SessionStart {
            continue_from: Some(from.to_owned()),
            continue_token: token.map(str::to_owned),
            ..Default::default()
        })
    };
    let other_token = "ab".repeat(32);

    // The id alone (it is in logs, traces and every identity assertion), another token,
    // another key with the right token, an unknown id: the same refusal, nothing said
    // about the session, and the token is not used up by any of them.
    for (key, from, token) in [
        ("web-key", id.as_str(), None),
        ("web-key", id.as_str(), Some(other_token.as_str())),
        ("web2-key", id.as_str(), Some(token.as_str())),
        ("web-key", "gw-unknown", Some(token.as_str())),
    ] {
        let mut other = Client::connect_with(&fleet.url, &[("x-api-key", key)]).await;
        other.send(&start(from, token)).await;
        let (code, _) = other.closed().await;
        assert_eq!(code, close_code::RESUME_REFUSED, "{key} continuing {from} with {token:?}");
        assert!(
            other.seen.iter().any(
                |m| matches!(m, ServerMessage::BidiError { message, .. } if message.contains("cannot be continued"))
            ),
            "{:?}",
            other.seen
        );
        assert!(!other.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })), "{:?}", other.seen);
    }

    // Its own client (the key and the newest token): the session goes on under its id at
    // the banking agent, but who the caller is does not come back with it: no balance
    // until the caller is verified again.
    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    client.send(&start(&id, Some(&token))).await;
    let back = client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert!(
        back.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { session_id, agent, .. } if *session_id == id && agent == "banking")),
        "{back:?}"
    );
    let next = newest_token(&back);
    assert_ne!(next, token, "the continued session's start brings a new token");
    client.say("What is my balance now?").await;
    let balance = client.turn().await;
    assert!(
        !replies(&balance).iter().any(|r| r.contains("1234.56")),
        "a continued session must not carry the verified caller: {balance:?}"
    );
    assert!(
        !balance.iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")),
        "{balance:?}"
    );
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;
    ended_times(&store, &id, 2).await;

    // The token it used works no more; the one its continuation brought does.
    let mut again = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    again.send(&start(&id, Some(&token))).await;
    let (code, _) = again.closed().await;
    assert_eq!(code, close_code::RESUME_REFUSED, "a used token: {:?}", again.seen);
    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    client.send(&start(&id, Some(&next))).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { session_id, .. } if *session_id == id)).await;
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;

    // Every part in one record.
    let record = ended_times(&store, &id, 3).await;
    let kinds = kinds(&record);
    assert_eq!(kinds.iter().filter(|k| **k == "session_start").count(), 3, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "session_end").count(), 3, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"session_end"), "{kinds:?}");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// The record of `id` once it started and ended `times` times (a continued session's
/// parts share one record), the last event its end.
pub(crate) async fn ended_times(store: &Store, id: &str, times: usize) -> SessionRecord {
    let mut record = ended(store, id).await;
    for _ in 0..200 {
        let count = |kind: &str| record.events.iter().filter(|e| e.kind == kind).count();
        if count("session_start") == times
            && count("session_end") == times
            && record.events.last().is_some_and(|e| e.kind == "session_end")
        {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        record = ended(store, id).await;
    }
    record
}
