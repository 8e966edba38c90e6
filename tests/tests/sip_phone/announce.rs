//! The edge's recorded announcements (`switchboard sip --announcements`, local mode's
//! `--sip-announcements`): WAV files of a distinctive tone each, found in what the phone
//! heard. A call waiting for the model quota hears the hold recording as early media (`183
//! Session Progress` with SDP, then RTP) and is answered by the agent when its turn comes;
//! a caller who dialled the number an Agent claims hears that Agent's own hold recording
//! (the gateway names the Agent in the queue); a call to an Agent in outage mode with only
//! a message is answered, hears the outage recording and is hung up by the edge; a call
//! under way when local mode's switch (`tools/outage.yaml`) puts its Agent into outage mode
//! hears the outage recording and is hung up; a recording that is not a usable WAV stops
//! the edge (and local mode) at start with the file's name and what is wrong. Outage mode's
//! person after the outage recording: [`crate::outage`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::{Process, switchboard_binary};

use crate::phone::Phone;
use crate::stack::{TRIAGE_NUMBER, dead_port, stack_custom, wait_for, wait_for_edge_sample};

/// The hold recording's tone (the simulator's voices are 125-400 Hz, the phones' 500 Hz).
const HOLD_HZ: f64 = 1400.0;
/// The tone of triage's own hold recording.
const TRIAGE_HOLD_HZ: f64 = 1800.0;
/// The outage recording's tone.
pub(crate) const OUTAGE_HZ: f64 = 2200.0;

/// A folder of recordings for one test: each `(file, sox arguments after the output)`
/// made by `sox -n -r <rate> -c <channels> -b 16 <file> <effects>`.
pub(crate) struct Recordings(pub(crate) PathBuf);

