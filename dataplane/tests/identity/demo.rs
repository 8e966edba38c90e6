//! The Example Bank's demo tool server, started with the gateway's public key, does what a
//! bank's tool server would with the assertion: its account endpoints serve only the caller
//! the gateway vouches for.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::json;
use switchboard_core::assertion::{self, IdentityClaims};
use switchboard_core::grant::GatewaySigner;
use switchboard_demo_tools::{Accounts, Callers, DemoTools, Trusted};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs `body` to `path` with the identity assertion `identity`; (status, body).
async fn post(addr: SocketAddr, path: &str, body: serde_json::Value, identity: Option<&str>) -> (u16, String) {
    let body = body.to_string();
    let header = identity.map(|token| format!("{}: {token}\r\n", assertion::HEADER)).unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{header}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn assert_for(key: &GatewaySigner, account: &str) -> String {
    let caller = json!({"name": "Ada Lovelace", "accountNumber": account});
    let now = switchboard_runtime::grants::now_ms() / 1000;
    let claims = IdentityClaims::new(caller, "bank", "banking", "gw-1", now);
    assertion::sign_identity(key, &claims).expect("signed")
}

#[tokio::test]
async fn the_demo_tool_server_acts_only_for_the_asserted_caller() {
    let key = GatewaySigner::from_seed(&[31; 32]);
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking/tools/accounts.yaml");
    let accounts = Accounts::load(&data).expect("accounts");
    let trusted = Trusted::new(key.public().into(), ["bank"]).expect("trusted");
    let tools = DemoTools::start(accounts, SocketAddr::from(([127, 0, 0, 1], 0)), Callers::Verified(trusted))
        .await
        .expect("starts");
    let ada = json!({"accountNumber": "12345678"});
    let ada_token = assert_for(&key, "12345678");

    let (status, body) = post(tools.addr, "/balance", ada.clone(), Some(&ada_token)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("1234.56"), "{body}");
    let (status, body) = post(tools.addr, "/balance", ada.clone(), None).await;
    assert_eq!(status, 401, "no assertion: {body}");
    assert!(body.contains("X-Switchboard-Identity"), "{body}");
    let (status, body) =
        post(tools.addr, "/transactions", json!({"accountNumber": "87654321"}), Some(&ada_token)).await;
    assert_eq!(status, 403, "another customer's account: {body}");
    let dispute = json!({"accountNumber": "87654321", "transactionId": "tx-1", "reason": "r"});
    assert_eq!(post(tools.addr, "/disputes", dispute, Some(&ada_token)).await.0, 403);
    let forged = assert_for(&GatewaySigner::from_seed(&[32; 32]), "12345678");
    let (status, body) = post(tools.addr, "/balance", ada, Some(&forged)).await;
    assert_eq!(status, 401, "another key: {body}");
    assert!(body.contains("signature"), "{body}");
    // The identity check is how a caller gets verified: it needs no assertion.
    let idv = json!({"name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56"});
    let (status, body) = post(tools.addr, "/idv", idv, None).await;
    assert_eq!((status, body.contains(r#""verified":true"#)), (200, true), "{body}");
}
