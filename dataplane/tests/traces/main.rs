//! OpenTelemetry traces across processes: a `switchboard gateway` and one `switchboard
//! runtime` per Example Bank agent, each exporting over OTLP/HTTP (configured by the
//! standard variables only, the collector's token included: the receiver refuses an export
//! without it) to a real receiver that decodes what arrives. One conversation
//! from triage through idv (an identity check: a tool call) to banking (a balance: another)
//! must be one trace: the gateway's session span its root, every runtime session its child,
//! turns, model calls with the GenAI attributes and tool calls below them, the tool server
//! reached with that trace's `traceparent`, handoffs as events — and nothing the user said
//! in any span. The processes' JSON log lines about the session carry its ids. A client that
//! drops and resumes continues the trace. Local mode exports the same way, and over
//! OTLP/gRPC to a gRPC receiver when the variables say so.

#[path = "../runtime/common.rs"]
#[allow(dead_code)]
mod client;
#[path = "../support/ports.rs"]
#[allow(dead_code)]
mod ports;
mod processes;
mod receiver;
#[path = "../gateway/redis.rs"]
#[allow(dead_code)]
mod redis;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;
#[path = "../support/tools.rs"]
mod tools;
#[path = "../voice/common.rs"]
#[allow(dead_code)]
mod voice;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use switchboard_core::protocol::ServerMessage;

use client::{Client, replies};
use receiver::{Received, Receiver};
use redis::Redis;
use voice::{Call, Encoding};

/// What the user says; none of it may appear in a span.
const SAID: [&str; 3] = [
    "I'd like to check my balance",
    "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
    "My balance please",
];