impl Drop for Recordings {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub(crate) fn recordings(name: &str, files: &[(&str, &str, &str, &[&str])]) -> Recordings {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let dir = std::env::temp_dir().join(format!("switchboard-announce-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a folder");
    for (file, rate, channels, effects) in files {
        let status = Command::new(tools.join("sox"))
            .args(["-n", "-r", rate, "-c", channels, "-b", "16"])
            .arg(dir.join(file))
            .args(*effects)
            .status()
            .expect("sox runs");
        assert!(status.success(), "sox made {file}");
    }
    Recordings(dir)
}

/// How many 250 ms windows of what `phone` heard carry `hz` clearly.
pub(crate) fn windows_with(phone: &Phone, hz: f64) -> usize {
    let tools = tools_bin().expect("tests/tools/install.sh");
    phone.heard_tone(&tools.join("sox"), hz).iter().filter(|a| **a > 0.1).count()
}

#[test]
fn a_call_waiting_for_the_model_quota_hears_the_hold_announcement_then_the_agent_answers() {
    // 16 kHz, to be halved by the edge: 1 s of the tone, repeated with a second's gap.
    let hold = recordings("hold", &[("hold.wav", "16000", "1", &["synth", "1", "sine", "1400", "vol", "0.5"])]);
    let dir = hold.0.to_string_lossy().into_owned();
    let quota = ["--capacity-quota", "default/us-east-1=1"];
    let stack = stack_custom("announce-hold", &["--announcements", &dir], "", &quota);
    // The first phone holds the one stream for 0.5 + 1.5 + 6 s.
    let first = Phone::dial(&stack, "first", "triage", 6, 40);
    let context = |second: Option<&Phone>| {
        let second = second.map(Phone::log).unwrap_or_default();
        format!("{}\n--- first ---\n{}\n--- second ---\n{second}", stack.edge.log_text(), first.log())
    };
    wait_for(
        "the first call is answered",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || context(None),
    );
    // baresip plays its WAV from the early media on, and hangs up at its end: a long one.
    let second = Phone::dial_traced(&stack, "second", "triage", 16, 60);
    let context = || context(Some(&second));
    wait_for(
        "the second call gets early media",
        Duration::from_secs(20),
        || second.log().contains("SIP/2.0 183 All our lines are busy at the moment"),
        context,
    );
    assert!(stack.edge.log_text().contains("playing the hold announcement"), "{}", context());
    wait_for(
        "the second call is answered when the first hangs up",
        Duration::from_secs(30),
        || second.log().contains("Call established"),
        context,
    );
    assert!(!second.log().contains("SIP/2.0 182"), "early media instead of 182 Queued: {}", context());
    second.wait_over(Duration::from_secs(30));
    let heard = windows_with(&second, HOLD_HZ);
    assert!(heard >= 4, "the caller heard the hold recording ({heard} windows of 250 ms): {}", context());
    assert_eq!(stack.edge.log_text().matches("call answered").count(), 2, "{}", context());
    let metrics = wait_for_edge_sample(&stack, r#"switchboard_sip_announcements_total{purpose="hold"}"#, 1.0);
    let answered = r#"switchboard_sip_calls_total{direction="inbound",outcome="answered"} 2"#;
    assert!(metrics.contains(answered), "{metrics}");
}

#[test]
fn a_caller_who_dials_the_agents_number_hears_the_agents_own_hold_recording() {
    let hold = recordings(
        "own-hold",
        &[
            ("hold.wav", "8000", "1", &["synth", "1", "sine", "1400", "vol", "0.5"]),
            ("default.triage.hold.wav", "8000", "1", &["synth", "1", "sine", "1800", "vol", "0.5"]),
        ],
    );
    let dir = hold.0.to_string_lossy().into_owned();
    let quota = ["--capacity-quota", "default/us-east-1=1"];
    let stack = stack_custom("announce-own-hold", &["--announcements", &dir], "", &quota);
    // The first phone holds the one stream for 0.5 + 1.5 + 6 s.
    let first = Phone::dial(&stack, "first", "triage", 6, 40);
    let context = |second: Option<&Phone>| {
        let second = second.map(Phone::log).unwrap_or_default();
        format!("{}\n--- first ---\n{}\n--- second ---\n{second}", stack.edge.log_text(), first.log())
    };
    wait_for(
        "the first call is answered",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || context(None),
    );
    // The second dials the number triage claims: the dialled name says nothing of triage.
    let second = Phone::dial(&stack, "second", TRIAGE_NUMBER, 16, 60);
    let context = || context(Some(&second));
    wait_for(
        "the second call is answered when the first hangs up",
        Duration::from_secs(40),
        || second.log().contains("Call established"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"waiting_for="default/triage""#), "the gateway named the Agent: {}", context());
    assert!(edge.contains(r#"file="default.triage.hold.wav""#), "{}", context());
    second.wait_over(Duration::from_secs(30));
    let own = windows_with(&second, TRIAGE_HOLD_HZ);
    assert!(own >= 4, "the caller heard triage's own hold recording ({own} windows of 250 ms): {}", context());
    let default = windows_with(&second, HOLD_HZ);
    assert_eq!(default, 0, "and not the default one: {}", context());
    wait_for_edge_sample(&stack, r#"switchboard_sip_announcements_total{purpose="hold"}"#, 1.0);
}

/// triage switched into outage mode with only a message (its person never reachable).
fn outage_on() -> String {
    format!(
        "    people:\n\
         \x20     - {{ name: advisor, address: \"sip:advisor@127.0.0.1:{}\", description: Accounts }}\n\
         \x20 outage:\n\
         \x20   active: true\n\
         \x20   fallback:\n\
         \x20     message: \"Our assistant is unavailable; please call back later.\"\n",
        dead_port()
    )
}

#[test]
fn a_call_outage_mode_turns_away_hears_the_outage_announcement_and_is_hung_up() {
    let outage = recordings("outage", &[("outage.wav", "8000", "1", &["synth", "1.5", "sine", "2200", "vol", "0.5"])]);
    let dir = outage.0.to_string_lossy().into_owned();
    let stack = stack_custom("announce-outage", &["--announcements", &dir], &outage_on(), &[]);
    // The phone would talk for 22 s: the edge hangs up long before.
    let caller = Phone::dial(&stack, "caller", "triage", 20, 40);
    let started = std::time::Instant::now();
    caller.wait_over(Duration::from_secs(15));
    let context = || format!("{}\n--- caller ---\n{}", stack.edge.log_text(), caller.log());
    assert!(started.elapsed() < Duration::from_secs(12), "the edge hung up, not the phone: {}", context());
    let log = caller.log();
    assert!(log.contains("Call established") && !log.contains("503"), "answered, not refused: {}", context());
    let heard = windows_with(&caller, OUTAGE_HZ);
    assert!(heard >= 4, "the caller heard the outage recording ({heard} windows of 250 ms): {}", context());
    assert!(stack.edge.log_text().contains("answering to play the outage announcement"), "{}", context());
    let metrics = wait_for_edge_sample(&stack, r#"switchboard_sip_outage_fallbacks_total{outcome="announced"}"#, 1.0);
    for series in [
        r#"switchboard_sip_announcements_total{purpose="outage"} 1"#,
        r#"switchboard_sip_calls_total{direction="inbound",outcome="announced"} 1"#,
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
    assert!(!metrics.contains(r#"switchboard_sip_calls_refused_total{reason="outage"}"#), "{metrics}");
}

/// Starts `args` and expects it to stop before it is ready; its output.
fn refused_at_start(binary: &Path, name: &str, args: &[&str], ready: &str) -> String {
    match Process::start(binary, name, args, &[], ready) {
        Ok(process) => panic!("{name} started with a bad recording:\n{}", process.log_text()),
        Err(error) => format!("{error:#}"),
    }
}

#[test]
fn a_recording_that_is_not_a_usable_wav_stops_the_edge_at_start_with_its_name() {
    let bad = recordings("bad", &[("default.triage.hold.wav", "8000", "2", &["synth", "1", "sine", "1400"])]);
    let binary = switchboard_binary().expect("the switchboard binary");
    let dir = bad.0.to_string_lossy().into_owned();
    let file = bad.0.join("default.triage.hold.wav");
    let want = format!("the announcement {} cannot be played: it has 2 channels, not 1", file.display());
    let gateway = format!("ws://127.0.0.1:{}/v1/session", dead_port());
    let edge = ["sip", "--listen", "127.0.0.1:0", "--gateway", &gateway, "--metrics-listen", "127.0.0.1:0"];
    let output =
        refused_at_start(&binary, "sip-bad-wav", &[&edge[..], &["--announcements", &dir]].concat(), "SIP edge ready");
    assert!(output.contains(&want), "{output}");
    let agents = repo_root().join("examples/banking").to_string_lossy().into_owned();
    let local = ["local", &agents, "--port", "0", "--sip-listen", "127.0.0.1:0", "--sip-announcements", &dir];
    let output = refused_at_start(&binary, "local-bad-wav", &local, "Chat with: switchboard chat");
    assert!(output.contains(&want), "{output}");
    // A name that is no announcement's is refused by name too.
    std::fs::remove_file(&file).expect("remove");
    std::fs::write(bad.0.join("greeting.wav"), b"RIFF").expect("write");
    let args = [&edge[..], &["--announcements", &dir]].concat();
    let output = refused_at_start(&binary, "sip-bad-name", &args, "SIP edge ready");
    assert!(output.contains("greeting.wav is not an announcement's name"), "{output}");
}

#[test]
fn a_call_under_way_when_outage_mode_comes_on_hears_the_outage_announcement_and_is_hung_up() {
    let outage =
        recordings("under-way", &[("outage.wav", "8000", "1", &["synth", "1.5", "sine", "2200", "vol", "0.5"])]);
    let dir = outage.0.to_string_lossy().into_owned();
    let stack = stack_custom("announce-under-way", &["--announcements", &dir], "", &[]);
    // The phone says phrase 1 and would stay 25 s more: the edge hangs up first.
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context = || format!("{}\n--- caller ---\n{}", stack.edge.log_text(), caller.log());
    wait_for(
        "the call is answered",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        context,
    );
    let answered = std::time::Instant::now();
    // triage's reply to phrase 1 under way, then local mode's switch turns triage's outage on.
    std::thread::sleep(Duration::from_secs(3));
    let tools = stack.dir.join("agents/tools");
    std::fs::create_dir_all(&tools).expect("a folder");
    std::fs::write(tools.join("outage.yaml"), "agents: [triage]\nmessage: \"Closed for now.\"\n").expect("write");
    caller.wait_over(Duration::from_secs(25));
    assert!(answered.elapsed() < Duration::from_secs(20), "the edge hung up, not the phone: {}", context());
    let edge = stack.edge.log_text();
    for said in ["announcing it at the next turn boundary", "playing the outage announcement", "outage fallback ended"]
    {
        assert!(edge.contains(said), "{said}: {}", context());
    }
    let heard = windows_with(&caller, OUTAGE_HZ);
    assert!(heard >= 4, "the caller heard the outage recording ({heard} windows of 250 ms): {}", context());
    let ended = r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="outage"}"#;
    let metrics = wait_for_edge_sample(&stack, ended, 1.0);
    for series in [
        r#"switchboard_sip_announcements_total{purpose="outage"} 1"#,
        r#"switchboard_sip_outage_fallbacks_total{outcome="announced"} 1"#,
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
}
