//! A small, real HTTP tool server for the Example Bank: identity checks, balances,
//! transactions and disputes over fixture accounts read from YAML
//! (`examples/banking/tools/accounts.yaml`). Endpoints take and return JSON:
//!
//! - `POST /idv` `{name, accountNumber, sortCode}` -> `{verified, user?}`
//! - `POST /balance` `{accountNumber}` -> `{accountNumber, balance, available, currency}`
//! - `POST /transactions` `{accountNumber, limit?}` -> `{transactions: [...]}` newest first
//! - `POST /disputes` `{accountNumber, transactionId, reason}` -> `{disputeId, status, ...}`
//!
//! Unknown accounts or transactions answer 404 with `{error}`; malformed input 400.
//!
//! The account endpoints (`/balance`, `/transactions`, `/disputes`) act only for a caller
//! the gateway vouches for, as a bank's own tool server would ([`Callers::Verified`];
//! `switchboard demo-tools --gateway-public-key --trusted-namespace`): every check of
//! `dataplane/runtime/src/tools/IDENTITY.md` ([`trust`]) — the `X-Switchboard-Identity` assertion
//! ([`switchboard_core::assertion`]) must verify with one of the gateway's keys (the old and
//! the new during a rotation; 401 otherwise), come from an Agent of a trusted namespace (and
//! a trusted Agent, when some are named; 403 otherwise: any tenant's identity check gets the
//! gateway to sign whoever it says), and the `accountNumber` asked for must be the asserted
//! caller's `verifiedUser.accountNumber` (403 otherwise). `/idv` stays open: it is how a
//! caller gets verified. [`Callers::Anyone`] trusts the account number in each request: a
//! demo on this machine only (`--insecure-no-identity`, which the command line allows on a
//! loopback address alone).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod error;
pub mod trust;
pub use error::DemoToolsError;
pub use trust::{Callers, Trusted};

/// The fixture data.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accounts {
    /// The bank's customers.
    pub accounts: Vec<Account>,
}

/// One customer account.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Account {
    /// Full name.
    pub name: String,
    /// Eight digits.
    pub account_number: String,
    /// `12-34-56`.
    pub sort_code: String,
    /// e.g. `active`.
    pub status: String,
    /// Current balance.
    pub balance: f64,
    /// Available balance.
    pub available: f64,
    /// ISO 4217 code.
    pub currency: String,
    /// Newest first.
    #[serde(default)]
    pub transactions: Vec<serde_json::Value>,
}

impl Accounts {
    /// Reads a fixture file.
    pub fn load(path: &Path) -> Result<Self, DemoToolsError> {
        let data = |message: String| DemoToolsError::Data { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| data(e.to_string()))?;
        serde_yaml::from_str(&text).map_err(|e| data(e.to_string()))
    }

    fn find(&self, number: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.account_number == number)
    }
}

struct DemoState {
    accounts: Accounts,
    disputes: AtomicU64,
    /// Whom the account endpoints act for.
    callers: Callers,
}

