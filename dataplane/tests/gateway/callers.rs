//! The caller across sessions, through the real gateway, runtimes and simulator and the
//! real stores: a verified caller who asked for brief answers is greeted briefly in their
//! next session, with the summary of the last one in the agent's prompt; another caller
//! gets none of it; `switchboard callers delete` forgets the caller; a continued session
//! keeps what the caller asks for; and on PostgreSQL the writer deletes callers past the
//! caller retention.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::store::callers::{CallerState, caller_id_of};
use switchboard_record::{Entry, RecordConfig, Store, Update, now_us};
use switchboard_sim::banking_script;
use switchboard_sim::script::Rule;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::postgres::Postgres;
use crate::record::{ended, keys, newest_token, recorder_with, session_id};
use crate::record_access::echo_summariser;
use crate::record_continue::ended_times;

/// Asked what the last call was about, the agent answers from `callerHistory`.
const LAST_TIME: &str = r#"
name: last-time
when:
  userText: "(?i)what did we talk about last time"
  system: "callerHistory: \\[\\{\"started_at\":\\d+,\"summary\":\"(?P<earlier>[^\"]{0,40})"
reply:
  text: "Last time: {earlier}"
"#;

const ADA: &str = "My name is Ada Lovelace, account 12345678, sort code 12-34-56";
const ALAN: &str = "My name is Alan Turing, account 87654321, sort code 65-43-21";

