//! `switchboard demo-tools`: the checks of IDENTITY.md, namespace included, and no account
//! served without the gateway's key.

use std::net::SocketAddr;

use serde_json::json;
use switchboard_core::assertion::{self, IdentityClaims};
use switchboard_core::grant::GatewaySigner;

use super::{request, run_to_end, start_until, switchboard};

const DATA: &str = "examples/banking/tools/accounts.yaml";

/// Starts `switchboard demo-tools` with `args`; its process and address.
fn demo_tools(args: &[&str]) -> (super::Running, SocketAddr) {
    let mut all = vec!["demo-tools", "--data", DATA, "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    start_until(switchboard(&all), |line| {
        let rest = line.strip_prefix("Demo tool server on http://")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The gateway's assertion that `name` (account `account`) is the verified caller of a
/// session of `namespace/agent`.
fn asserted(key: &GatewaySigner, namespace: &str, agent: &str, name: &str, account: &str) -> String {
    let caller = json!({"name": name, "accountNumber": account, "sortCode": "12-34-56", "status": "active"});
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let claims = IdentityClaims::new(caller, namespace, agent, "gw-trust-1", now);
    assertion::sign_identity(key, &claims).expect("signed")
}

fn post(addr: SocketAddr, path: &str, body: serde_json::Value, identity: Option<&str>) -> (u16, String) {
    let headers: Vec<(&str, &str)> = identity.map(|token| (assertion::HEADER, token)).into_iter().collect();
    request(addr, "POST", path, &addr.to_string(), &headers, &body.to_string())
}

#[test]
fn an_assertion_from_another_namespace_gets_no_customer_s_account() {
    let key = GatewaySigner::from_seed(&[41; 32]);
    let hex = key.public().to_string();
    let (_tools, addr) = demo_tools(&["--gateway-public-key", &hex, "--trusted-namespace", "bank"]);
    let alan = json!({"accountNumber": "87654321"});

    // A tenant's own identity check in namespace `evil` got the gateway to sign Alan Turing.
    let evil = asserted(&key, "evil", "banking", "Alan Turing", "87654321");
    let (status, body) = post(addr, "/balance", alan.clone(), Some(&evil));
    assert_eq!(status, 403, "an assertion of namespace evil: {body}");
    assert!(body.contains(r#"\"evil\""#) && body.contains("trusts bank"), "says why: {body}");
    let dispute = json!({"accountNumber": "87654321", "transactionId": "tx-1", "reason": "not me"});
    assert_eq!(post(addr, "/disputes", dispute, Some(&evil)).0, 403, "no dispute opened from evil");
    assert_eq!(post(addr, "/transactions", alan.clone(), Some(&evil)).0, 403);

    // The same caller, vouched for by the bank's own Agent, is served.
    let bank = asserted(&key, "bank", "banking", "Alan Turing", "87654321");
    let (status, body) = post(addr, "/balance", alan.clone(), Some(&bank));
    assert_eq!(status, 200, "an assertion of namespace bank: {body}");
    assert!(body.contains("87654321"), "{body}");
    // And without an assertion, nobody.
    assert_eq!(post(addr, "/balance", alan, None).0, 401);
}

#[test]
fn trusted_agents_narrow_the_trusted_namespaces() {
    let key = GatewaySigner::from_seed(&[42; 32]);
    let hex = key.public().to_string();
    let (_tools, addr) =
        demo_tools(&["--gateway-public-key", &hex, "--trusted-namespace", "bank", "--trusted-agent", "banking"]);
    let ada = json!({"accountNumber": "12345678"});
    let triage = asserted(&key, "bank", "triage", "Ada Lovelace", "12345678");
    let (status, body) = post(addr, "/balance", ada.clone(), Some(&triage));
    assert_eq!(status, 403, "another Agent of the namespace: {body}");
    assert!(body.contains("bank/triage"), "{body}");
    let banking = asserted(&key, "bank", "banking", "Ada Lovelace", "12345678");
    assert_eq!(post(addr, "/balance", ada, Some(&banking)).0, 200);
}

#[test]
fn without_the_gateway_s_key_no_account_is_served() {
    let data = ["demo-tools", "--data", DATA, "--listen", "127.0.0.1:0"];
    let (ok, stderr) = run_to_end(switchboard(&data));
    assert!(!ok, "started with no key and no --insecure-no-identity");
    assert!(stderr.contains("--gateway-public-key") && stderr.contains("--insecure-no-identity"), "{stderr}");

    let hex = GatewaySigner::from_seed(&[43; 32]).public().to_string();
    let (ok, stderr) = run_to_end(switchboard(&[&data[..], &["--gateway-public-key", &hex]].concat()));
    assert!(!ok, "started trusting every namespace");
    assert!(stderr.contains("--trusted-namespace"), "{stderr}");

    let insecure = ["demo-tools", "--data", DATA, "--listen", "0.0.0.0:0", "--insecure-no-identity"];
    let (ok, stderr) = run_to_end(switchboard(&insecure));
    assert!(!ok, "trusted any request on an address others reach");
    assert!(stderr.contains("loopback"), "{stderr}");

    // Asked for in so many words, on this machine only: a demo that trusts the request.
    let (_tools, addr) = demo_tools(&["--insecure-no-identity"]);
    let (status, body) = post(addr, "/balance", json!({"accountNumber": "12345678"}), None);
    assert_eq!(status, 200, "{body}");
}
