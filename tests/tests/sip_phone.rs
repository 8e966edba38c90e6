//! A real SIP phone calls the agents: Debian's `baresip` (headless: it dials, plays a WAV and
//! writes what it hears to a WAV) calls `switchboard sip`, the SIP edge, in front of a real
//! `switchboard local` (its gateway, runtimes and the Bedrock simulator, offline). The phone
//! says a phrase tone (500 Hz: the simulator hears "phrase 1"), the voice agent's reply is
//! heard in the phone's recording (measured with sox), the session is in the conversation
//! record with its agent and ends when the phone hangs up; the agent's side ending (local
//! mode stopped) hangs the phone up. Calls to an unknown, an unexposed and a text-only agent
//! are refused with 404, 403 and 488 and the gateway's reason; a call to the number triage
//! claims (`spec.telephony.numbers`) reaches triage, one to a number nobody claims gets
//! 404; garbage sent to the edge's
//! SIP and RTP ports during a call does not disturb it; a call signalled over TCP works as
//! one over UDP; keys pressed on the phone (RFC 4733) reach the agent as the caller's input,
//! told once at the `#`, and the edge logs how many, never which. A call through a trunk
//! (digest credentials) carries the caller's number and the number dialled into the session
//! (a tool bound to them receives them), and a keypad input typed on the phone reaches the
//! tool and nothing else (not the model, not the record, not a log). The tools come from
//! tests/tools/install.sh.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::{Process, switchboard_binary};

/// The number triage claims in the test's copy of the Example Bank.
const TRIAGE_NUMBER: &str = "+442079460000";

/// RTP ports the edge may use in one test (five pairs).
const RTP_PORTS: u16 = 10;

/// `switchboard local` (with the Example Bank, `disputes` exposed as a text-only agent a
/// caller can name) and `switchboard sip` in front of it, in a folder of their own.
struct Stack {
    dir: PathBuf,
    tools: PathBuf,
    binary: PathBuf,
    record: String,
    sip: SocketAddr,
    rtp: (u16, u16),
    edge: Process,
    local: Process,
}

impl Drop for Stack {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("the examples") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("a copy");
        }
    }
}

/// An even UDP port with `count - 1` after it, free now.
fn free_udp_range(count: u16) -> (u16, u16) {
    loop {
        let probe = UdpSocket::bind("127.0.0.1:0").expect("a port");
        let first = probe.local_addr().expect("addr").port() & !1;
        drop(probe);
        let Some(last) = first.checked_add(count - 1) else { continue };
        if (first..=last).all(|p| UdpSocket::bind(("127.0.0.1", p)).is_ok()) {
            return (first, last);
        }
    }
}

fn stack(name: &str) -> Stack {
    stack_with(name, &[])
}

/// [`stack`] with more flags for `switchboard sip` (trunks, say).
fn stack_with(name: &str, edge_args: &[&str]) -> Stack {
    stack_custom(name, edge_args, "", &[])
}

/// [`stack_with`] with more of triage's `spec.telephony` (`triage_telephony`: YAML lines
/// indented by four spaces) and more flags for `switchboard local` (a simulator script).
fn stack_custom(name: &str, edge_args: &[&str], triage_telephony: &str, local_args: &[&str]) -> Stack {
    stack_edited(name, edge_args, triage_telephony, local_args, |triage| triage)
}

