//! `switchboard call`: places an outbound call through a gateway (`POST /v1/calls`; its SIP
//! edge dials through the outbound trunk) and prints its progress (`GET /v1/calls/{id}`)
//! until it is over: ringing, answered (with the session's id), then completed, busy,
//! no answer or failed with the SIP status. Exits 0 when the call was answered. With the
//! Agent's answering-machine detection: who answered (`human`, `machine`, `unknown`); and
//! for every answered call, how long after the answer the callee first heard the agent; at
//! the end how long it lasted and who hung up. With `--status-callback URL` the gateway
//! also POSTs each step there, signed (the gateway's `--calls-webhook-secret-file`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Options of `switchboard call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// Whom to call: an E.164 number (`+442079460018`) or a SIP URI (`sip:alice@pbx:5060`).
    to: String,

    /// The agent that talks when the callee answers (`name` or `namespace/name`).
    #[arg(long)]
    agent: String,

    /// A variable for the session's context, `NAME=VALUE` (repeatable); the agent finds
    /// them in its memory under `outboundCall.variables`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,

    /// The outbound trunk to call through, by name (a SIP edge's `--outbound-trunk
    /// NAME=URI`). Default: the edge's default trunk.
    #[arg(long, value_name = "NAME")]
    trunk: Option<String>,

    /// A URL the gateway POSTs each step of the call to, as it happens (`statusCallback`:
    /// JSON, signed with the gateway's --calls-webhook-secret-file as the end-of-call report
    /// is).
    #[arg(long, value_name = "URL")]
    status_callback: Option<String>,

    /// The gateway: `http://host:port` (local mode's `ws://...` session URL is taken too).
    #[arg(long, env = "SWITCHBOARD_GATEWAY", default_value = "http://127.0.0.1:8080")]
    gateway: String,

    /// A file holding an API key marked `calls=place` (sent as `Authorization: Bearer`).
    #[arg(long, env = "SWITCHBOARD_API_KEY_FILE")]
    api_key_file: Option<PathBuf>,

    /// Stop following the call after this many seconds (the call goes on).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    follow_seconds: u64,
}

/// The gateway's HTTP base (`http://host:port`) from what was given.
fn base(gateway: &str) -> anyhow::Result<String> {
    let (scheme, rest) = gateway.split_once("://").with_context(|| format!("--gateway {gateway:?} is not a URL"))?;
    let scheme = match scheme {
        "http" | "ws" => "http",
        "https" | "wss" => bail!("--gateway {gateway:?}: this command speaks plain http only; use a port-forward"),
        other => bail!("--gateway {gateway:?}: {other}:// is not http://"),
    };
    let authority = rest.split(['/', '?']).next().filter(|a| !a.is_empty());
    let authority = authority.with_context(|| format!("--gateway {gateway:?} names no host"))?;
    Ok(format!("{scheme}://{authority}"))
}

fn variables(vars: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    vars.iter()
        .map(|v| match v.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
            _ => bail!("--var {v:?} is not NAME=VALUE"),
        })
        .collect()
}

type HttpClient = Client<HttpConnector, Full<bytes::Bytes>>;

async fn request(
    client: &HttpClient,
    method: http::Method,
    url: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
) -> anyhow::Result<(u16, serde_json::Value)> {
    let mut builder = http::Request::builder().method(method).uri(url).header("content-type", "application/json");
    if let Some(key) = key {
        builder = builder.header("authorization", format!("Bearer {key}"));
    }
    let request = builder.body(Full::new(bytes::Bytes::from(body.unwrap_or_default())))?;
    let response = client.request(request).await.with_context(|| format!("cannot reach {url}"))?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| serde_json::json!({ "message": String::from_utf8_lossy(&bytes) }));
    Ok((status, json))
}

