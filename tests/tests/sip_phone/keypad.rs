//! Keys pressed on the phone: told to the agent as the caller's input, or, for a tool input
//! collected by keypad, given to the tool and nothing else (with the trunk's caller number).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::phone::Phone;
use crate::stack::{TRIAGE_NUMBER, free_udp_tcp_ports, sessions, stack, stack_edited, wait_for};

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
fn with_keypad_tool(port: u16) -> impl Fn(String) -> String {
    move |triage: String| {
        let tool = format!(
            "  tools:\n\
             \x20   - name: check_card\n\
             \x20     description: Check the caller's card; the caller types its number on the keypad.\n\
             \x20     inputSchema:\n\
             \x20       type: object\n\
             \x20       properties:\n\
             \x20         cardNumber: {{ type: string, pattern: \"^[0-9]{{16,19}}$\" }}\n\
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
fn keypad_script(dir: &Path) -> PathBuf {
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
    std::fs::create_dir_all(dir).expect("a folder");
    let path = dir.join("keypad-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

#[test]
fn a_trunks_caller_number_and_a_card_number_typed_on_the_keypad_reach_the_tool_and_nothing_else() {
    const CALLER: &str = "+442079460018";
    const CARD: &str = "4929123412341234";
    let dir = std::env::temp_dir().join(format!("switchboard-sip-keypad-script-{}", std::process::id()));
    let script = keypad_script(&dir);
    let script_arg = script.to_string_lossy().into_owned();
    std::fs::write(dir.join("username"), "bank\n").expect("username");
    std::fs::write(dir.join("password"), "s3cret\n").expect("password");
    let credentials = format!("carrier={}", dir.display());
    let server = ToolServer::start();
    let stack = stack_edited(
        "keypad",
        &["--trunk-credentials", &credentials, "--digest-algorithms", "MD5"],
        "",
        &["--sim-script", &script_arg],
        with_keypad_tool(server.port),
    );
    // The caller is the carrier's trunk (it proves the digest credentials), calling from
    // CALLER to the number triage claims; it can type keys through baresip's console.
    let console = free_udp_tcp_ports(1);
    let dial = format!("/dial sip:{TRIAGE_NUMBER}@{};transport=udp", stack.sip);
    let config = format!("module cons.so\ncons_listen 127.0.0.1:{console}\n");
    let (phone, _) = Phone::start(
        &stack.dir,
        &stack.tools,
        "caller",
        CALLER,
        20,
        60,
        "udp",
        ";auth_user=bank;auth_pass=s3cret",
        &config,
        Some(&dial),
    );
    let context = || {
        format!(
            "{}\n--- local ---\n{}\n--- baresip ---\n{}",
            stack.edge.log_text(),
            stack.local.log_text(),
            phone.log()
        )
    };
    wait_for(
        "the agent's tool waits for the keypad",
        Duration::from_secs(40),
        || stack.local.log_text().contains("outcome=\"waiting\""),
        context,
    );
    assert!(server.bodies().is_empty(), "the tool waits for the keys: {:?}", server.bodies());
    Phone::press(console, &format!("{CARD}#"));
    wait_for("the tool runs", Duration::from_secs(20), || !server.bodies().is_empty(), context);
    let bodies = server.bodies();
    assert_eq!(
        bodies,
        [serde_json::json!({ "cardNumber": CARD, "caller": CALLER, "dialled": TRIAGE_NUMBER })],
        "the keys typed and the call's numbers reached the tool: {}",
        context()
    );
    wait_for(
        "the tool's success is in the log",
        Duration::from_secs(10),
        || stack.local.log_text().contains("outcome=\"collected\""),
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
    // The card number is nowhere but the tool: not the record (not even as keys the model
    // was told), not the edge's log, not local mode's (gateway, runtime) log.
    assert!(!shown.contains("The caller pressed"), "the keys were not told to the model: {shown}");
    for (what, text) in [
        ("the record", shown.as_str()),
        ("the edge's log", &stack.edge.log_text()),
        ("local mode's log", &stack.local.log_text()),
    ] {
        assert!(!text.contains(CARD) && !text.contains(&CARD[..8]), "{what} holds the card number: {text}");
    }
}
