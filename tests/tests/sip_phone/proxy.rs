//! A carrier's SIP proxy between the trunk and the edge: Debian's `kamailio`, stateful and
//! record-routing, relays every new request to the edge. The trunk's digest credentials are
//! challenged by the edge through it (the 407 and the retried INVITE cross the proxy, two
//! Vias deep), and the dialogue keeps the proxy on its path both ways: the phone's ACK and
//! BYE, and the edge's BYE when the agent's side ends, go through it (the edge's 200 OK
//! carries the proxy's Record-Route, RFC 3261 §12.1.1; its own requests carry the route set).

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use switchboard_tests::ports;

use crate::phone::Phone;
use crate::stack::{Stack, stack_with, wait_for};

/// A kamailio proxying to one edge, on 127.0.0.2 (the phone is on 127.0.0.1).
pub(crate) struct Proxy {
    child: Child,
    pub(crate) address: SocketAddr,
    log: PathBuf,
}

impl Drop for Proxy {
    /// kamailio's worker processes with it: its process group (killing the main process
    /// alone left the workers running after every test).
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    fn start(stack: &Stack) -> Self {
        Self::start_with(stack, false)
    }

    /// A proxy that, when `refuse_refer`, answers every REFER itself `501 Not Implemented`
    /// (a carrier that takes no REFER) instead of relaying it.
    pub(crate) fn start_with(stack: &Stack, refuse_refer: bool) -> Self {
        let refer = if refuse_refer {
            "if (is_method(\"REFER\")) { xlog(\"L_NOTICE\", \"proxy: REFER refused\\n\"); sl_send_reply(\"501\", \"Not Implemented\"); exit; }"
        } else {
            ""
        };
        let dir = stack.dir.join("kamailio");
        std::fs::create_dir_all(&dir).expect("a folder");
        // A port free now and reserved for this test; picked again when some other program
        // took it before kamailio bound it (kamailio exits saying so).
        for _ in 0..5 {
            let address = SocketAddr::from(([127, 0, 0, 2], ports::free_port(ports::UDP)));
            let mut proxy = Self::spawn(stack, &dir, address, refer);
            if proxy.serving() {
                return proxy;
            }
            eprintln!("kamailio: another program took {address} before it bound it; picking another");
        }
        panic!("kamailio: its port was taken before it bound it five times")
    }

    /// Starts kamailio on `address` relaying to the stack's edge (`refer`: the REFER rule).
    fn spawn(stack: &Stack, dir: &Path, address: SocketAddr, refer: &str) -> Self {
        let modules = modules().expect("kamailio's modules under /usr/lib/<arch>/kamailio/modules");
        let config = format!(
            r#"#!KAMAILIO
debug=2
log_stderror=yes
children=1
auto_aliases=no
listen=udp:{address}
mpath="{modules}/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "siputils.so"
loadmodule "textops.so"
loadmodule "xlog.so"
modparam("rr", "enable_full_lr", 1)

request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    if (is_method("CANCEL")) {{ if (t_check_trans()) {{ t_relay(); }} exit; }}
    if (has_totag()) {{
        {refer}
        if (loose_route()) {{
            xlog("L_NOTICE", "proxy: $rm in dialogue from $si:$sp\n");
            t_relay();
            exit;
        }}
        if (is_method("ACK")) {{ if (t_check_trans()) {{ t_relay(); }} exit; }}
        sl_send_reply("404", "Not here");
        exit;
    }}
    if (is_method("INVITE")) {{ record_route(); }}
    xlog("L_NOTICE", "proxy: $rm from $si:$sp to the edge\n");
    $du = "sip:{edge}";
    t_relay();
    exit;
}}

event_route[core:worker-one-init] {{ xlog("L_NOTICE", "kamailio serving\n"); }}
"#,
            modules = modules.display(),
            edge = stack.sip,
        );
        let config_path = dir.join("kamailio.cfg");
        std::fs::write(&config_path, config).expect("config");
        let log = dir.join("kamailio.log");
        let out = std::fs::File::create(&log).expect("a log");
        let child = Command::new(stack.tools.join("kamailio"))
            .arg("-f")
            .arg(&config_path)
            .args(["-DD", "-E", "-w"])
            .arg(dir)
            .arg("-P")
            .arg(dir.join("kamailio.pid"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            // A group of its own, which the drop kills whole (kamailio forks its workers).
            .process_group(0)
            .spawn()
            .expect("kamailio starts");
        Self { child, address, log }
    }

    /// Waits until kamailio serves (its first worker runs `core:worker-one-init`, once
    /// the socket is bound): true; or has exited because its port was taken: false.
    /// Panics when it exits for another reason or is not serving in 15 s.
    fn serving(&mut self) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if self.log_text().contains("kamailio serving") {
                return true;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = self.log_text();
                assert!(ports::address_in_use(&log), "kamailio exited ({status}) before serving:\n{log}");
                return false;
            }
            assert!(std::time::Instant::now() < deadline, "kamailio not serving in 15 s:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The lines the config's `xlog` wrote (`proxy: ...`).
    pub(crate) fn relayed(&self) -> Vec<String> {
        self.log_text().lines().filter_map(|l| l.split_once("proxy: ").map(|(_, r)| r.to_owned())).collect()
    }
}

/// Debian's kamailio modules folder (`/usr/lib/<arch>/kamailio/modules`).
fn modules() -> Option<PathBuf> {
    std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("kamailio/modules"))
        .find(|p| p.join("tm.so").is_file())
}

