//! Dial and bridge: where the caller's side takes no REFER, the edge dials the person itself
//! and bridges the two calls. The edge told to always dial (`--transfer-method dial`), and a
//! carrier's proxy (kamailio) that answers the edge's REFER `501 Not Implemented`: either
//! way the person's phone (a second baresip) rings and answers, the agent's session ends
//! `transferred`, and the caller and the person hear each other through the edge (each
//! phone's recording holds the other's tone, measured by its frequency; the person's phone
//! takes only A-law while the caller's speaks μ-law, so the edge transcodes); the caller
//! hanging up hangs the person up. A busy person comes back to the agent as `busy`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;

use crate::phone::{Options, Phone};
use crate::proxy::Proxy;
use crate::stack::{Stack, dead_port, stack_custom, the_session, wait_for};
use crate::transfer::{people, transfer_script};

/// The caller's second tone, after the transfer: no phrase of the simulator's (its phrase
/// tones are 400 + 100 n Hz), so an agent that still heard it would hear no words.
const CALLER_HZ: f64 = 950.0;
/// The person's tone (long enough to outlast the agent's session ending).
const PERSON_HZ: f64 = 500.0;

/// A phone answering as `advisor` at once, playing half a second of silence, 30 s of its
/// tone and 30 s of silence (it outlasts the caller's WAV: the caller hangs up first), taking
/// only A-law.
pub(crate) fn person(dir: &Path) -> (Phone, u16) {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let options = Options { tone: Some((30.0, PERSON_HZ as u32)), codec: Some("PCMA"), ..Options::default() };
    Phone::start_with(dir, &tools, "advisor", "advisor", 30, 150, "udp", ";answermode=auto", "", None, options)
}

/// The caller's phone (in `dir`, baresip from `tools`): phrase 1 (asking for the advisor),
/// 15 s of silence (the transfer), then 20 s of [`CALLER_HZ`]; it hangs up at the end of
/// its WAV. It dials `uri` with `config` lines in its config.
pub(crate) fn caller(dir: &Path, tools: &Path, uri: &str, config: &str) -> Phone {
    let dial = format!("/dial {uri}");
    let options = Options { then: Some((CALLER_HZ as u32, 20)), ..Options::default() };
    Phone::start_with(dir, tools, "caller", "caller", 15, 90, "udp", "", config, Some(&dial), options).0
}

/// 250 ms windows in which a tone was heard clearly.
fn windows_with(tone: &[f64]) -> usize {
    tone.iter().filter(|amplitude| **amplitude > 0.1).count()
}

/// Where a bridged transfer is seen: the log of the process the edge runs in (`switchboard
/// sip`, or local mode's with its own edge), the one session's record (`sessions show`),
/// and sox.
pub(crate) struct Seen<'a> {
    pub(crate) edge_log: &'a dyn Fn() -> String,
    pub(crate) session: &'a dyn Fn() -> String,
    pub(crate) sox: PathBuf,
}

/// The transfer was made by dialling: the person answered, the agent's session ended
/// `transferred`, the legs were bridged and the caller's phone was never referred; then both
/// phones heard each other, and the caller's hang-up ended the person's call.
pub(crate) fn bridged_both_ways(seen: &Seen, caller: &Phone, person: &Phone, context: &dyn Fn() -> String) {
    let log = seen.edge_log;
    wait_for("the transfer ends", Duration::from_secs(60), || log().contains("transfer ended"), context);
    let edge = log();
    assert!(edge.contains("dialling the person"), "{}", context());
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    wait_for(
        "the caller and the person are bridged",
        Duration::from_secs(20),
        || log().contains("the caller and the person are bridged"),
        context,
    );
    assert!(person.log().contains("Call established"), "{}", context());
    assert!(!caller.log().contains("menu: transferring call"), "the caller's phone was not referred: {}", context());
    // The caller's WAV ends (its tone heard by the person meanwhile): it hangs up, and the
    // edge hangs the person up.
    wait_for(
        "the bridge ends with the caller's hang-up",
        Duration::from_secs(60),
        || log().contains("bridge ended"),
        context,
    );
    assert!(log().contains("then the caller hung up"), "{}", context());
    caller.wait_over(Duration::from_secs(10));
    person.wait_over(Duration::from_secs(10));
    let person_heard = person.heard_tone(&seen.sox, CALLER_HZ);
    assert!(windows_with(&person_heard) >= 8, "the person heard the caller's tone: {person_heard:?}\n{}", context());
    let caller_heard = caller.heard_tone(&seen.sox, PERSON_HZ);
    assert!(windows_with(&caller_heard) >= 8, "the caller heard the person's tone: {caller_heard:?}\n{}", context());
    let session = seen.session;
    wait_for(
        "the record says the caller was transferred, and to whom",
        Duration::from_secs(20),
        || session().contains("transferred to advisor"),
        session,
    );
}

