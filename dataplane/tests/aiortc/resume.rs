//! A spoken conversation over WebRTC whose client vanishes and comes back (resume.py is the
//! client's part, one process per call):
//!
//! 1. aiortc calls triage and asks for its balance; triage hands over to idv, which asks for
//!    the caller's details; they are spoken and idv verifies them (the verified caller goes
//!    into the session's memory). Then the client's process ends without a word — no
//!    `DELETE`, no DTLS close: an app killed, or a phone whose network went.
//! 2. A new process, a new `RTCPeerConnection` and a new offer — through TURN only: relay
//!    candidates from a real coturn ([`crate::coturn`]) with the credential the first call's
//!    answer handed out (the REST-secret scheme), as a client whose network now lets no UDP
//!    reach the edge directly comes back (`iceTransportPolicy: "relay"`). Its data channel's
//!    `session_start` carries the newest resume token and the last `seq` received. The
//!    gateway detaches the session from the old call (whose client it takes for dead, as a
//!    WebSocket's) and resumes it — the same session id, at idv. "My balance please" is
//!    answered: idv passes the caller to banking (heard through the relay) and banking tells
//!    the balance — the rules only do that for a caller the session's memory holds as
//!    verified, so the memory came through the resume. Both ends say the media went through
//!    the relay: aiortc nominated its relay candidate, and the edge counts the call's ICE as
//!    connected to a `relay` candidate.
//!
//! The old call ends (the edge closes it once its session is taken over) and the new one by
//! `DELETE`; no call is left.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::grant::GatewaySigner;
use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_local::{self as local, LocalOptions};
use switchboard_sim::BANKING_SCRIPT_YAML;
use switchboard_sim::sonic::audio::silence;
use switchboard_sim::sonic::phrase_tone;
use switchboard_webrtc_edge::turn::{Credential, Turn};

use crate::coturn::Coturn;

use crate::browser::{BALANCE_REQUEST, IDV_DETAILS, tools_bin, wav};

/// The secret the edge and coturn share.
const SECRET: &str = "the-edge-and-coturn-share-this";

/// Phrase 3: asked of a verified caller, the balance.
const MY_BALANCE: u32 = 3;

/// The banking script with the three phrases; replies at 20 ms a character, so each is
/// heard for a while.
fn script() -> String {
    format!(
        r#"{BANKING_SCRIPT_YAML}
sonic:
  turnDetection: {{ silenceMs: {{ high: 400, medium: 400, low: 400 }} }}
  phrases:
    {BALANCE_REQUEST}: "I'd like to check my balance"
    {IDV_DETAILS}: "My name is Ada Lovelace, account 12345678, sort code 12-34-56"
    {MY_BALANCE}: "My balance please"
  speech: {{ msPerChar: 20, chunkMs: 40, responseDelayMs: 50 }}
"#
    )
}

/// A microphone: each (silence ms, phrase, phrase ms), then `tail` ms of silence.
fn microphone(parts: &[(u64, u32, u64)], tail: u64) -> Vec<u8> {
    let mut pcm = Vec::new();
    for &(quiet, phrase, ms) in parts {
        pcm.extend(silence(quiet));
        pcm.extend(phrase_tone(phrase, ms, 8000));
    }
    pcm.extend(silence(tail));
    wav(&pcm)
}