/// [`stack_custom`] with triage.yaml (its test copy, number claimed) edited by `edit`.
fn stack_edited(
    name: &str,
    edge_args: &[&str],
    triage_telephony: &str,
    local_args: &[&str],
    edit: impl Fn(String) -> String,
) -> Stack {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let dir = std::env::temp_dir().join(format!("switchboard-sip-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let agents = dir.join("agents");
    copy_dir(&repo_root().join("examples/banking"), &agents);
    let disputes = agents.join("disputes.yaml");
    let text = std::fs::read_to_string(&disputes).expect("disputes.yaml");
    assert!(text.contains("expose: false"), "disputes.yaml is not exposed: the test exposes it");
    std::fs::write(&disputes, text.replace("expose: false", "expose: true")).expect("write");
    // triage answers a phone number too (in this copy: the Example Bank runs in several
    // namespaces in other tests, where one number would be two claims).
    let triage = agents.join("triage.yaml");
    let text = std::fs::read_to_string(&triage).expect("triage.yaml");
    let claimed = text.replace(
        "  gateway:\n    default: true",
        &format!("  gateway:\n    default: true\n  telephony:\n    numbers: [\"{TRIAGE_NUMBER}\"]\n{triage_telephony}"),
    );
    assert_ne!(claimed, text, "triage.yaml's gateway block moved: the test adds its number there");
    std::fs::write(&triage, edit(claimed)).expect("write");
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let agents_arg = agents.to_string_lossy().into_owned();
    let local = Process::start(
        &binary,
        "local",
        &[&["local", &agents_arg, "--port", "0", "--record-database-url", &record][..], local_args].concat(),
        &[],
        "Chat with: switchboard chat ws://",
    )
    .expect("switchboard local starts");
    let log = local.log_text();
    let gateway = log
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL");
    let rtp = free_udp_range(RTP_PORTS);
    let edge = Process::start(
        &binary,
        "sip",
        &[
            &["sip", "--listen", "127.0.0.1:0", "--rtp-ports", &format!("{}-{}", rtp.0, rtp.1), "--gateway", &gateway]
                [..],
            edge_args,
        ]
        .concat(),
        &[("SWITCHBOARD_LOG", "info,switchboard_sip_edge=debug")],
        "SIP edge ready",
    )
    .expect("switchboard sip starts");
    let sip = edge
        .log_text()
        .lines()
        .find_map(|l| l.split_once("listening on udp://").and_then(|(_, a)| a.split_whitespace().next()?.parse().ok()))
        .expect("the edge logs its SIP address");
    Stack { dir, tools, binary, record, sip, rtp, edge, local }
}

/// A baresip instance dialling one URI.
struct Phone {
    dir: PathBuf,
    child: Child,
}

impl Drop for Phone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phone {
    /// Dials `sip:<user>@<edge>` playing half a second of silence, 1.5 s of a 500 Hz tone
    /// (phrase 1) and `silence` seconds of silence; hangs up at the end of the file and
    /// quits after `quit` seconds.
    fn dial(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32) -> Self {
        Self::dial_over(stack, name, user, silence, quit, "udp")
    }

    /// [`Phone::dial`] over `transport` (`udp` or `tcp`).
    fn dial_over(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32, transport: &str) -> Self {
        Self::dial_as(stack, name, user, silence, quit, transport, "")
    }

    /// [`Phone::dial_over`] with more account parameters (`;auth_user=..;auth_pass=..`).
    fn dial_as(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32, transport: &str, account: &str) -> Self {
        Self::dial_with(stack, name, user, silence, quit, transport, account, "")
    }

    /// [`Phone::dial`] with baresip's console listening on a UDP port ([`Phone::press`]
    /// types keys into the call through it).
    fn dial_with_keypad(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32) -> (Self, u16) {
        let console = loop {
            let port = free_udp_range(1).0;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                break port;
            }
        };
        let config = format!("module cons.so\ncons_listen 127.0.0.1:{console}\n");
        (Self::dial_with(stack, name, user, silence, quit, "udp", "", &config), console)
    }

    /// Presses `keys` on the phone in the call: baresip's `/sndcode` sends each as an RFC
    /// 4733 telephone event.
    fn press(console: u16, keys: &str) {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
        socket.send_to(format!("/sndcode {keys}\n").as_bytes(), ("127.0.0.1", console)).expect("send");
    }

    /// [`Phone::dial_as`] with more lines for baresip's config.
    #[allow(clippy::too_many_arguments)]
    fn dial_with(
        stack: &Stack,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
        more_config: &str,
    ) -> Self {
        let dial = format!("/dial sip:{user}@{};transport={transport}", stack.sip);
        Self::start(
            &stack.dir,
            &stack.tools,
            name,
            "caller",
            silence,
            quit,
            transport,
            account,
            more_config,
            Some(&dial),
        )
        .0
    }

    /// A phone that answers calls to `sip:<user>@127.0.0.1:<its port>` at once (it plays
    /// the same WAV as a caller and records what it hears); returns it with its port.
    fn answering(dir: &Path, tools: &Path, name: &str, user: &str, quit: u32) -> (Self, u16) {
        Self::start(dir, tools, name, user, 20, quit, "udp", ";answermode=auto", "", None)
    }

    /// A baresip instance with account `<user>` and `more_config` lines in its config,
    /// running `command` at start.
    #[allow(clippy::too_many_arguments)]
    fn start(
        root: &Path,
        tools: &Path,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
        more_config: &str,
        command: Option<&str>,
    ) -> (Self, u16) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("snd")).expect("a folder");
        let sox = tools.join("sox");
        let part = |file: &str, args: &[&str]| {
            let status = Command::new(&sox)
                .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
                .arg(dir.join(file))
                .args(args)
                .status()
                .expect("sox runs");
            assert!(status.success(), "sox made {file}");
        };
        part("lead.wav", &["trim", "0", "0.5"]);
        part("tone.wav", &["synth", "1.5", "sine", "500", "vol", "0.5"]);
        part("tail.wav", &["trim", "0", &silence.to_string()]);
        let status = Command::new(&sox)
            .args([dir.join("lead.wav"), dir.join("tone.wav"), dir.join("tail.wav"), dir.join("say.wav")])
            .status()
            .expect("sox runs");
        assert!(status.success(), "sox joined the WAV");
        // baresip listens on a port and the next (TLS): both free.
        let port = loop {
            let port = free_udp_range(2).0;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
                && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
            {
                break port;
            }
        };
        let d = dir.display();
        let config = format!(
            "sip_listen 127.0.0.1:{port}\nmodule_path /usr/lib/baresip/modules\nmodule stdio.so\nmodule g711.so\n\
             module aufile.so\nmodule sndfile.so\nmodule account.so\nmodule menu.so\n\
             audio_source aufile,{d}/say.wav\naudio_player aufile,{d}/play.wav\naudio_alert aufile,{d}/say.wav\n\
             snd_path {d}/snd\n{more_config}"
        );
        std::fs::write(dir.join("config"), config).expect("config");
        let account =
            format!("<sip:{user}@127.0.0.1:{port};transport={transport}>;regint=0;audio_codecs=PCMU{account}\n");
        std::fs::write(dir.join("accounts"), account).expect("accounts");
        let log = std::fs::File::create(dir.join("baresip.log")).expect("a log");
        let mut baresip = Command::new(tools.join("baresip"));
        baresip.arg("-f").arg(&dir);
        if let Some(command) = command {
            baresip.args(["-e", command]);
        }
        let child = baresip
            .args(["-t", &quit.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("baresip starts");
        (Self { dir, child }, port)
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("baresip.log")).unwrap_or_default()).into_owned()
    }

    /// Waits for the call to be over (answered and hung up, or refused) within `limit`; its
    /// recordings are closed then.
    fn wait_over(&self, limit: Duration) {
        let over = || {
            let log = self.log();
            log.contains("terminated") || log.contains("session closed")
        };
        wait_for("the call is over", limit, over, || self.log());
        std::thread::sleep(Duration::from_millis(300));
    }

    /// What the phone heard (its `-dec.wav`): its length in seconds (sox stat) and the RMS
    /// of each 250 ms of it (0..1 of full scale).
    fn heard(&self, sox: &Path) -> (f64, Vec<f64>) {
        let dec = std::fs::read_dir(self.dir.join("snd"))
            .expect("the recordings")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with("-dec.wav"))
            .unwrap_or_else(|| panic!("baresip wrote no -dec.wav:\n{}", self.log()));
        let stat = Command::new(sox).arg(&dec).args(["-n", "stat"]).output().expect("sox stat");
        let text = String::from_utf8_lossy(&stat.stderr);
        let length = text
            .lines()
            .find_map(|l| l.strip_prefix("Length (seconds):"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("sox stat: {text}"));
        let raw = Command::new(sox)
            .arg(&dec)
            .args(["-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1", "-r", "8000", "-"])
            .output()
            .expect("sox converts");
        let samples: Vec<f64> =
            raw.stdout.chunks_exact(2).map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0).collect();
        let windows = samples.chunks(2000).map(|w| (w.iter().map(|s| s * s).sum::<f64>() / w.len() as f64).sqrt());
        (length, windows.collect())
    }
}

fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}:\n{}", context());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sessions(stack: &Stack, args: &[&str]) -> String {
    let out = Command::new(&stack.binary)
        .args(["sessions"])
        .args(args)
        .args(["--record-database-url", &stack.record])
        .output()
        .expect("switchboard sessions");
    assert!(out.status.success(), "switchboard sessions {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends what a broken or hostile peer might to the edge's SIP port and every port of its
/// RTP range: random bytes, a request with no headers, an oversized datagram, RTP from an
/// address not in any dialogue (loud, were it played), and a BYE for no dialogue. Returns
/// the answers that came back to the sending socket.
fn garbage(stack: &Stack) -> Vec<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let port = socket.local_addr().expect("addr").port();
    // Bytes from a fixed xorshift sequence: the same garbage every run.
    let mut state = 0x2545_f491_u32;
    let mut byte = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state.to_le_bytes()[0]
    };
    let mut junk: Vec<Vec<u8>> = (0..8).map(|i| (0..(37 * i + 5)).map(|_| byte()).collect()).collect();
    junk.push(b"INVITE sip:triage@127.0.0.1 SIP/2.0\r\n\r\n".to_vec());
    junk.push(vec![b'A'; 20_000]);
    // RTP version 2, payload type 0 (PCMU), 160 bytes of the loudest μ-law code.
    let mut rtp = vec![0x80, 0x00, 0x00, 0x01, 0, 0, 0, 160, 0xde, 0xad, 0xbe, 0xef];
    rtp.extend([0x00; 160]);
    for _ in 0..5 {
        junk.push(rtp.clone());
    }
    for datagram in &junk {
        let _ = socket.send_to(datagram, stack.sip);
        for p in stack.rtp.0..=stack.rtp.1 {
            let _ = socket.send_to(datagram, ("127.0.0.1", p));
        }
    }
    let bye = format!(
        "BYE sip:triage@{sip} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{port};branch=z9hG4bKjunk1\r\n\
         From: <sip:junk@127.0.0.1>;tag=j1\r\nTo: <sip:triage@127.0.0.1>;tag=nobody\r\nCall-ID: junk-call\r\n\
         CSeq: 2 BYE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
        sip = stack.sip
    );
    socket.send_to(bye.as_bytes(), stack.sip).expect("send");
    socket.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    let mut answers = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok((n, _)) = socket.recv_from(&mut buf) {
        answers.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        socket.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    }
    answers
}

