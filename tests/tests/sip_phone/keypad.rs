//! Keys pressed on the phone: told to the agent as the caller's input, or, for a tool input
//! collected by keypad, given to the tool and nothing else (with the trunk's caller number):
//! not the model, the record, either process's log at debug level, or any span of their
//! traces (exported to a real OTLP receiver with what is said captured), whether the tool
//! runs or its schema refuses the keys.

use std::time::Duration;

use crate::phone::Phone;
use crate::stack::{SimScript, TRIAGE_NUMBER, sessions, stack, stack_with_env, wait_for};

/// The traces tests' OTLP receiver (over HTTP, as a collector's `otlp` receiver).
#[path = "../../../dataplane/tests/traces/receiver.rs"]
#[allow(dead_code)]
mod otlp;

#[test]
fn keys_pressed_on_the_phone_reach_the_agent_as_the_callers_input() {
    let stack = stack("keys");
    let (phone, console) = Phone::dial_with_keypad(&stack, "caller", "triage", 10, 30);
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    wait_for(
        "the phone has the call",
        Duration::from_secs(20),
        || phone.log().contains("Call established"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    std::thread::sleep(Duration::from_secs(3));
    Phone::press(console, "1234#");
    phone.wait_over(Duration::from_secs(45));
    let edge = stack.edge.log_text();
    // Each key once, however many RFC 4733 packets carried it; the keys are not in the log.
    let keys: u64 = edge
        .lines()
        .find_map(|l| l.split_once(" keys=").and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| {
            panic!("the edge logs how many keys it forwarded:\n{edge}\n--- baresip ---\n{}", phone.log())
        });
    assert_eq!(keys, 5, "five keys pressed, five forwarded:\n{edge}\n--- baresip ---\n{}", phone.log());
    assert!(!edge.contains("bidi_dtmf") && !edge.contains("1234"), "the keys are not logged:\n{edge}");
    // The agent was told them as the caller's input: the caller's line in the record.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let id = list[0]["id"].as_str().expect("a session").to_owned();
    let shown = sessions(&stack, &["show", &id]);
    let told: Vec<&str> = shown.lines().filter(|l| l.contains(" user ") && l.contains("The caller pressed")).collect();
    assert_eq!(told.len(), 1, "told once, at the '#': {shown}");
    assert!(told[0].contains("The caller pressed 1 2 3 4 #"), "{shown}");
}

/// A tool server of the test's own (real HTTP over TCP, one request a connection): every
/// POST is answered `{"checked": true}` and its JSON body kept.
struct ToolServer {
    port: u16,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl ToolServer {
    fn start() -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("addr").port();
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length.min(1 << 20)];
                if reader.read_exact(&mut body).is_ok()
                    && let Ok(json) = serde_json::from_slice(&body)
                {
                    kept.lock().expect("the bodies").push(json);
                }
                let answer = r#"{"checked": true}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        Self { port, bodies }
    }

    fn bodies(&self) -> Vec<serde_json::Value> {
        self.bodies.lock().expect("the bodies").clone()
    }
}

/// triage's test copy with `check_card`: the card number typed on the keypad (16-19 digits),
/// the caller's number and the number dialled bound from the call the edge vouched for.
fn with_keypad_tool(port: u16, pattern: &str) -> impl Fn(String) -> String {
    let pattern = pattern.to_owned();
    move |triage: String| {
        let tool = format!(
            "  tools:\n\
             \x20   - name: check_card\n\
             \x20     description: Check the caller's card; the caller types its number on the keypad.\n\
             \x20     inputSchema:\n\
             \x20       type: object\n\
             \x20       properties:\n\
             \x20         cardNumber: {{ type: string, pattern: \"{pattern}\" }}\n\
             \x20         caller: {{ type: string }}\n\
             \x20         dialled: {{ type: string }}\n\
             \x20       required: [cardNumber, caller, dialled]\n\
             \x20     http: {{ url: \"http://127.0.0.1:{port}/check\" }}\n\
             \x20     bind: {{ caller: phoneCall.caller, dialled: phoneCall.dialled }}\n\
             \x20     keypad: {{ input: cardNumber, minDigits: 16, maxDigits: 19, timeoutSeconds: 30 }}\n\
             \x20 gateway:\n    default: true"
        );
        let edited = triage.replacen("  gateway:\n    default: true", &tool, 1).replacen(
            "      kind: message\n      instruction: Greet",
            "      kind: message\n      tools: [check_card]\n      instruction: Greet",
            1,
        );
        assert!(edited.contains("tools: [check_card]") && edited.contains("keypad:"), "triage.yaml moved: {edited}");
        edited
    }
}

/// The simulator's script for the keypad test: the caller's tone (phrase 1) asks to check
/// the card; the agent calls `check_card` (the caller then types the number), and thanks or
/// apologises by its result.
fn keypad_script(name: &str) -> SimScript {
    let script = "sonic:\n  phrases:\n    1: \"Please check my card\"\n\
         rules:\n\
         \x20 - name: check\n\
         \x20   when: { userText: \"(?i)check my card\" }\n\
         \x20   reply: { toolUse: { name: check_card, input: {} } }\n\
         \x20 - name: checked\n\
         \x20   when: { toolResult: { name: check_card, status: success } }\n\
         \x20   reply: { text: \"Thank you, your card is fine.\" }\n\
         \x20 - name: failed\n\
         \x20   when: { toolResult: { name: check_card, status: error } }\n\
         \x20   reply: { text: \"Sorry, that did not work.\" }\n\
         default: { text: \"Hello from the bank.\" }\n";
    SimScript::write(name, script)
}

/// The card number's forms that must appear nowhere but in the tool's request: whole, its
/// first eight keys, and those as the model would be told keys (`4 9 2 9 ...`).
fn card_forms(card: &str) -> [String; 3] {
    let spaced: Vec<String> = card[..8].chars().map(String::from).collect();
    [card.to_owned(), card[..8].to_owned(), spaced.join(" ")]
}

/// Waits until `receiver` holds a span named `name` (exported in batches, 100 ms after they
/// end), then half a second more for what ended with it; returns every span then.
fn spans_once(receiver: &otlp::Receiver, name: &str) -> Vec<otlp::Received> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !receiver.spans().iter().any(|s| s.span.name == name) {
        let names: Vec<String> = receiver.spans().iter().map(|s| s.span.name.clone()).collect();
        assert!(std::time::Instant::now() < deadline, "no span {name} arrived in 30 s; got {names:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    receiver.spans()
}

/// The number the trunk's caller calls from in the keypad tests.
const CALLER: &str = "+442079460018";

/// What a keypad call left: the record's session, every span both processes exported, and
/// what the tool server was sent.
struct KeypadCall {
    shown: String,
    spans: Vec<otlp::Received>,
    bodies: Vec<serde_json::Value>,
}

/// A trunk's call from [`CALLER`] to the number triage claims, whose agent calls
/// `check_card` (its card number must match `pattern`) at the caller's first phrase; once
/// the tool waits for the keypad, the phone types `typed` and `#`. Both processes log at
/// debug level and export their traces to a real OTLP receiver (the traces tests'), with
/// what is said captured (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: the model's
/// input, the tools' arguments and results as span events). Waits until the entry ended
/// with `outcome` (the runtime's `keypad input` line), the phone hung up and the record and
/// the trace hold the session; checks that what was typed is nowhere but the tool's request.
fn keypad_call(name: &str, pattern: &str, typed: &str, outcome: &str) -> KeypadCall {
    let script = keypad_script(name);
    std::fs::write(script.dir.join("username"), "bank\n").expect("username");
    std::fs::write(script.dir.join("password"), "s3cret\n").expect("password");
    let credentials = format!("carrier={}", script.dir.display());
    let server = ToolServer::start();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let receiver = runtime.block_on(otlp::Receiver::start());
    let endpoint = receiver.endpoint();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_HEADERS", otlp::HEADERS),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ("SWITCHBOARD_LOG", "debug"),
    ];
    let stack = stack_with_env(
        name,
        &["--trunk-credentials", &credentials, "--digest-algorithms", "MD5"],
        "",
        &["--sim-script", &script.arg],
        with_keypad_tool(server.port, pattern),
        str::to_owned,
        &env,
    );
    // The caller is the carrier's trunk (it proves the digest credentials), calling from
    // CALLER to the number triage claims; it can type keys through baresip's console.
    let (phone, console) =
        Phone::dial_trunk_with_keypad(&stack, CALLER, TRIAGE_NUMBER, ";auth_user=bank;auth_pass=s3cret");
    let context = || stack.logs(&phone);
    wait_for(
        "the agent's tool waits for the keypad",
        Duration::from_secs(40),
        || stack.local.log_text().contains("outcome=\"waiting\""),
        context,
    );
    assert!(server.bodies().is_empty(), "the tool waits for the keys: {:?}", server.bodies());
    Phone::press(console, &format!("{typed}#"));
    wait_for(
        &format!("the entry ends {outcome}"),
        Duration::from_secs(20),
        || stack.local.log_text().contains(&format!("outcome=\"{outcome}\"")),
        context,
    );
    // The phone hangs up at the end of its WAV; the record is written behind the session.
    phone.wait_over(Duration::from_secs(40));
    wait_for(
        "the record has the session",
        Duration::from_secs(30),
        || sessions(&stack, &["list", "--json"]).contains("\"id\""),
        || sessions(&stack, &["list", "--json"]),
    );
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let id = list[0]["id"].as_str().expect("a session").to_owned();
    let shown = sessions(&stack, &["show", &id]);
    assert!(shown.contains("check_card"), "the tool call is in the record: {shown}");
    // What was typed is nowhere but the tool: not the record (not even as keys the model
    // was told), not the edge's log, not local mode's (gateway, runtime, and the simulated
    // model's lines on what it heard) log, at debug level.
    assert!(!shown.contains("The caller pressed"), "the keys were not told to the model: {shown}");
    let (edge_log, local_log) = (stack.edge.log_text(), stack.local.log_text());
    assert!(local_log.contains(" DEBUG "), "local mode logged at debug level: {local_log}");
    for (what, text) in
        [("the record", shown.as_str()), ("the edge's log", &edge_log), ("local mode's log", &local_log)]
    {
        for form in card_forms(typed) {
            assert!(!text.contains(&form), "{what} holds the card number ({form}): {text}");
        }
    }
    // Nor any span either process exported: not an attribute, an event (the model's input,
    // the tool's arguments and result) or a name. The session's trace is there, its tool
    // call with it.
    let spans = spans_once(&receiver, "gateway.session");
    let strings: Vec<String> = spans.iter().flat_map(otlp::Received::strings).collect();
    let tool = spans.iter().find(|s| s.span.name == "execute_tool check_card");
    let arguments = tool.is_some_and(|t| t.span.events.iter().any(|e| e.name == "gen_ai.tool.call.arguments"));
    assert!(arguments, "the tool call's span, with the model's arguments as its event: {strings:?}");
    assert!(
        strings.iter().any(|s| s.contains("check my card")),
        "what the caller said is captured in the trace (so its events were read): {strings:?}"
    );
    for form in card_forms(typed) {
        let holding: Vec<&String> = strings.iter().filter(|s| s.contains(&form)).collect();
        assert!(holding.is_empty(), "a span holds the card number ({form}): {holding:?}");
    }
    let names: Vec<(&str, &str)> = spans.iter().map(|s| (s.service.as_str(), s.span.name.as_str())).collect();
    eprintln!("{} spans ({names:?}), {} strings in them, none holding the card number", spans.len(), strings.len());
    KeypadCall { shown, spans, bodies: server.bodies() }
}

#[test]
fn a_trunks_caller_number_and_a_card_number_typed_on_the_keypad_reach_the_tool_and_nothing_else() {
    const CARD: &str = "4929123412341234";
    let call = keypad_call("keypad", "^[0-9]{16,19}$", CARD, "collected");
    assert_eq!(
        call.bodies,
        [serde_json::json!({ "cardNumber": CARD, "caller": CALLER, "dialled": TRIAGE_NUMBER })],
        "the keys typed and the call's numbers reached the tool: {}",
        call.shown
    );
}

/// The error path, where a value is most easily echoed (a schema's message quotes it): keys
/// the tool's schema refuses end the entry as `keypad_invalid`, a tool error the model is
/// told, naming the field and how many keys — in the record and the trace, never the keys.
#[test]
fn a_card_number_the_tools_schema_refuses_is_an_error_that_holds_no_keys() {
    const CARD: &str = "5929123412341234";
    let call = keypad_call("keypad-invalid", "^4[0-9]{15,18}$", CARD, "invalid");
    assert!(call.bodies.is_empty(), "the tool did not run: {:?}", call.bodies);
    assert!(call.shown.contains("keypad_invalid"), "the error is in the record: {}", call.shown);
    let tool = call.spans.iter().find(|s| s.span.name == "execute_tool check_card").expect("the tool's span");
    assert_eq!(tool.text("error.type"), Some("keypad_invalid"), "{:?}", tool.strings());
}