/// One call by resume.py; its result (the last line of its output) and its stderr.
pub async fn leg(
    url: &str,
    wav: &std::path::Path,
    start: &Value,
    until: &str,
    mode: &str,
    servers: Option<&Value>,
) -> Value {
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/aiortc/resume.py");
    let mut command = Command::new(tools_bin().join("aiortc-python"));
    command.arg(driver).arg(url).arg(wav).arg(start.to_string()).arg(until).arg(mode);
    if let Some(servers) = servers {
        command.arg(servers.to_string());
    }
    let output = tokio::task::spawn_blocking(move || command.output()).await.expect("joins").expect("runs python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("a JSON result ({e}):\n{stdout}\n{stderr}"));
    result["stderr"] = Value::String(stderr.chars().rev().take(3000).collect::<String>().chars().rev().collect());
    result
}

fn said(result: &Value, role: &str, text: &str) -> bool {
    result["transcripts"]
        .as_array()
        .is_some_and(|t| t.iter().any(|l| l["role"] == role && l["text"].as_str().unwrap_or_default().contains(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiortc_vanishes_mid_conversation_and_resumes_it_with_its_memory() {
    let dir = std::env::temp_dir().join(format!("switchboard-aiortc-resume-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script_path = dir.join("script.yaml");
    std::fs::write(&script_path, script()).expect("writes the script");
    // Leg 1: silence while triage greets, the request, silence while triage hands over and
    // idv asks, the details, silence for idv's answer.
    let first_wav = dir.join("first.wav");
    std::fs::write(&first_wav, microphone(&[(2000, BALANCE_REQUEST, 1200), (7000, IDV_DETAILS, 1500)], 15_000))
        .expect("writes a WAV");
    // Leg 2: a moment for the resume, the question, silence for the answer.
    let second_wav = dir.join("second.wav");
    std::fs::write(&second_wav, microphone(&[(1500, MY_BALANCE, 1000)], 15_000)).expect("writes a WAV");

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let signer = GatewaySigner::from_seed(&[11; 32]);
    let options =
        LocalOptions { sim_script: Some(script_path), gateway_key: Some(signer.clone()), ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let runtime = local.server.runtime_addr().expect("the runtime");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    let catalog = Catalog::load_paths(&[&examples]).expect("the banking example loads");
    let specs: Vec<RuntimeSpec> = catalog.agents().map(|a| catalog.resolve_agent(a).expect("resolves")).collect();
    let coturn = Coturn::start(SECRET, crate::machine_ip());
    let turn = Turn {
        urls: vec![format!("turn:{}?transport=udp", coturn.address)],
        credential: Credential::Shared { secret: SECRET.as_bytes().to_vec(), ttl: Duration::from_secs(600) },
    };
    let (url, gateway, edge) = crate::direct_gateway(signer, runtime, &specs, turn).await;

    let start = json!({"type": "session_start", "agent": "triage", "modalities": ["audio", "text"]});
    let first = leg(&url, &first_wav, &start, "you're verified", "vanish", None).await;
    eprintln!("the first call reached, in seconds: {}", first["reached"]);
    assert!(first.get("error").is_none(), "the first call: {first:#}");
    assert_eq!(first["status"], 201, "{first:#}");
    assert!(said(&first, "user", "Ada Lovelace"), "the details were heard: {first:#}");
    assert_eq!(first["start"]["agent"], "idv", "idv verified the caller: {first:#}");
    let token = first["start"]["resume_token"].as_str().expect("a resume token");
    let session = first["start"]["session_id"].as_str().expect("a session id").to_owned();
    assert_eq!((&first["unnumbered"], &first["misordered"]), (&json!(0), &json!(0)), "numbered messages: {first:#}");

    // The client is gone; a new one comes back at once, before the edge's ICE gives up,
    // through the TURN server the first answer named.
    let servers = &first["ice_servers"];
    assert_eq!(servers.as_array().map(Vec::len), Some(1), "the TURN server: {first:#}");
    let resume = json!({
        "type": "session_start",
        "resume_token": token,
        "last_seq": first["last_seq"],
    });
    let second = leg(&url, &second_wav, &resume, "Your balance is", "delete", Some(servers)).await;
    eprintln!("the resumed call reached, in seconds: {}", second["reached"]);
    assert!(second.get("error").is_none(), "the resumed call: {second:#}");
    assert_eq!(second["status"], 201, "{second:#}");
    assert_eq!(second["offered_types"], json!(["relay"]), "relay candidates only: {second:#}");
    assert_eq!(second["nominated"]["local"], "relay", "aiortc sends through coturn: {second:#}");
    // Nothing went wrong: the example's banking Agent is hybrid, and takes the call's audio.
    let errors = second["errors"].as_array().expect("errors");
    assert!(errors.is_empty(), "{second:#}");
    let starts = second["starts"].as_array().expect("starts");
    assert!(starts.iter().all(|s| s["session_id"] == session.as_str()), "the same session throughout: {starts:?}");
    assert_eq!((&second["unnumbered"], &second["misordered"]), (&json!(0), &json!(0)), "{second:#}");
    assert_eq!(starts.first().map(|s| &s["agent"]), Some(&json!("idv")), "resumed where it was: {starts:?}");
    assert!(said(&second, "user", "balance please"), "the question on the new call was heard: {second:#}");
    // Nothing the first call received comes again (every data-channel message carries its
    // number, and the client resumed with the last one's).
    let (last, next) = (first["last_seq"].as_u64().expect("a number"), second["first_seq"].as_u64().expect("a number"));
    assert!(next > last, "the resumed call's first message is {next}, after the last received, {last}");
    for (role, line) in [("user", "Ada Lovelace"), ("assistant", "please tell me")] {
        assert!(!said(&second, role, line), "{line:?} once, on the first call: {second:#}");
    }
    // Only a caller the session's memory holds as verified is passed to banking (idv's
    // rules ask an unverified one for the details), spoken and heard on the new call; and
    // banking tells the balance of the account the memory holds.
    assert!(said(&second, "assistant", "pass you to our banking team"), "{second:#}");
    assert!(second["audio"]["loud"].as_u64().unwrap_or_default() >= 25, "idv heard: {second:#}");
    assert!(said(&second, "assistant", "Your balance is"), "{second:#}");
    assert!(!said(&second, "assistant", "verify your identity"), "not asked again: {second:#}");
    assert_eq!(second["deleted"], 200);

    let resumed = ["default/triage", "default/idv", "default/banking"]
        .map(|a| gateway.metrics.resumed.with_label_values(&[a]).get());
    assert_eq!(resumed.iter().sum::<f64>(), 1.0, "one resume: {resumed:?}");
    // Both calls over: the old one once its session was taken from it, the new by DELETE.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while edge.live() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(edge.live(), 0, "no call left: {}", edge.metrics.render());
    // The old call ended when its session was taken from it, the new one by DELETE.
    assert_eq!(edge.metrics.calls.with_label_values(&["ended"]).get(), 2.0, "{}", edge.metrics.render());
    // The edge sent the resumed call's media to coturn's relay address, the candidate the
    // offer named as `relay`; the first call went to the client's host.
    let ice = |candidate: &str| edge.metrics.ice.with_label_values(&["connected", candidate, "udp"]).get();
    assert_eq!((ice("host"), ice("relay")), (1.0, 1.0), "{}", edge.metrics.render());
    let log = coturn.log();
    assert!(log.contains("ALLOCATE processed, success"), "coturn allocated a relay:\n{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