/// A running demo tool server.
#[derive(Debug)]
pub struct DemoTools {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl DemoTools {
    /// Starts serving `accounts` on `addr` (port 0 picks one), the account endpoints acting
    /// for `callers`; [`Callers::Anyone`] only on a loopback address.
    pub async fn start(accounts: Accounts, addr: SocketAddr, callers: Callers) -> Result<Self, DemoToolsError> {
        if matches!(callers, Callers::Anyone) && !addr.ip().is_loopback() {
            return Err(DemoToolsError::AnyoneBeyondLoopback { addr });
        }
        let listener =
            TcpListener::bind(addr).await.map_err(|e| DemoToolsError::Listen { addr, message: e.to_string() })?;
        let addr = listener.local_addr().map_err(|e| DemoToolsError::Listen { addr, message: e.to_string() })?;
        let state = Arc::new(DemoState { accounts, disputes: AtomicU64::new(0), callers });
        let app = Router::new()
            .route("/idv", post(idv))
            .route("/balance", post(balance))
            .route("/transactions", post(transactions))
            .route("/disputes", post(disputes))
            .route("/preferences", post(preferences))
            .with_state(state);
        let stop = CancellationToken::new();
        // The same server as the gateway's and the runtime's: HTTP/1 only, header read
        // timeout, connection cap.
        let (limits, refused) = (switchboard_serve::Limits::default(), switchboard_serve::OnRefused::default());
        tokio::spawn(switchboard_serve::server::serve(listener, app, limits, refused, stop.clone()));
        Ok(Self { addr, stop })
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for DemoTools {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

type Reply = (StatusCode, Json<serde_json::Value>);

fn error(status: StatusCode, message: &str) -> Reply {
    (status, Json(serde_json::json!({ "error": message })))
}

fn field<'a>(input: &'a serde_json::Value, name: &str) -> Result<&'a str, Reply> {
    input
        .get(name)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| error(StatusCode::BAD_REQUEST, &format!("missing string field {name:?}")))
}

/// With [`Callers::Verified`]: the request's identity assertion must be meant for this
/// server and name the owner of account `number` as the verified caller.
fn authorize(state: &DemoState, headers: &HeaderMap, number: &str) -> Result<(), Reply> {
    let Callers::Verified(trusted) = &state.callers else { return Ok(()) };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = trusted.caller(headers, now).map_err(|(status, message)| error(status, &message))?;
    let caller = claims.verified_user.get("accountNumber").and_then(serde_json::Value::as_str);
    if caller != Some(number) {
        tracing::warn!(account = number, caller = ?caller, session = %claims.sid, "refused a request for an account that is not the verified caller's");
        return Err(error(StatusCode::FORBIDDEN, "the account is not the verified caller's"));
    }
    Ok(())
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

async fn idv(State(state): State<Arc<DemoState>>, Json(input): Json<serde_json::Value>) -> Reply {
    let (name, number, sort_code) =
        match (field(&input, "name"), field(&input, "accountNumber"), field(&input, "sortCode")) {
            (Ok(n), Ok(a), Ok(s)) => (n, a, s),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
        };
    let matched = state
        .accounts
        .find(number)
        .filter(|a| a.name.trim().eq_ignore_ascii_case(name.trim()) && digits(&a.sort_code) == digits(sort_code));
    match matched {
        Some(account) => (
            StatusCode::OK,
            Json(serde_json::json!({
                "verified": true,
                "user": {
                    "name": account.name,
                    "accountNumber": account.account_number,
                    "sortCode": account.sort_code,
                    "status": account.status,
                }
            })),
        ),
        None => (StatusCode::OK, Json(serde_json::json!({ "verified": false }))),
    }
}

/// How the caller likes to be served: checked and given back as `preferences`, for the
/// Agent to `remember` as `callerPreferences` (the gateway keeps that for the caller's
/// later sessions).
async fn preferences(Json(input): Json<serde_json::Value>) -> Reply {
    match field(&input, "verbosity") {
        Ok(verbosity @ ("brief" | "detailed")) => {
            (StatusCode::OK, Json(serde_json::json!({ "preferences": { "verbosity": verbosity } })))
        }
        Ok(other) => error(StatusCode::BAD_REQUEST, &format!("verbosity {other:?} is not brief or detailed")),
        Err(e) => e,
    }
}

async fn balance(
    State(state): State<Arc<DemoState>>,
    headers: HeaderMap,
    Json(input): Json<serde_json::Value>,
) -> Reply {
    let number = match field(&input, "accountNumber") {
        Ok(n) => n,
        Err(e) => return e,
    };
    if let Err(refused) = authorize(&state, &headers, number) {
        return refused;
    }
    match state.accounts.find(number) {
        Some(a) => (
            StatusCode::OK,
            Json(serde_json::json!({
                "accountNumber": a.account_number, "balance": a.balance, "available": a.available, "currency": a.currency
            })),
        ),
        None => error(StatusCode::NOT_FOUND, "no such account"),
    }
}

async fn transactions(
    State(state): State<Arc<DemoState>>,
    headers: HeaderMap,
    Json(input): Json<serde_json::Value>,
) -> Reply {
    let number = match field(&input, "accountNumber") {
        Ok(n) => n,
        Err(e) => return e,
    };
    if let Err(refused) = authorize(&state, &headers, number) {
        return refused;
    }
    let limit = input.get("limit").and_then(serde_json::Value::as_u64).unwrap_or(10).clamp(1, 50) as usize;
    match state.accounts.find(number) {
        Some(a) => {
            let list: Vec<_> = a.transactions.iter().take(limit).cloned().collect();
            (StatusCode::OK, Json(serde_json::json!({ "transactions": list })))
        }
        None => error(StatusCode::NOT_FOUND, "no such account"),
    }
}

async fn disputes(
    State(state): State<Arc<DemoState>>,
    headers: HeaderMap,
    Json(input): Json<serde_json::Value>,
) -> Reply {
    let (number, transaction) = match (field(&input, "accountNumber"), field(&input, "transactionId")) {
        (Ok(n), Ok(t)) => (n, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Err(refused) = authorize(&state, &headers, number) {
        return refused;
    }
    let Some(account) = state.accounts.find(number) else { return error(StatusCode::NOT_FOUND, "no such account") };
    if !account.transactions.iter().any(|t| t.get("id").and_then(serde_json::Value::as_str) == Some(transaction)) {
        return error(StatusCode::NOT_FOUND, "no such transaction on this account");
    }
    let n = state.disputes.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        Json(serde_json::json!({ "disputeId": format!("D-{n:05}"), "status": "open", "transactionId": transaction })),
    )
}
