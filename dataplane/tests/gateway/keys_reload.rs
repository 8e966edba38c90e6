//! API keys at a `switchboard gateway` process. Revoking one needs no restart: the gateway
//! reads its keys file again when it changes, refuses a key taken out from the next session
//! on, takes a key added at once, and keeps the keys in use when the new file does not read.
//! And a key is taken from the URL (`?access_token=`) only from a browser page, which cannot
//! set headers on a WebSocket: a program's key does not end up in every log of its URL.

use std::time::Duration;

use sha2::Digest as _;
use switchboard_core::protocol::{ClientMessage, ServerMessage};

use crate::client::Client;
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};

fn line(name: &str, key: &str) -> String {
    let digest: String = sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("{name} {digest}\n")
}

/// Whether the gateway at `url` opens a session for `key`: its `bidi_connection_start`, or
/// its refusal (`unknown_key`, 4401).
async fn admitted(url: &str, key: &str) -> bool {
    opens(url, &[("x-api-key", key)], "unknown_key").await
}

/// Whether the gateway at `url` opens a session for a client with `headers`: its
/// `bidi_connection_start`, or its refusal (`refusal`, 4401).
async fn opens(url: &str, headers: &[(&'static str, &str)], refusal: &str) -> bool {
    let mut client = Client::connect_with(url, headers).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    loop {
        match client.next().await {
            Some(Ok(ServerMessage::BidiConnectionStart { .. })) => return true,
            Some(Ok(ServerMessage::BidiError { code, .. })) => {
                assert_eq!(code, refusal, "{:?}", client.seen);
                return false;
            }
            Some(Ok(_)) => {}
            Some(Err((code, _))) => {
                assert_eq!(code, switchboard_core::protocol::close_code::UNAUTHORIZED, "{:?}", client.seen);
                return false;
            }
            None => panic!("no answer: {:?}", client.seen),
        }
    }
}

/// Asks until `key` is admitted as `expected`, for 15 s (the file is checked every second).
async fn becomes(url: &str, key: &str, expected: bool) {
    for _ in 0..30 {
        if admitted(url, key).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{key} is still {} after 15 s", if expected { "refused" } else { "admitted" });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_taken_out_of_the_file_is_refused_without_a_restart() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let keys = dir.join("api-keys");
    std::fs::write(&keys, line("web", "web-key") + &line("leaked", "leaked-key")).expect("keys");
    let keys_arg = keys.display().to_string();
    let gateway = GatewayProcess::start(&dir, &["--api-keys-file", &keys_arg, "--api-keys-reload-seconds", "1"]).await;
    let url = gateway.url();
    assert!(admitted(&url, "leaked-key").await && admitted(&url, "web-key").await);
    assert!(!admitted(&url, "new-key").await);

    // Revoked, and a key added: as a Secret's edit is seen, a new file put in place.
    let edited = dir.join("api-keys.new");
    std::fs::write(&edited, line("web", "web-key") + &line("new", "new-key")).expect("keys");
    std::fs::rename(&edited, &keys).expect("replaced");
    becomes(&url, "leaked-key", false).await;
    becomes(&url, "new-key", true).await;
    assert!(admitted(&url, "web-key").await, "the keys kept stay");

    // A file that does not read leaves the keys in use.
    std::fs::write(&edited, "web not-a-digest\n").expect("keys");
    std::fs::rename(&edited, &keys).expect("replaced");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(admitted(&url, "web-key").await && admitted(&url, "new-key").await);
    assert!(!admitted(&url, "leaked-key").await);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_in_the_url_is_taken_from_a_browser_page_only() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let keys = dir.join("api-keys");
    std::fs::write(&keys, line("web", "web-key")).expect("keys");
    let keys_arg = keys.display().to_string();
    let page = "https://bank.example";
    let gateway = GatewayProcess::start(&dir, &["--api-keys-file", &keys_arg, "--allowed-origin", page]).await;
    let in_url = format!("{}?access_token=web-key", gateway.url());
    assert!(!opens(&in_url, &[], "missing_key").await, "a program's key in the URL is refused");
    assert!(opens(&in_url, &[("origin", page)], "").await, "a browser page's is taken");
    assert!(opens(&gateway.url(), &[("authorization", "Bearer web-key")], "").await, "a header from anyone");
    let _ = std::fs::remove_dir_all(dir);
}

/// A session opened with `key` and kept open, or the code of its refusal.
async fn session(url: &str, key: &str) -> Result<Client, String> {
    let mut client = Client::connect_with(url, &[("x-api-key", key)]).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    loop {
        match client.next().await {
            Some(Ok(ServerMessage::BidiConnectionStart { .. })) => return Ok(client),
            Some(Ok(ServerMessage::BidiError { code, .. })) => return Err(code.to_string()),
            Some(Ok(_)) => {}
            Some(Err((code, reason))) => return Err(format!("closed {code}: {reason}")),
            None => panic!("no answer: {:?}", client.seen),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_sets_no_session_cap_gets_the_gateways() {
    let fleet = Fleet::start(&[]).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let keys = dir.join("api-keys");
    let uncapped = line("batch", "batch-key").replace('\n', " sessions=-\n");
    std::fs::write(&keys, line("web", "web-key") + &uncapped).expect("keys");
    let keys_arg = keys.display().to_string();
    let gateway = GatewayProcess::start(&dir, &["--api-keys-file", &keys_arg, "--max-sessions-per-key", "2"]).await;
    let url = gateway.url();
    let first = session(&url, "web-key").await.expect("first");
    let _second = session(&url, "web-key").await.expect("second");
    assert_eq!(session(&url, "web-key").await.err().as_deref(), Some("key_sessions"), "past the default cap");
    let mut batch = Vec::new();
    for n in 0..4 {
        batch.push(session(&url, "batch-key").await.unwrap_or_else(|e| panic!("sessions=- has no cap: {n}: {e}")));
    }
    first.close().await;
    // The slot comes back when the session ends.
    let mut again = Err(String::new());
    for _ in 0..50 {
        again = session(&url, "web-key").await;
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(again.is_ok(), "a slot freed is taken again: {:?}", again.err());
    let _ = std::fs::remove_dir_all(dir);
}
