//! Local mode with several outbound trunks (`switchboard local --sip-outbound-trunk
//! NAME=URI`, repeated, as `switchboard sip --outbound-trunk`): each call placed through
//! local mode's own edge reaches the phone behind the trunk it names, a call naming none the
//! default's (`--sip-default-outbound-trunk`, from its own `--sip-caller-id NAME=ID`), and a
//! trunk local mode does not have is refused (404 `unknown_trunk`, naming the trunks).

use std::process::Command;
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::switchboard::switchboard_binary;

use crate::local::start_local_with;
use crate::phone::{Callee, free_phone_port};
use crate::stack::wait_for;

#[test]
fn local_mode_places_each_call_through_the_trunk_it_names() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let (north_port, south_port) = (free_phone_port(), free_phone_port());
    let (north, south) = (format!("north=sip:127.0.0.1:{north_port}"), format!("south=sip:127.0.0.1:{south_port}"));
    let flags = [
        "--sip-outbound-trunk",
        &north,
        "--sip-outbound-trunk",
        &south,
        "--sip-default-outbound-trunk",
        "south",
        "--sip-caller-id",
        "south=+4930999",
    ];
    let (dir, _record, local) =
        start_local_with(&binary, "switchboard-sip-local-trunks", "local-trunks", &flags, |triage| triage);
    let printed = local.log_text();
    assert!(printed.contains("Outbound calls through the trunks south, north (the first the default)"), "{printed}");
    let gateway = printed
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL");
    let phrase: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"];
    let north = Callee::listen_saying(&dir, &tools, "north", "auto", 1, north_port, &[phrase]);
    let south = Callee::listen_saying(&dir, &tools, "south", "auto", 1, south_port, &[phrase]);
    let context = || {
        let (l, n, s) = (local.log_text(), north.phone.log(), south.phone.log());
        format!("--- local ---\n{l}\n--- north ---\n{n}\n--- south ---\n{s}")
    };
    let call = |trunk: Option<&str>| {
        let mut command = Command::new(&binary);
        // The same URI every time: only the trunk decides which phone rings.
        let to = "sip:callee@127.0.0.1:9";
        command.args(["call", to, "--agent", "triage", "--gateway", &gateway, "--follow-seconds", "60"]);
        if let Some(trunk) = trunk {
            command.args(["--trunk", trunk]);
        }
        std::thread::spawn(move || {
            let out = command.output().expect("switchboard call runs");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            (out.status.success(), text)
        })
    };
    let answered = |callee: &Callee| callee.phone.log().contains("Call established");

    let placed = call(Some("north"));
    wait_for("north's phone answers", Duration::from_secs(30), || answered(&north), context);
    std::thread::sleep(Duration::from_secs(3));
    north.hang_up();
    let (ok, out) = placed.join().expect("switchboard call");
    assert!(ok && out.contains(" through north ") && out.contains("completed"), "{out}\n{}", context());
    assert!(!answered(&south), "south's phone did not ring:\n{}", context());

    // No trunk named: the default, south, from its own caller-id.
    let placed = call(None);
    wait_for("south's phone answers", Duration::from_secs(30), || answered(&south), context);
    std::thread::sleep(Duration::from_secs(3));
    south.hang_up();
    let (ok, out) = placed.join().expect("switchboard call");
    assert!(ok && out.contains("completed"), "{out}\n{}", context());
    assert!(south.phone.log().contains("+4930999"), "south's caller-id:\n{}", context());
    assert_eq!(north.phone.log().matches("Call established").count(), 1, "north rang once:\n{}", context());

    let (ok, refused) = call(Some("west")).join().expect("switchboard call");
    assert!(!ok && refused.contains("404 unknown_trunk"), "{refused}");
    assert!(refused.contains("the trunks are: north, south"), "names the trunks: {refused}");
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
}