fn credentials(dir: &Path) -> String {
    std::fs::create_dir_all(dir).expect("a folder");
    std::fs::write(dir.join("username"), "bank\n").expect("username");
    std::fs::write(dir.join("password"), "s3cret\n").expect("password");
    format!("carrier={}", dir.display())
}

#[test]
fn a_call_through_a_carriers_proxy_is_challenged_through_it_and_keeps_it_on_the_dialogues_path() {
    let secret = std::env::temp_dir().join(format!("switchboard-sip-proxy-credentials-{}", std::process::id()));
    let carrier = credentials(&secret);
    // Only the carrier's credentials open a call (MD5: Debian's baresip gives up at SHA-256).
    let stack = stack_with("proxy", &["--trunk-credentials", &carrier, "--digest-algorithms", "MD5"]);
    let proxy = Proxy::start(&stack);
    let context = |phone: &Phone| {
        format!(
            "--- baresip ---\n{}\n--- kamailio ---\n{}\n--- edge ---\n{}",
            phone.log(),
            proxy.log_text(),
            stack.edge.log_text()
        )
    };
    let dial = |name: &str, silence: u32, quit: u32| {
        let dial = format!("/dial sip:triage@{};transport=udp", proxy.address);
        let account = ";auth_user=bank;auth_pass=s3cret";
        // Its SDP names the loopback interface its RTP comes from: the edge takes media only
        // from the SDP's address or the SIP peer's (the proxy's, here), and baresip would
        // otherwise name the machine's default interface.
        let config = "net_interface 127.0.0.1\n";
        Phone::start(&stack.dir, &stack.tools, name, "caller", silence, quit, "udp", account, config, Some(&dial)).0
    };

    // The phone hangs up at the end of its WAV.
    let phone = dial("through-proxy", 4, 30);
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{}", context(&phone));
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    assert!(windows.iter().filter(|rms| **rms > 0.02).count() >= 4, "the agent was heard: {windows:?}");
    let relayed = proxy.relayed();
    let from_phone = |method: &str| relayed.iter().filter(|r| r.starts_with(method)).count();
    assert_eq!(from_phone("INVITE from 127.0.0.1"), 2, "challenged, then with credentials: {relayed:?}");
    assert!(from_phone("ACK in dialogue from 127.0.0.1") >= 1, "the ACK took the route: {}", context(&phone));
    assert!(from_phone("BYE in dialogue from 127.0.0.1") >= 1, "the BYE took the route: {}", context(&phone));
    wait_for(
        "the edge ends the call on the phone's BYE",
        Duration::from_secs(10),
        || stack.edge.log_text().contains("RemoteHangUp"),
        || context(&phone),
    );

    // The agent's side ends (local mode stops): the edge's BYE goes through the proxy too.
    let phone = dial("agent-ends", 40, 60);
    wait_for(
        "the second call is answered",
        Duration::from_secs(20),
        || stack.edge.log_text().matches("call answered").count() == 2,
        || context(&phone),
    );
    std::thread::sleep(Duration::from_secs(2));
    stack.local.terminate().expect("SIGTERM");
    // Its drain (5 s), then the edge's resume of the session (5 s), then the BYE.
    wait_for(
        "the phone is hung up",
        Duration::from_secs(30),
        || phone.log().contains("terminated"),
        || context(&phone),
    );
    // The edge sends from its SIP socket.
    let bye = format!("BYE in dialogue from {}", stack.sip);
    assert!(proxy.relayed().iter().any(|r| r.starts_with(&bye)), "the edge's BYE took the route: {}", context(&phone));
    let _ = std::fs::remove_dir_all(&secret);
}
