//! Trunks: with trunks configured only a trunk's addresses or digest credentials may call;
//! the edge counts the others' calls refused as `forbidden`.

use std::time::Duration;

use crate::phone::Phone;
use crate::stack::{Stack, edge_metrics, sample, stack_with};

/// The calls the edge counted refused as `forbidden` (each 403 is counted before it is sent;
/// a phone that retransmits its INVITE before the answer comes is refused, and counted, again).
fn forbidden(stack: &Stack) -> f64 {
    sample(&edge_metrics(stack), r#"switchboard_sip_calls_refused_total{reason="forbidden"}"#).unwrap_or_default()
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
    assert!(forbidden(&pbx_only) >= 1.0, "the stranger's call counted: {}", edge_metrics(&pbx_only));
    drop(pbx_only);

    let stack = stack_with(
        "trunk",
        &["--trunk", "pbx=192.0.2.0/24", "--trunk-credentials", &credentials, "--digest-algorithms", "MD5"],
    );
    let wrong = Phone::dial_as(&stack, "wrong", "triage", 1, 15, "udp", ";auth_user=bank;auth_pass=guess");
    wrong.wait_over(Duration::from_secs(20));
    let log = wrong.log();
    assert!(log.contains("403 Forbidden: wrong trunk credentials"), "a wrong password is refused: {log}");
    assert!(forbidden(&stack) >= 1.0, "the wrong password counted: {}", edge_metrics(&stack));
    let right = Phone::dial_as(&stack, "right", "triage", 4, 30, "udp", ";auth_user=bank;auth_pass=s3cret");
    right.wait_over(Duration::from_secs(40));
    let log = right.log();
    assert!(log.contains("Call established"), "{log}\n--- edge ---\n{}", stack.edge.log_text());
    let (_, windows) = right.heard(&stack.tools.join("sox"));
    assert!(windows.iter().filter(|rms| **rms > 0.02).count() >= 4, "the trunk's call heard the agent: {windows:?}");
    let _ = std::fs::remove_dir_all(&secret);
}