/// Waits until the receiver holds a span `name` (spans are exported in batches, 100 ms
/// after they end here).
async fn wait_for(receiver: &Receiver, name: &str) -> Vec<Received> {
    for _ in 0..200 {
        let spans = receiver.spans();
        if spans.iter().any(|s| s.span.name == name) {
            // What ended with it comes in the same or the next batch.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return receiver.spans();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no span {name} arrived; got {:?}", receiver.spans().iter().map(|s| &s.span.name).collect::<Vec<_>>());
}

fn int(span: &Received, key: &str) -> i64 {
    match span.attr(key) {
        Some(Value::IntValue(n)) => *n,
        other => panic!("{key} of {} is {other:?}", span.span.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_conversation_is_one_trace_across_the_gateway_the_runtimes_and_the_tool_server() {
    let receiver = Receiver::start().await;
    let bank = processes::Bank::start(&receiver.endpoint()).await;
    let mut client = Client::start(&bank.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say(SAID[0]).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client.say(SAID[1]).await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    client.say(SAID[2]).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
    drop(client);

    let spans = wait_for(&receiver, "gateway.session").await;
    if std::env::var_os("TRACES_DEBUG").is_some() {
        for s in &spans {
            eprintln!("{} {} {} <- {} {:?}", s.service, s.span.name, s.span_id(), s.parent_id(), s.strings());
        }
    }
    let named = |name: &str| spans.iter().filter(|s| s.span.name == name).collect::<Vec<_>>();

    // The root: the gateway's session span, ids only.
    let roots = named("gateway.session");
    assert_eq!(roots.len(), 1, "one session, one gateway span");
    let root = roots[0];
    assert_eq!(root.service, "switchboard-gateway");
    assert!(root.span.parent_span_id.is_empty(), "the gateway's session span is the root");
    assert_eq!((root.text("agent"), root.text("namespace")), (Some("triage"), Some("bank")));
    let trace = root.trace_id();
    assert!(root.text("session_id").is_some_and(|id| id.starts_with("gw-")), "{:?}", root.span.attributes);
    assert_eq!(root.text("trace_id"), Some(trace.as_str()), "the span knows its trace id (logs carry it)");

    // Every span of every process is in that one trace.
    let traces: HashSet<String> = spans.iter().map(Received::trace_id).collect();
    assert_eq!(traces, HashSet::from([trace.clone()]), "one trace");
    let services: HashSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(services, HashSet::from(["switchboard-gateway", "switchboard-runtime"]));

    // Each agent's runtime session is a child of the gateway's session span.
    let sessions = named("runtime.session");
    let agents: HashSet<&str> = sessions.iter().filter_map(|s| s.text("agent")).collect();
    assert_eq!(agents, HashSet::from(["triage", "idv", "banking"]), "a runtime session per agent visited");
    for session in &sessions {
        assert_eq!(session.parent_id(), root.span_id(), "{:?} is the gateway session's child", session.text("agent"));
        assert_eq!(session.text("session_id"), root.text("session_id"), "the gateway's session id");
    }
    let by_id: HashMap<String, &Received> = spans.iter().map(|s| (s.span_id(), s)).collect();
    let parent_name = |span: &Received| by_id.get(&span.parent_id()).map(|p| p.span.name.clone());

    // Turns under runtime sessions; model calls under turns, with the GenAI attributes.
    let turns = named("turn");
    assert!(turns.len() >= 3, "{} turns", turns.len());
    assert!(turns.iter().all(|t| parent_name(t).as_deref() == Some("runtime.session")));
    assert!(turns.iter().any(|t| matches!(t.attr("time_to_first_response"), Some(Value::DoubleValue(_)))));
    let chats: Vec<_> = spans.iter().filter(|s| s.text("gen_ai.operation.name") == Some("chat")).collect();
    assert!(!chats.is_empty(), "model calls");
    for chat in &chats {
        assert_eq!(parent_name(chat).as_deref(), Some("turn"));
        assert_eq!(chat.text("gen_ai.system"), Some("aws.bedrock"));
        let model = chat.text("gen_ai.request.model").expect("the model");
        assert_eq!(chat.span.name, format!("chat {model}"));
        assert!(int(chat, "gen_ai.usage.input_tokens") > 0 && int(chat, "gen_ai.usage.output_tokens") > 0);
        assert!(matches!(chat.attr("gen_ai.server.time_to_first_token"), Some(Value::DoubleValue(s)) if *s >= 0.0));
    }

    // Tool calls: spans under turns, and the tool server got each call's traceparent.
    let tools: Vec<_> = spans.iter().filter(|s| s.text("gen_ai.operation.name") == Some("execute_tool")).collect();
    let idv = tools.iter().find(|t| t.text("gen_ai.tool.name") == Some("perform_idv_check")).expect("the idv check");
    assert_eq!(idv.span.name, "execute_tool perform_idv_check");
    assert_eq!(idv.text("outcome"), Some("success"));
    assert_eq!(idv.attr("cached"), Some(&Value::BoolValue(false)));
    assert_eq!(parent_name(idv).as_deref(), Some("turn"));
    let requests = bank.tool_requests.lock().expect("lock").clone();
    let (_, sent) = requests.iter().find(|(path, _)| path == "/idv").expect("the tool server got the idv check");
    assert_eq!(sent.as_deref(), Some(format!("00-{trace}-{}-01", idv.span_id()).as_str()), "the call's traceparent");
    for (path, traceparent) in &requests {
        assert!(
            traceparent.as_deref().is_some_and(|t| t.contains(&trace)),
            "{path} without the trace: {traceparent:?}"
        );
    }
    assert!(tools.iter().any(|t| t.text("gen_ai.tool.name") == Some("check_balance")));

    // Handoffs: events of the runtime sessions that handed off.
    let handoffs: Vec<(String, String)> = sessions
        .iter()
        .flat_map(|s| s.span.events.iter().filter(|e| e.name == "handoff"))
        .map(|e| {
            let text = |key: &str| match e.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone()) {
                Some(v) => match v.value {
                    Some(Value::StringValue(s)) => s,
                    other => format!("{other:?}"),
                },
                None => String::new(),
            };
            (text("source_agent"), text("target_agent"))
        })
        .collect();
    assert!(handoffs.contains(&("triage".into(), "idv".into())), "{handoffs:?}");
    assert!(handoffs.contains(&("idv".into(), "banking".into())), "{handoffs:?}");

    // Nothing the user said, nor the account number, is in any span.
    for span in &spans {
        for text in span.strings() {
            for said in SAID.iter().chain(&["Ada Lovelace", "12345678", "12-34-56", "1234.56"]) {
                assert!(!text.contains(said), "{:?} holds what the user said: {text:?}", span.span.name);
            }
        }
    }

    // Log lines about the session carry its session id and trace id (JSON fields).
    let session_id = root.text("session_id").expect("id");
    for process in ["gateway", "idv"] {
        let lines = bank.json_logs(process);
        let joined = lines.iter().filter(|l| l["span"]["trace_id"] == trace.as_str()).collect::<Vec<_>>();
        assert!(!joined.is_empty(), "{process} logged nothing in the session's span: {lines:#?}");
        assert!(joined.iter().all(|l| l["span"]["session_id"] == session_id), "{joined:#?}");
    }
}

/// A session at `url` from triage's greeting to idv's first answer.
async fn to_idv(url: &str) -> Client {
    let mut client = Client::start(url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say(SAID[0]).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_takes_the_same_variables_and_its_session_is_one_trace() {
    let receiver = Receiver::start().await;
    let (_local, url) = processes::local(&receiver.endpoint());
    drop(to_idv(&url).await);

    let spans = wait_for(&receiver, "gateway.session").await;
    assert!(spans.iter().all(|s| s.service == "switchboard-local"), "one process, one service");
    let root = spans.iter().find(|s| s.span.name == "gateway.session").expect("the root");
    assert!(spans.iter().all(|s| s.trace_id() == root.trace_id()), "one trace");
    let sessions: Vec<_> = spans.iter().filter(|s| s.span.name == "runtime.session").collect();
    let agents: HashSet<&str> = sessions.iter().filter_map(|s| s.text("agent")).collect();
    assert_eq!(agents, HashSet::from(["triage", "idv"]));
    assert!(sessions.iter().all(|s| s.parent_id() == root.span_id()), "children of the gateway's session span");
}

/// Waits until the receiver holds `count` spans `name`.
async fn wait_for_count(receiver: &Receiver, name: &str, count: usize) -> Vec<Received> {
    for _ in 0..200 {
        if receiver.spans().iter().filter(|s| s.span.name == name).count() >= count {
            tokio::time::sleep(Duration::from_millis(500)).await;
            return receiver.spans();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not {count} spans {name}; got {:?}", receiver.spans().iter().map(|s| &s.span.name).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_and_resumes_continues_the_same_trace() {
    let receiver = Receiver::start().await;
    let bank = processes::Bank::start(&receiver.endpoint()).await;
    resumes_in_one_trace(&receiver, &bank.url, &bank.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumed_on_another_gateway_replica_through_redis_continues_the_same_trace() {
    let redis = Redis::start();
    let receiver = Receiver::start().await;
    let bank = processes::Bank::start_with(&receiver.endpoint(), Some(&redis.url)).await;
    let second = bank.second_url.clone().expect("a second replica");
    resumes_in_one_trace(&receiver, &bank.url, &second).await;
    // Each replica logged a part of the session: the first until the client dropped, the
    // second from the resume.
    let session = |name: &str| bank.json_logs(name).iter().any(|l| l["span"]["session_id"].is_string());
    assert!(session("gateway") && session("gateway-2"), "both replicas served the session");
}

/// A session to idv at `url`, dropped, resumed at `resume_url`, verified there: every span of
/// both connections in one trace, the resumed gateway span the child of the first.
async fn resumes_in_one_trace(receiver: &Receiver, url: &str, resume_url: &str) {
    let client = to_idv(url).await;
    // The newest token, and the number of the last message received.
    let at = client.seen.iter().rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).expect("one");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = &client.seen[at] else {
        panic!("a token and its number: {:?}", client.seen[at]);
    };
    let (token, last_seq) = (token.clone(), seq + (client.seen.len() - at - 1) as u64);
    drop(client);

    let mut back = Client::connect(resume_url).await;
    let resume = switchboard_core::protocol::SessionStart {
        resume_token: Some(token),
        last_seq: Some(last_seq),
        ..Default::default()
    };
    back.send(&switchboard_core::protocol::ClientMessage::SessionStart(resume)).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    back.say(SAID[1]).await;
    let verified = back.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    drop(back);

    let spans = wait_for_count(receiver, "gateway.session", 2).await;
    let sessions: Vec<_> = spans.iter().filter(|s| s.span.name == "gateway.session").collect();
    assert_eq!(sessions.len(), 2, "the first connection's and the resumed one's");
    let resumed = |s: &Received| matches!(s.attr("resumed"), Some(Value::BoolValue(true)));
    let first = sessions.iter().find(|s| !resumed(s)).expect("the first connection's span");
    let second = sessions.iter().find(|s| resumed(s)).expect("the resumed connection's span");
    assert_eq!(second.trace_id(), first.trace_id(), "one trace across the resume");
    assert_eq!(second.parent_id(), first.span_id(), "the resumed span is the child of the parked one");
    assert_eq!(second.text("session_id"), first.text("session_id"));
    assert!(spans.iter().all(|s| s.trace_id() == first.trace_id()), "every span of both connections");
    let idv = spans.iter().filter(|s| s.span.name == "runtime.session" && s.text("agent") == Some("idv")).count();
    assert!(idv >= 2, "idv's runtime session before and after the resume, both in it: {idv}");
    let tool = spans.iter().any(|s| s.span.name.starts_with("execute_tool ") && s.parent_id() != first.span_id());
    assert!(tool, "the verification after the resume is in the trace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nova_sonic_stream_is_a_span_and_a_rotation_opens_the_next() {
    let receiver = Receiver::start().await;
    let rotate = [("SWITCHBOARD_VOICE_ROTATE_AFTER_SECONDS", "1")];
    let (_local, url) = processes::local_with(&receiver.endpoint(), &rotate, None);
    // A call to triage (hybrid) with audio: its session runs on Nova Sonic (the simulator).
    // After its greeting the stream is past its age at the first quiet moment: rotated.
    let mut call = Call::start(&url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "rotation")).await;
    // A typed question on the new stream: its usage is reported.
    call.send(&switchboard_core::protocol::ClientMessage::BidiTextInput { text: "What time is it?".into(), id: None });
    call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    call.hang_up().await;

    let spans = wait_for(&receiver, "gateway.session").await;
    let session = spans.iter().find(|s| s.span.name == "runtime.session").expect("triage's runtime session");
    let streams: Vec<_> = spans.iter().filter(|s| s.span.name == "sonic.stream").collect();
    assert!(
        streams.len() >= 2,
        "the first stream and the rotation's: {:?}",
        spans.iter().map(|s| &s.span.name).collect::<Vec<_>>()
    );
    for stream in &streams {
        assert_eq!(stream.parent_id(), session.span_id(), "a child of the runtime session");
        assert_eq!(stream.trace_id(), session.trace_id());
        assert_eq!(stream.text("gen_ai.system"), Some("aws.bedrock"));
        assert!(stream.text("gen_ai.request.model").is_some_and(|m| m.contains("sonic")), "{:?}", stream.strings());
        assert!(stream.text("cloud.region").is_some_and(|r| !r.is_empty()), "{:?}", stream.strings());
    }
    let opened_for = |s: &&&Received| s.text("sonic.opened_for") == Some("start");
    let first = streams.iter().find(opened_for).expect("the first stream");
    assert_eq!(int(first, "sonic.generation"), 1);
    assert_eq!(first.text("sonic.ended_for"), Some("rotation"), "replaced by the rotation: {:?}", first.strings());
    // Streams rotate at 1 s of age: the stream that answered may rotate too before the call
    // hangs up, and its replacement's span may be exported before it (an old stream's span
    // ends once its close is done). So the rotation's stream is found by its generation, and
    // the answer's usage on whichever rotation's stream answered.
    let rotated: Vec<_> = streams.iter().filter(|s| s.text("sonic.opened_for") == Some("rotation")).collect();
    assert!(rotated.iter().any(|s| int(s, "sonic.generation") == 2), "the rotation's stream");
    let answered =
        rotated.iter().find(|s| matches!(s.attr("gen_ai.usage.output_tokens"), Some(Value::IntValue(n)) if *n > 0));
    let answered = answered.expect("the answer's usage, as the service reported it");
    assert!(int(answered, "gen_ai.usage.input_tokens") > 0, "{:?}", answered.strings());
    // The runtime session's log events: the switch, with its reason.
    let switched = session.span.events.iter().any(|e| e.name.contains("switched to a new Nova Sonic stream"));
    assert!(switched, "{:?}", session.strings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_grpc_the_signal_protocol_wins_and_the_session_is_one_trace() {
    let receiver = Receiver::start_grpc().await;
    // The general variable says HTTP; the traces' own says gRPC, and wins. The receiver
    // speaks only gRPC (HTTP/2 with the TraceService), so an HTTP export would be lost.
    let protocol = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"), ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")];
    let (_local, url) = processes::local_with(&receiver.endpoint(), &protocol, None);
    drop(to_idv(&url).await);

    let spans = wait_for(&receiver, "gateway.session").await;
    let root = spans.iter().find(|s| s.span.name == "gateway.session").expect("the root");
    assert!(spans.iter().all(|s| s.trace_id() == root.trace_id()), "one trace");
    let agents: HashSet<&str> =
        spans.iter().filter(|s| s.span.name == "runtime.session").filter_map(|s| s.text("agent")).collect();
    assert_eq!(agents, HashSet::from(["triage", "idv"]));
    let chat = spans.iter().find(|s| s.span.name.starts_with("chat ")).expect("a model call");
    assert!(chat.text("gen_ai.request.model").is_some(), "with its GenAI attributes: {:?}", chat.strings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_said_enters_the_trace_only_when_opted_in_and_never_the_log() {
    let receiver = Receiver::start().await;
    let log = std::env::temp_dir().join(format!("switchboard-traces-content-{}.log", uuid::Uuid::new_v4()));
    // The platform's rule (the record's `--record-redact`) applies as well as the Agent's.
    let optin = [
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ("SWITCHBOARD_RECORD_REDACT", "caller=Ada Lovelace"),
    ];
    let (local, url) = processes::local_with(&receiver.endpoint(), &optin, Some(&log));
    let mut client = to_idv(&url).await;
    // What the idv Agent's rules, the platform's and the built-in detectors redact in the
    // record, they redact in the trace too.
    client.say(SAID[1]).await;
    client.turn().await;
    drop(client);

    let spans = wait_for(&receiver, "gateway.session").await;
    let events = |name: &str| -> Vec<String> {
        spans
            .iter()
            .flat_map(|s| s.span.events.iter())
            .filter(|e| e.name == name)
            .flat_map(|e| e.attributes.iter())
            .filter_map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(text)) if kv.key.starts_with("gen_ai.") => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    let said = events("gen_ai.user.message");
    assert!(said.iter().any(|t| t == SAID[0]), "the user's line is an event of its turn: {said:?}");
    let redacted = "My name is [redacted:caller], account [redacted:account], sort code [redacted:sort-code]";
    assert!(said.iter().any(|t| t == redacted), "redacted as the record is: {said:?}");
    let everything: Vec<String> = spans.iter().flat_map(Received::strings).collect();
    let secret = |t: &String| t.contains("12345678") || t.contains("12-34-56") || t.contains("Lovelace");
    assert!(!everything.iter().any(secret), "{everything:?}");
    assert!(!events("gen_ai.assistant.message").is_empty(), "so are the agent's");
    let turn = spans.iter().find(|s| s.span.events.iter().any(|e| e.name == "gen_ai.user.message"));
    assert!(turn.is_some_and(|t| t.span.name == "turn" || t.span.name == "runtime.session"));
    let arguments = events("gen_ai.tool.call.arguments");
    assert!(!arguments.is_empty(), "the transfer's arguments are an event of its tool span");
    let tool = spans.iter().find(|s| s.span.events.iter().any(|e| e.name == "gen_ai.tool.call.arguments"));
    assert!(tool.is_some_and(|t| t.span.name.starts_with("execute_tool ")), "{tool:?}");
    // The log had every info line of the session, and none of what was said.
    drop(local);
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(text.contains("session_id"), "the session was logged");
    assert!(!text.contains(SAID[0]), "the user's words are not in the log");
    let _ = std::fs::remove_file(log);
}