#[test]
fn a_phone_call_reaches_a_voice_agent_hears_its_reply_survives_garbage_and_is_recorded() {
    let stack = stack("call");
    let phone = Phone::dial(&stack, "caller", "triage", 12, 30);
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    let answered = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let sent_at = answered.elapsed().as_secs_f64();
    let answers = garbage(&stack);
    assert!(
        answers.iter().any(|a| a.starts_with("SIP/2.0 481")),
        "a BYE for no dialogue is answered 481 while the call goes on: {answers:?}"
    );
    phone.wait_over(Duration::from_secs(45));
    // How long the call lasted, by the clock from the edge's answer to the phone's hang-up
    // (not by the recording's length: baresip starved of CPU records less than it plays).
    let lasted = answered.elapsed().as_secs_f64();
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}");
    assert!((11.0..45.0).contains(&lasted), "the call lasted as long as the phone's 12 s WAV: {lasted:.1} s\n{log}");
    // The agent's reply: at least a second of it heard well above silence, after the
    // garbage was sent (so the call survived it).
    let after = ((sent_at + 0.5) * 4.0) as usize;
    let voiced = windows.iter().skip(after).filter(|rms| **rms > 0.02).count();
    let loudest = windows.iter().copied().fold(0.0, f64::max);
    assert!(
        voiced >= 4 && loudest > 0.05,
        "the phone heard the agent after the garbage: {voiced} voiced windows, loudest {loudest:.3}: {windows:?}"
    );
    assert!(loudest < 0.9, "no loud garbage RTP was played: loudest {loudest:.3} (the agent's voice is about 0.1-0.3)");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the phone side: RemoteHangUp""#), "the caller's BYE ended the call:\n{edge}");
    // The garbage reached the call's media ports (15 datagrams to each) and was ignored there.
    let ignored: u64 = edge
        .lines()
        .find_map(|l| l.split_once(" ignored=").and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok()))
        .unwrap_or_else(|| panic!("the edge logs what it relayed:\n{edge}"));
    assert!(ignored >= 15, "the garbage on the media ports was ignored, not played: ignored={ignored}\n{edge}");

    // The record: one session with the voice agent, ended (close 1000) when the phone hung
    // up, in which the agent heard the caller's tone as "phrase 1" once (the garbage RTP was
    // not heard as a second utterance).
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for one call: {list:?}");
    let session = &list[0];
    assert_eq!(session["first_agent"], "default/triage", "{session}");
    assert_eq!(session["outcome"], "ended", "{session}");
    assert_eq!(session["close_code"], 1000, "{session}");
    let (started, ended) = (session["started_at"].as_f64().expect("start"), session["ended_at"].as_f64().expect("end"));
    let seconds = (ended - started) / 1000.0;
    assert!((seconds - lasted).abs() < 5.0, "the session ended with the call: {seconds} s vs {lasted:.1} s");
    let id = session["id"].as_str().expect("an id");
    let shown = sessions(&stack, &["show", id]);
    let user_lines: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
    assert_eq!(user_lines.len(), 1, "one utterance heard: {shown}");
    assert!(user_lines[0].contains("phrase 1"), "the agent heard the caller's tone: {shown}");
}