/// A session verified as `who`, at the banking agent after its balance reply; the client,
/// the session id and that reply.
async fn at_banking(url: &str, who: &str) -> (Client, String, String) {
    let mut client = Client::connect_with(url, &[("x-api-key", "web-key")]).await;
    client.send(&ClientMessage::SessionStart(SessionStart::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client.say(who).await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = replies(&client.turn().await).join(" ");
    (client, id, balance)
}

async fn close(mut client: Client) {
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;
}

/// What `store` keeps of the caller `subject` once `done` holds (the writer batches).
async fn caller_when(store: &Store, subject: &str, done: impl Fn(&Option<CallerState>) -> bool) -> Option<CallerState> {
    let id = caller_id_of("bank", subject);
    let mut state = None;
    for _ in 0..300 {
        state = store.caller(&id, "").await.expect("store");
        if done(&state) {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the caller's state did not come within 30 s: {state:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_verified_caller_is_greeted_with_their_preferences_until_deleted() {
    let dir = std::env::temp_dir().join(format!("switchboard-callers-{}", uuid::Uuid::new_v4()));
    let db = dir.join("record.db");
    let store = Store::file(&db).expect("store");
    let (_summary_sim, summary) = echo_summariser().await;
    let (recorder, stop) = recorder_with(store.clone(), None, RecordConfig::default(), Some(summary));
    let mut script = banking_script().expect("script");
    script.rules.insert(0, serde_yaml::from_str::<Rule>(LAST_TIME).expect("rule"));
    let fleet =
        Fleet::recording(&[], keys(), GatewayConfig::default(), ResumeStore::default(), script, Some(recorder)).await;

    // First call: Ada asks for brief answers; the banking agent remembers it.
    let (mut client, first, balance) = at_banking(&fleet.url, ADA).await;
    assert!(balance.contains("Your balance is 1234.56 GBP"), "no preference yet: {balance}");
    client.say("I'd like brief answers, please").await;
    let noted = replies(&client.turn().await).join(" ");
    assert!(noted.contains("Noted: brief answers"), "{noted}");
    close(client).await;
    ended(&store, &first).await;
    let kept = caller_when(&store, "12345678", |s| s.as_ref().is_some_and(|s| !s.history.is_empty())).await;
    let kept = kept.expect("kept");
    assert_eq!(kept.memory, [("callerPreferences".to_owned(), json!({"verbosity": "brief"}))].into());
    let earlier = kept.history[0].summary.clone();
    assert!(earlier.starts_with("You said: "), "the record's summary of the first call: {earlier}");

    // Second call: verified again, she is greeted as she asked, and the agent knows the
    // last call.
    let (mut client, _, balance) = at_banking(&fleet.url, ADA).await;
    assert!(balance.contains("Welcome back. Balance: 1234.56 GBP."), "{balance}");
    client.say("What did we talk about last time?").await;
    let recalled = replies(&client.turn().await).join(" ");
    let expected: String = earlier.chars().take_while(|c| *c != '"').take(40).collect();
    assert!(recalled.contains(&format!("Last time: {expected}")), "{expected:?} in {recalled}");
    close(client).await;

    // Another caller gets none of it.
    let (client, _, balance) = at_banking(&fleet.url, ALAN).await;
    assert!(balance.contains("Your balance is 310.02 GBP"), "{balance}");
    close(client).await;

    // Deleted on request: the next call is not greeted as before.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["callers", "delete", "--namespace", "bank", "--caller", "12345678"])
        .env("SWITCHBOARD_RECORD_DATABASE_URL", format!("sqlite:{}", db.display()))
        .output()
        .expect("switchboard runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said} {}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("deleted"), "{said}");
    assert_eq!(store.caller(&caller_id_of("bank", "12345678"), "").await.expect("store"), None);
    let (client, last, balance) = at_banking(&fleet.url, ADA).await;
    assert!(balance.contains("Your balance is 1234.56 GBP"), "forgotten: {balance}");
    let token = newest_token(&client.seen);
    close(client).await;
    ended(&store, &last).await;

    // A continued session comes back without its verified caller (its verification happened
    // before it), so what is asked there is nobody's to keep: the caller's state is as the
    // deletion and her last call left it.
    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    let start = SessionStart { continue_from: Some(last.clone()), continue_token: Some(token), ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.say("I'd like detailed answers, please").await;
    client.turn().await;
    close(client).await;
    ended_times(&store, &last, 2).await;
    let state = store.caller(&caller_id_of("bank", "12345678"), "").await.expect("store");
    assert!(
        state.as_ref().is_none_or(|s| !s.memory.contains_key("callerPreferences")),
        "an unverified continuation wrote the caller's preferences: {state:?}"
    );
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

fn entry(session: &str, at_us: i64, update: Update) -> Entry {
    Entry {
        session: session.into(),
        at_us,
        ord: 0,
        agent: "bank/banking".into(),
        kind: "caller",
        data: json!(null),
        update: Some(update),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_callers_past_the_retention_are_deleted_and_the_others_kept() {
    let pg = Postgres::start();
    let store = Store::open(&pg.url).expect("store");
    store.migrate().await.expect("migrates");
    let day_us = 86_400_000_000_i64;
    let (old, recent) = (caller_id_of("bank", "12345678"), caller_id_of("bank", "87654321"));
    let mut batch = Vec::new();
    for (caller, session, at) in [(&old, "s-old", now_us() - 40 * day_us), (&recent, "s-new", now_us() - day_us)] {
        batch.push(entry(session, at, Update::CallerSeen { caller: caller.clone(), namespace: "bank".into() }));
        let memory = Update::CallerMemory {
            caller: caller.clone(),
            key: "callerOpenTasks".into(),
            value: json!(["replace my card"]),
        };
        batch.push(entry(session, at, memory));
    }
    // A value past the bound is not kept; the caller's others are.
    let huge =
        Update::CallerMemory { caller: recent.clone(), key: "callerNotes".into(), value: json!("x".repeat(20_000)) };
    batch.push(entry("s-new", now_us(), huge));
    store.write(&batch).await.expect("writes");
    assert!(store.caller(&old, "").await.expect("reads").is_some());

    // A writer with a 30-day caller retention deletes the old caller at its first write.
    let config = RecordConfig { caller_retention: Some(Duration::from_secs(30 * 86_400)), ..RecordConfig::default() };
    let (recorder, stop) = recorder_with(store.clone(), None, config, None);
    recorder.push(entry("s-other", now_us(), Update::Turn));
    let mut gone = false;
    for _ in 0..100 {
        if store.caller(&old, "").await.expect("reads").is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the caller last seen 40 days ago is deleted");
    let kept = store.caller(&recent, "").await.expect("reads").expect("the recent caller is kept");
    assert_eq!(kept.memory, [("callerOpenTasks".to_owned(), json!(["replace my card"]))].into());
    assert!(store.delete_caller(&recent).await.expect("deletes"));
    assert!(!store.delete_caller(&recent).await.expect("deletes"), "nothing left to delete");
    assert_eq!(store.caller(&recent, "").await.expect("reads"), None);
    stop.cancel();
}