/// What `stack` shows: its `switchboard sip`'s log and the one session's record.
fn seen_in(stack: &Stack) -> (impl Fn() -> String + '_, impl Fn() -> String + '_) {
    (move || stack.edge.log_text(), move || the_session(stack))
}

#[test]
fn told_to_dial_the_edge_calls_the_person_and_bridges_the_caller_to_them() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-dial-person-{}", std::process::id()));
    let script = transfer_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    let (person, port) = person(&dir);
    let stack = stack_custom(
        "bridge-dial",
        &["--transfer-method", "dial"],
        &people(port, dead_port()),
        &["--sim-script", &script_arg],
    );
    let caller = caller(&stack.dir, &stack.tools, &format!("sip:triage@{};transport=udp", stack.sip), "");
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    let (edge_log, session) = seen_in(&stack);
    let seen = Seen { edge_log: &edge_log, session: &session, sox: stack.tools.join("sox") };
    bridged_both_ways(&seen, &caller, &person, &context);
    assert!(!stack.edge.log_text().contains("(REFER)"), "no REFER was sent: {}", context());
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_refer_the_carrier_refuses_has_the_edge_dial_the_person_and_bridge() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-refused-person-{}", std::process::id()));
    let script = transfer_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    let (person, port) = person(&dir);
    let stack = stack_custom("bridge-refused", &[], &people(port, dead_port()), &["--sim-script", &script_arg]);
    let proxy = Proxy::start_with(&stack, true);
    // Its SDP names the loopback interface its RTP comes from (the SIP peer is the proxy).
    let uri = format!("sip:triage@{};transport=udp", proxy.address);
    let caller = caller(&stack.dir, &stack.tools, &uri, "net_interface 127.0.0.1\n");
    let context = || {
        format!(
            "{}\n--- caller ---\n{}\n--- person ---\n{}\n--- kamailio ---\n{}",
            stack.edge.log_text(),
            caller.log(),
            person.log(),
            proxy.log_text()
        )
    };
    let (edge_log, session) = seen_in(&stack);
    let seen = Seen { edge_log: &edge_log, session: &session, sox: stack.tools.join("sox") };
    bridged_both_ways(&seen, &caller, &person, &context);
    assert!(proxy.relayed().iter().any(|r| r == "REFER refused"), "the carrier refused the REFER: {}", context());
    assert!(stack.edge.log_text().contains("501"), "the edge saw the REFER refused before it dialled: {}", context());
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_busy_person_comes_back_to_the_agent_as_busy() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-busy-person-{}", std::process::id()));
    let script = transfer_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    let tools = tools_bin().expect("tests/tools/install.sh");
    // The person's phone takes one call at a time and is already ringing with another.
    let (person, port) = Phone::start(
        &dir,
        &tools,
        "advisor",
        "advisor",
        1,
        90,
        "udp",
        ";answermode=manual",
        "call_max_calls 1\n",
        None,
    );
    let occupier = format!("/dial sip:advisor@127.0.0.1:{port};transport=udp");
    let (other, _) = Phone::start(&dir, &tools, "other", "other", 60, 90, "udp", "", "", Some(&occupier));
    wait_for(
        "the person's phone rings",
        Duration::from_secs(15),
        || person.log().contains("Incoming call"),
        || format!("{}\n--- other ---\n{}", person.log(), other.log()),
    );
    let stack = stack_custom(
        "bridge-busy",
        &["--transfer-method", "dial"],
        &people(port, dead_port()),
        &["--sim-script", &script_arg],
    );
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(60),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("dialling the person"), "{}", context());
    assert!(edge.contains("outcome=\"busy\""), "the person's phone answered 486: {}", context());
    assert!(!edge.contains("bridged"), "{}", context());
    // The caller is still with the agent, which heard why and said sorry.
    caller.wait_over(Duration::from_secs(45));
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_busy"), "the model got the typed outcome: {shown}");
    assert!(shown.contains("Sorry, nobody could take your call"), "the agent told the caller: {shown}");
    drop(other);
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}