#[test]
fn a_call_to_a_claimed_number_reaches_the_agent_that_claims_it() {
    let stack = stack("number");
    let phone = Phone::dial(&stack, "caller", TRIAGE_NUMBER, 6, 30);
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    assert!(windows.iter().filter(|rms| **rms > 0.02).count() >= 4, "the phone heard the agent: {windows:?}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let agents: Vec<&str> = list.as_array().expect("a list").iter().filter_map(|s| s["first_agent"].as_str()).collect();
    assert_eq!(agents, ["default/triage"], "the number's call is a session with triage");
}

#[test]
fn a_call_over_tcp_is_answered_heard_and_hung_up() {
    let stack = stack("tcp");
    let phone = Phone::dial_over(&stack, "caller", "triage", 8, 30, "tcp");
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the phone heard the agent over TCP signalling: {windows:?}");
    let edge = stack.edge.log_text();
    assert!(
        edge.contains(r#"end="the phone side: RemoteHangUp""#),
        "the caller's BYE over TCP ended the call:\n{edge}"
    );
}

#[test]
fn calls_to_an_unknown_a_hidden_or_a_text_only_agent_are_refused_with_the_reason() {
    let stack = stack("refused");
    for (user, answer) in [
        ("nobody", "404 no agent nobody"),
        ("+15550000000", "404 no agent +15550000000: no agent answers +15550000000"),
        ("disputes", "488 agent disputes is text-only and takes no calls"),
        ("idv", "403 agent idv is not open to the SIP edge"),
    ] {
        let phone = Phone::dial(&stack, user, user, 1, 20);
        phone.wait_over(Duration::from_secs(20));
        let log = phone.log();
        assert!(
            log.contains(answer),
            "a call to {user} is answered {answer:?}:\n{log}\n--- edge ---\n{}",
            stack.edge.log_text()
        );
        assert!(!log.contains("Call established"), "{log}");
    }
    let list = sessions(&stack, &["list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&list).expect("JSON");
    let agents: Vec<&str> = list.as_array().expect("a list").iter().filter_map(|s| s["first_agent"].as_str()).collect();
    assert!(
        !agents.iter().any(|a| a.ends_with("/triage") || a.ends_with("/idv")),
        "no voice session opened: {agents:?}"
    );
}

#[test]
fn the_agents_side_ending_hangs_the_phone_up() {
    let stack = stack("bye");
    let phone = Phone::dial(&stack, "caller", "triage", 40, 60);
    wait_for(
        "the edge answers the call",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("call answered"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    std::thread::sleep(Duration::from_secs(2));
    // Local mode stops: its gateway drains (5 s) and closes the session (1001); the edge
    // sends BYE and the phone hangs up long before its WAV ends.
    stack.local.terminate().expect("SIGTERM");
    let stopped = Instant::now();
    wait_for(
        "the phone is hung up",
        Duration::from_secs(20),
        || phone.log().contains("terminated"),
        || format!("{}\n--- baresip ---\n{}", stack.edge.log_text(), phone.log()),
    );
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(15), "hung up {took:?} after the session's end began");
    let edge = stack.edge.log_text();
    assert!(edge.contains(r#"end="the session ended (1001"#), "the session's close ended the call:\n{edge}");
}

#[test]
fn with_trunks_configured_only_a_trunk_calls_and_digest_credentials_are_challenged() {
    // The phone is on 127.0.0.1: outside the PBX trunk's addresses; the carrier trunk takes
    // any address that proves its digest credentials (MD5 challenges only: Debian's
    // baresip gives up at a SHA-256 challenge rather than take the next).
    let secret = std::env::temp_dir().join(format!("switchboard-sip-credentials-{}", std::process::id()));
    std::fs::create_dir_all(&secret).expect("a folder");
    std::fs::write(secret.join("username"), "bank\n").expect("username");
    std::fs::write(secret.join("password"), "s3cret\n").expect("password");
    let credentials = format!("carrier={}", secret.display());
    let pbx_only = stack_with("stranger", &["--trunk", "pbx=192.0.2.0/24"]);
    let phone = Phone::dial(&pbx_only, "stranger", "triage", 1, 15);
    phone.wait_over(Duration::from_secs(20));
    let log = phone.log();
    assert!(log.contains("403 Forbidden: not from a trunk's addresses"), "{log}");
    assert!(!log.contains("Call established"), "{log}");
    drop(pbx_only);

    let stack = stack_with(
        "trunk",
        &["--trunk", "pbx=192.0.2.0/24", "--trunk-credentials", &credentials, "--digest-algorithms", "MD5"],
    );
    let wrong = Phone::dial_as(&stack, "wrong", "triage", 1, 15, "udp", ";auth_user=bank;auth_pass=guess");
    wrong.wait_over(Duration::from_secs(20));
    let log = wrong.log();
    assert!(log.contains("403 Forbidden: wrong trunk credentials"), "a wrong password is refused: {log}");
    let right = Phone::dial_as(&stack, "right", "triage", 4, 30, "udp", ";auth_user=bank;auth_pass=s3cret");
    right.wait_over(Duration::from_secs(40));
    let log = right.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = right.heard(&stack.tools.join("sox"));
    assert!(windows.iter().filter(|rms| **rms > 0.02).count() >= 4, "the trunk's call heard the agent: {windows:?}");
    let _ = std::fs::remove_dir_all(&secret);
}

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

/// A baresip that takes calls (the callee of the edge's outbound calls) on `port`:
/// `answermode` `auto` (answers at once, plays the phrase tone, records what it hears) or
/// `manual` (rings until the caller gives up); `max_calls` calls at once (past it: 486 Max
/// Calls). It hangs up when told to stop ([`Callee::hang_up`]).
struct Callee {
    phone: Phone,
    port: u16,
}

/// A port for a baresip: it and the next free over UDP and TCP.
fn free_phone_port() -> u16 {
    loop {
        let port = free_udp_range(2).0;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
        {
            return port;
        }
    }
}

impl Callee {
    fn listen(stack: &Stack, name: &str, answermode: &str, max_calls: u32, port: u16) -> Self {
        let dir = stack.dir.join(name);
        std::fs::create_dir_all(dir.join("snd")).expect("a folder");
        // Half a second of silence, the phrase tone (500 Hz, 1.5 s), then silence.
        let status = Command::new(stack.tools.join("sox"))
            .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
            .arg(dir.join("say.wav"))
            .args(["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"])
            .status()
            .expect("sox runs");
        assert!(status.success(), "sox made the callee's WAV");
        let d = dir.display();
        let config = format!(
            "sip_listen 127.0.0.1:{port}\nmodule_path /usr/lib/baresip/modules\nmodule stdio.so\nmodule g711.so\n\
             module aufile.so\nmodule sndfile.so\nmodule account.so\nmodule menu.so\n\
             audio_source aufile,{d}/say.wav\naudio_player aufile,{d}/play.wav\naudio_alert aufile,{d}/say.wav\n\
             snd_path {d}/snd\ncall_max_calls {max_calls}\n"
        );
        std::fs::write(dir.join("config"), config).expect("config");
        let account =
            format!("<sip:callee@127.0.0.1:{port};transport=udp>;regint=0;answermode={answermode};audio_codecs=PCMU\n");
        std::fs::write(dir.join("accounts"), account).expect("accounts");
        let log = std::fs::File::create(dir.join("baresip.log")).expect("a log");
        let child = Command::new(stack.tools.join("baresip"))
            .arg("-f")
            .arg(&dir)
            .args(["-t", "180"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("baresip starts");
        let phone = Phone { dir, child };
        wait_for(
            "the callee listens",
            Duration::from_secs(10),
            || phone.log().contains("baresip is ready"),
            || phone.log(),
        );
        Self { phone, port }
    }

    fn uri(&self) -> String {
        format!("sip:callee@127.0.0.1:{}", self.port)
    }

    /// Stops baresip as a person hangs up: SIGTERM, it sends BYE and closes its recordings.
    fn hang_up(&self) {
        let status = Command::new("kill").args(["-TERM", &self.phone.child.id().to_string()]).status().expect("kill");
        assert!(status.success(), "SIGTERM to the callee");
    }
}

fn gateway_url(stack: &Stack) -> String {
    stack
        .local
        .log_text()
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL")
}

/// `switchboard call` against the stack's gateway, on a thread: its exit status and what it
/// printed.
fn call(stack: &Stack, to: &str, vars: &[&str]) -> std::thread::JoinHandle<(bool, String)> {
    let mut command = Command::new(&stack.binary);
    command.args(["call", to, "--agent", "triage", "--gateway", &gateway_url(stack), "--follow-seconds", "120"]);
    for var in vars {
        command.args(["--var", var]);
    }
    std::thread::spawn(move || {
        let out = command.output().expect("switchboard call runs");
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    })
}

/// The gateway's `/metrics` (local mode serves them to this machine).
fn metrics(stack: &Stack) -> String {
    use std::io::{Read, Write};
    let url = gateway_url(stack);
    let authority = url.trim_start_matches("ws://").split('/').next().expect("host:port").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("the gateway");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").expect("request");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("metrics");
    text
}

fn outbound_stack(name: &str, port: u16, ring_seconds: &str) -> Stack {
    let trunk = format!("sip:127.0.0.1:{port}");
    let stack = stack_with(
        name,
        &["--outbound-trunk", &trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", ring_seconds],
    );
    wait_for(
        "the edge takes outbound calls",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("taking outbound calls from the gateway"),
        || stack.edge.log_text(),
    );
    stack
}

#[test]
fn an_outbound_call_is_answered_by_a_phone_that_hears_the_agent() {
    let port = free_phone_port();
    let stack = outbound_stack("outbound", port, "20");
    let callee = Callee::listen(&stack, "callee", "auto", 4, port);
    let placed = call(&stack, &callee.uri(), &["customer=Ada", "reason=card_blocked"]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the call is answered",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outbound call answered"),
        context,
    );
    // The callee says its phrase and hears the agent's reply; then it hangs up.
    std::thread::sleep(Duration::from_secs(12));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "the call was answered: {printed}\n{}", context());
    assert!(printed.contains("answered (SIP 200) session gw-"), "{printed}\n{}", context());
    assert!(printed.contains("completed"), "{printed}\n{}", context());
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the callee heard the agent: {voiced} voiced windows: {windows:?}\n{}", context());
    // One session with triage in the record, in which the agent heard the callee's tone.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the answered call: {list:?}");
    assert_eq!(list[0]["first_agent"], "default/triage");
    let shown = sessions(&stack, &["show", list[0]["id"].as_str().expect("an id")]);
    assert!(shown.contains("phrase 1"), "the agent heard the callee: {shown}");
    let metrics = metrics(&stack);
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"completed\"} 1"), "{metrics}");
}

#[test]
fn an_outbound_call_nobody_answers_is_no_answer_and_one_to_a_busy_phone_is_busy() {
    let port = free_phone_port();
    let stack = outbound_stack("busy", port, "8");
    // Rings and never answers; one call at a time, so a second call meanwhile is refused 486.
    let callee = Callee::listen(&stack, "callee", "manual", 1, port);
    let uri = callee.uri();
    let ringing = call(&stack, &uri, &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for("the callee rings", Duration::from_secs(15), || callee.phone.log().contains("Incoming call"), context);
    let (ok, busy) = call(&stack, &uri, &[]).join().expect("the second call");
    assert!(!ok, "a busy call is not answered: {busy}");
    assert!(busy.contains("busy (SIP 486)"), "{busy}\n{}", context());
    let (ok, unanswered) = ringing.join().expect("the first call");
    assert!(!ok, "{unanswered}");
    assert!(unanswered.contains("ringing (SIP 180)"), "{unanswered}\n{}", context());
    assert!(unanswered.contains("no_answer"), "{unanswered}\n{}", context());
    let metrics = metrics(&stack);
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"busy\"} 1"), "{metrics}");
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"no_answer\"} 1"), "{metrics}");
    // Bad input is refused before anything is dialled.
    let (ok, refused) = call(&stack, "0800 123", &[]).join().expect("a bad call");
    assert!(!ok && refused.contains("400") && refused.contains("E.164"), "{refused}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    assert_eq!(list.as_array().expect("a list").len(), 0, "no session for calls nobody answered");
}

/// A simulator script for the transfer tests: the caller's tone (phrase 1) asks for
/// `person`; the agent calls `transfer_to_person`, and says sorry when it fails.
fn transfer_script(stack_dir: &Path, person: &str) -> PathBuf {
    let script = format!(
        "sonic:\n  phrases:\n    1: \"Put me through to the {person} please\"\n\
         rules:\n\
         \x20 - name: transfer\n\
         \x20   when: {{ userText: \"(?i)through to the (?P<who>[a-z]+)\" }}\n\
         \x20   reply: {{ toolUse: {{ name: transfer_to_person, input: {{ person: \"{{who}}\", reason: \"the caller asked\" }} }} }}\n\
         \x20 - name: transfer-failed\n\
         \x20   when: {{ toolResult: {{ name: transfer_to_person, status: error }} }}\n\
         \x20   reply: {{ text: \"Sorry, nobody could take your call right now.\" }}\n\
         default: {{ text: \"Hello from the bank.\" }}\n"
    );
    std::fs::create_dir_all(stack_dir).expect("a folder");
    let path = stack_dir.join("transfer-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

/// The people triage may put a caller through to: `advisor` at `advisor`'s phone, and
/// `nobody` at a port where nothing answers.
fn people(advisor: u16, nobody: u16) -> String {
    format!(
        "    transferTimeoutSeconds: 10\n    people:\n\
         \x20     - {{ name: advisor, address: \"sip:advisor@127.0.0.1:{advisor}\", description: Accounts }}\n\
         \x20     - {{ name: nobody, address: \"sip:nobody@127.0.0.1:{nobody}\" }}\n"
    )
}

/// A free UDP port (nothing listens on it when the test uses it).
fn dead_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port()
}

/// The record of the one session: its `sessions show` text.
fn the_session(stack: &Stack) -> String {
    let list: serde_json::Value = serde_json::from_str(&sessions(stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session: {list:?}");
    sessions(stack, &["show", list[0]["id"].as_str().expect("an id")])
}

#[test]
fn the_agent_transfers_the_caller_to_a_person_whose_phone_rings_and_answers() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-transfer-script-{}", std::process::id()));
    let script = transfer_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    // The person's phone first (its port goes into the Agent), in a stack-less folder.
    let tools = tools_bin().expect("tests/tools/install.sh");
    let (person, port) = Phone::answering(&dir, &tools, "advisor", "advisor", 60);
    let stack = stack_custom("transfer", &[], &people(port, dead_port()), &["--sim-script", &script_arg]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    wait_for(
        "the person's phone took the call",
        Duration::from_secs(10),
        || person.log().contains("Call established"),
        context,
    );
    let caller_log = caller.log();
    assert!(
        caller_log.contains("menu: transferring call") && caller_log.contains("Call established: sip:advisor@"),
        "the caller's phone was referred and is in a call with the person: {caller_log}"
    );
    // The agent's leg ends: the session ends saying to whom, and the edge hangs its leg up.
    wait_for(
        "the agent's session ends",
        Duration::from_secs(10),
        || stack.edge.log_text().contains("call ended"),
        context,
    );
    // The record is written behind the session: wait for its end.
    wait_for(
        "the record says the caller was transferred, and to whom",
        Duration::from_secs(20),
        || the_session(&stack).contains("transferred to advisor"),
        || the_session(&stack),
    );
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_to_person"), "the tool call is in the record: {shown}");
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_person_who_cannot_be_reached_comes_back_to_the_agent_as_a_typed_result() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-transfer-nobody-{}", std::process::id()));
    let script = transfer_script(&dir, "nobody");
    let script_arg = script.to_string_lossy().into_owned();
    let stack = stack_custom("nobody", &[], &people(dead_port(), dead_port()), &["--sim-script", &script_arg]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context = || format!("{}\n--- caller ---\n{}", stack.edge.log_text(), caller.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(!edge.contains("outcome=\"transferred\""), "nobody answered: {}", context());
    // The caller is still with the agent, which heard why and said sorry.
    caller.wait_over(Duration::from_secs(45));
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_"), "the model got a transfer_<outcome> error: {shown}");
    assert!(shown.contains("Sorry, nobody could take your call"), "the agent told the caller: {shown}");
    assert!(!shown.contains("transferred to"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
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
    let console = loop {
        let port = free_udp_range(1).0;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            break port;
        }
    };
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

/// Local mode answers phones itself (`switchboard local --sip-listen`): the SIP edge runs in
/// its process, with no `switchboard sip` beside it, so the same folder of YAML answers a
/// softphone offline. The call reaches triage, the phone hears its reply, and the session is
/// in local mode's record.
#[test]
fn local_mode_answers_a_phone_call_in_process() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let dir = std::env::temp_dir().join(format!("switchboard-sip-local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let agents = dir.join("agents");
    copy_dir(&repo_root().join("examples/banking"), &agents);
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let rtp = free_udp_range(RTP_PORTS);
    let local = Process::start(
        &binary,
        "local-sip",
        &[
            "local",
            &agents.to_string_lossy(),
            "--port",
            "0",
            "--record-database-url",
            &record,
            "--sip-listen",
            "127.0.0.1:0",
            "--sip-rtp-ports",
            &format!("{}-{}", rtp.0, rtp.1),
        ],
        &[],
        "Chat with: switchboard chat ws://",
    )
    .expect("switchboard local starts");
    let printed = local.log_text();
    let sip: SocketAddr = printed
        .lines()
        .find_map(|l| l.strip_prefix("Phone calls: sip:triage@")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("local mode prints where phones call triage:\n{printed}"));
    let dial = format!("/dial sip:triage@{sip};transport=udp");
    let (phone, _) = Phone::start(&dir, &tools, "caller", "caller", 8, 30, "udp", "", "", Some(&dial));
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- local ---\n{}", local.log_text());
    let (_, windows) = phone.heard(&tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the phone heard triage through local mode's own edge: {windows:?}");
    let out = Command::new(&binary)
        .args(["sessions", "list", "--json", "--record-database-url", &record])
        .output()
        .expect("switchboard sessions");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the call: {list:?}");
    assert_eq!(list[0]["first_agent"], "default/triage", "{list:?}");
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
}
