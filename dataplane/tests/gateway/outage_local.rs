//! Outage mode offline: the real `switchboard local` binary on a copy of
//! `examples/banking`, its outage switch file (`tools/outage.yaml`) written and removed
//! while a session is under way. Switched on, the session under way goes on and is told
//! (`bidi_session_outage` with the folder's message), a new session gets
//! `bidi_session_fallback` and close 4513; a file it cannot read counts as off; removed,
//! the session under way is told it is off and new sessions are served again.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use switchboard_core::protocol::ServerMessage;

use crate::client::Client;

/// `switchboard local`, killed (and waited for) when dropped.
pub(crate) struct Local {
    child: Child,
    /// Its session URL, `ws://<addr>/v1/session`.
    pub(crate) url: String,
    /// The folder of its copy of the Example Bank (`agents/`) and whatever the test keeps.
    pub(crate) dir: PathBuf,
}

impl Local {
    /// The address it serves on (sessions, `/metrics`).
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        let authority = self.url.trim_start_matches("ws://").split('/').next().expect("an address");
        authority.parse().expect("IP:PORT")
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("the example") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copied");
        }
    }
}

async fn start() -> Local {
    start_with("outage", &[], |_| {}).await
}

/// `switchboard local` (no SIP) of a copy of the Example Bank in a fresh folder named after
/// `name`, the copy's folder handed to `edit` first, with more flags (`args`).
pub(crate) async fn start_with(name: &str, args: &[&str], edit: impl FnOnce(&Path)) -> Local {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_owned();
    let dir = std::env::temp_dir().join(format!("switchboard-{name}-local-{}", uuid::Uuid::new_v4()));
    copy_dir(&root.join("examples/banking"), &dir.join("agents"));
    edit(&dir.join("agents"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["local", "--port", "0", "--sip-listen", "off"])
        .args(args)
        .arg(dir.join("agents"))
        .env("XDG_DATA_HOME", &dir)
        .env("SWITCHBOARD_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("switchboard local starts");
    let stdout = child.stdout.take().expect("stdout");
    let (found, lines) = std::sync::mpsc::channel();
    // Read to the end, so that its prints never meet a closed pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = found.send(line);
        }
    });
    let url = tokio::task::spawn_blocking(move || {
        loop {
            let line = lines.recv_timeout(Duration::from_secs(120)).expect("local mode prints its address");
            if let Some((_, rest)) = line.split_once("(default): ws://") {
                let addr = rest.split('/').next().expect("an address");
                break format!("ws://{addr}/v1/session");
            }
        }
    })
    .await
    .expect("read");
    Local { child, url, dir: dir.clone() }
}

/// The switch file of `local`'s folder, written (`Some`) or removed.
fn switch(local: &Local, text: Option<&str>) {
    let path = local.dir.join("agents").join(switchboard_local::outage::OUTAGE_FILE);
    match text {
        // Written whole and renamed into place: never read half-written.
        Some(text) => {
            let part = path.with_extension("part");
            std::fs::write(&part, text).expect("written");
            std::fs::rename(&part, &path).expect("in place");
        }
        None => std::fs::remove_file(&path).expect("removed"),
    }
}

/// A new session's first outcome: served (its client), or the fallback and the close.
async fn session(local: &Local) -> Result<Client, (ServerMessage, u16)> {
    let mut client = Client::start(&local.url, Some("triage")).await;
    match client.next().await {
        Some(Ok(fallback @ ServerMessage::BidiSessionFallback { .. })) => {
            let (code, _) = client.closed().await;
            Err((fallback, code))
        }
        Some(Ok(ServerMessage::BidiConnectionStart { .. })) => Ok(client),
        other => panic!("a session start or a fallback first: {other:?}"),
    }
}

/// Reads until `client` is told outage mode is `active`, and a turn it asked for ended.
async fn told(client: &mut Client, active: bool) -> ServerMessage {
    client.say("What are your opening hours?").await;
    let (mut notice, mut ended) = (None, false);
    while notice.is_none() || !ended {
        match client.next().await {
            Some(Ok(ServerMessage::BidiResponseComplete { .. })) => ended = true,
            Some(Ok(message @ ServerMessage::BidiSessionOutage { .. })) => {
                assert!(matches!(&message, ServerMessage::BidiSessionOutage { active: a, .. } if *a == active));
                notice = Some(message);
            }
            Some(Ok(ServerMessage::BidiError { recoverable: false, code, message, .. })) => {
                panic!("the session under way goes on: {code:?} {message}")
            }
            Some(Ok(_)) => {}
            other => panic!("the session under way goes on: {other:?}"),
        }
    }
    notice.expect("told")
}

/// New sessions, until one gets the fallback (the file is checked twice a second).
async fn until_fallback(local: &Local) -> (ServerMessage, u16) {
    for _ in 0..40 {
        match session(local).await {
            Err(fallback) => return fallback,
            Ok(client) => client.close().await,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("new sessions never went to the fallback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_file_puts_local_mode_into_outage_mode_and_out() {
    let local = start().await;
    let mut under_way = session(&local).await.expect("served before the switch");

    switch(&local, Some("active: true\nmessage: \"The bank's assistants are closed today.\"\n"));
    let notice = told(&mut under_way, true).await;
    let ServerMessage::BidiSessionOutage { agent, cause, message, .. } = notice else { unreachable!() };
    assert_eq!((agent.as_str(), cause.as_str()), ("default/triage", "switch"));
    assert_eq!(message, "The bank's assistants are closed today.");
    match until_fallback(&local).await {
        (ServerMessage::BidiSessionFallback { agent, cause, message, .. }, 4513) => {
            assert_eq!((agent.as_str(), cause.as_str()), ("default/triage", "switch"));
            assert_eq!(message, "The bank's assistants are closed today.");
        }
        other => panic!("the fallback: {other:?}"),
    }

    // A file it cannot read counts as off: told so, and served.
    switch(&local, Some("active: yes please\n"));
    assert!(matches!(told(&mut under_way, false).await, ServerMessage::BidiSessionOutage { active: false, .. }));
    session(&local).await.expect("served while the file is unreadable").close().await;

    // One Agent only, then removed: off again.
    switch(&local, Some("agents: [triage]\n"));
    assert!(matches!(told(&mut under_way, true).await, ServerMessage::BidiSessionOutage { active: true, .. }));
    switch(&local, None);
    assert!(matches!(told(&mut under_way, false).await, ServerMessage::BidiSessionOutage { active: false, .. }));
    session(&local).await.expect("served once switched off").close().await;
    under_way.close().await;
}