/// One line of progress: the state, and what goes with it.
fn line(status: &serde_json::Value) -> String {
    let state = status["state"].as_str().unwrap_or("?");
    let mut line = state.to_owned();
    if let Some(code) = status["sip_status"].as_u64() {
        line.push_str(&format!(" (SIP {code})"));
    }
    if let Some(session) = status["session_id"].as_str() {
        line.push_str(&format!(" session {session}"));
    }
    if let Some(reason) = status["reason"].as_str() {
        line.push_str(&format!(": {reason}"));
    }
    if let Some(ms) = status["duration_ms"].as_u64() {
        line.push_str(&format!(" ({} s", ms / 1000));
        if let Some(by) = status["hung_up_by"].as_str() {
            line.push_str(&format!(", hung up by the {by}"));
        }
        line.push(')');
    }
    line
}

/// Places the call and follows it.
pub async fn run(args: CallArgs) -> anyhow::Result<()> {
    let CallArgs { to, agent, vars, trunk, status_callback, gateway, api_key_file, follow_seconds } = args;
    let base = base(&gateway)?;
    let variables = variables(&vars)?;
    let key = match api_key_file {
        Some(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(text.trim_end_matches(['\n', '\r']).to_owned())
        }
        None => None,
    };
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let mut body = serde_json::json!({ "to": to, "agent": agent, "variables": variables });
    if let Some(trunk) = &trunk {
        body["trunk"] = serde_json::Value::from(trunk.as_str());
    }
    if let Some(url) = &status_callback {
        body["statusCallback"] = serde_json::Value::from(url.as_str());
    }
    let body = serde_json::to_vec(&body)?;
    let url = format!("{base}{}", switchboard_core::outbound::CALLS_PATH);
    let (status, placed) = request(&client, http::Method::POST, &url, key.as_deref(), Some(body)).await?;
    if status != 201 {
        bail!(
            "the gateway refused the call ({status} {}): {}",
            placed["error"].as_str().unwrap_or(""),
            placed["message"].as_str().unwrap_or("")
        );
    }
    let id = placed["id"].as_str().context("the gateway's answer has no call id")?.to_owned();
    let through = placed["trunk"].as_str().map(|t| format!(" through {t}")).unwrap_or_default();
    println!("call {id} to {to}{through} with {}: {}", placed["agent"].as_str().unwrap_or(&agent), line(&placed));
    let deadline = Instant::now() + Duration::from_secs(follow_seconds);
    let mut last = placed["state"].as_str().unwrap_or_default().to_owned();
    let mut answered = false;
    let (mut detected, mut heard) = (false, false);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (status, read) = request(&client, http::Method::GET, &format!("{url}/{id}"), key.as_deref(), None).await?;
        if status != 200 {
            bail!("reading call {id}: {status} {}", read["message"].as_str().unwrap_or(""));
        }
        if let (false, Some(who)) = (detected, read["answered_by"].as_str()) {
            detected = true;
            println!(
                "answered by: {who} (decided {} ms after the answer)",
                read["detected_after_ms"].as_u64().unwrap_or(0)
            );
        }
        if let (false, Some(after)) = (heard, read["agent_heard_after_ms"].as_u64()) {
            heard = true;
            println!("the callee first heard the agent {after} ms after the answer");
        }
        let state = read["state"].as_str().unwrap_or_default().to_owned();
        if state != last {
            println!("{}", line(&read));
            answered |= state == "answered" || state == "completed";
            last = state;
        }
        if matches!(last.as_str(), "completed" | "busy" | "no_answer" | "failed") {
            return if answered { Ok(()) } else { bail!("the call was not answered: {}", line(&read)) };
        }
    }
    println!("still {last} after {follow_seconds} s; the call goes on (GET {url}/{id})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_its_http_base_and_variables_are_name_value() {
        assert_eq!(base("ws://127.0.0.1:8080/v1/session?agent=x").expect("ws"), "http://127.0.0.1:8080");
        assert_eq!(base("http://gw:80").expect("http"), "http://gw:80");
        assert!(base("gw:80").is_err() && base("https://gw").is_err() && base("http://").is_err());
        assert_eq!(variables(&["a=1".into(), "b=x=y".into()]).expect("vars")["b"], "x=y");
        assert!(variables(&["=1".into()]).is_err() && variables(&["a".into()]).is_err());
    }
}
