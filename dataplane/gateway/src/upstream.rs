//! The gateway's connection to a runtime pod: a WebSocket to the pod's session path,
//! opened with a `session_start` whose context (memory, history, handoff) the gateway
//! signs ([`switchboard_core::grant`]), so the runtime can trust it. A context larger than
//! a runtime reads is compacted first ([`compact`]: the oldest lines of the conversation
//! go), so a long session moves between pods and agents instead of being refused.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use switchboard_core::assertion::{IDENTITY_KEY, IdentityClaims, sign_identity};
use switchboard_core::grant::{Carried, GatewaySigner, MAX_PAYLOAD_BYTES, SessionContext};
use switchboard_core::handoff::HistoryTurn;
use switchboard_core::protocol::{ClientMessage, SessionStart};
use switchboard_serve::frames::{self, Conn};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// The WebSocket to a runtime pod.
pub type Socket = Conn<TcpStream>;

/// The largest message (and frame) a runtime may send the gateway: tungstenite's default,
/// as before the relay read frames itself. Runtimes are the gateway's own pods; a client's
/// limit is `Config::max_message_bytes`.
pub const RUNTIME_LIMITS: frames::Limits = frames::Limits { max_message: 64 << 20, max_frame: 16 << 20 };

/// What the runtime session is opened with.
#[derive(Debug)]
pub struct Opening<'a> {
    /// The gateway's session id.
    pub session_id: &'a str,
    /// The Agent's namespace and name (the runtime checks the grant is for it).
    pub namespace: &'a str,
    /// The Agent's name.
    pub agent: &'a str,
    /// The pod's session path (`/v1/session`).
    pub path: &'a str,
    /// The client's voice choice and modalities.
    pub voice: Option<String>,
    /// `text`, `audio`.
    pub modalities: Vec<String>,
    /// The text model the client chose, when it chose it for this agent.
    pub model: Option<String>,
    /// The client's audio formats (`session_start.audio`).
    pub audio: Option<switchboard_core::protocol::AudioSettings>,
    /// What the session carries into the runtime session, signed into its grant.
    pub carried: Carried,
    /// The Agent's variant the session runs (signed into its grant).
    pub variant: Option<String>,
    /// The fallback region the session's streams open in (signed into its grant).
    pub region: Option<String>,
    /// The W3C `traceparent` of the gateway's session span (none when not traced).
    pub traceparent: Option<String>,
    /// The longest the gateway holds the caller's audio to send it in larger frames
    /// ([`crate::GatewayConfig::audio_batch`]); none when it does not.
    pub audio_batch_ms: Option<u32>,
}

/// A runtime could not be reached.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot open a session on the runtime pod {addr}: {message}")]
pub struct ConnectError {
    /// The pod.
    pub addr: SocketAddr,
    /// Why.
    pub message: String,
}

/// Connects to the runtime at `addr` and sends the signed `session_start`.
pub async fn open(
    addr: SocketAddr,
    opening: Opening<'_>,
    key: &GatewaySigner,
    timeout: Duration,
) -> Result<Socket, ConnectError> {
    let error = |message: String| ConnectError { addr, message };
    let connecting = async {
        let tcp = TcpStream::connect(addr).await?;
        // Replies stream as many small frames (see the runtime's server).
        let _ = tcp.set_nodelay(true);
        frames::connect(tcp, &addr.to_string(), opening.path, RUNTIME_LIMITS).await
    };
    let mut socket = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| error(format!("no answer within {} ms", timeout.as_millis())))?
        .map_err(|e| error(e.to_string()))?;
    let mut context = SessionContext {
        session_id: opening.session_id.to_owned(),
        namespace: opening.namespace.to_owned(),
        agent: opening.agent.to_owned(),
        issued_at_ms: now_ms(),
        nonce: uuid::Uuid::new_v4().to_string(),
        carried: opening.carried,
        identity: None,
        traceparent: opening.traceparent,
        pod: Some(addr.ip().to_string()),
        variant: opening.variant,
        region: opening.region,
        audio_batch_ms: opening.audio_batch_ms,
    };
    context.identity = verified_caller(&context)
        .and_then(|caller| identity(key, caller, &context.namespace, &context.agent, &context.session_id));
    compact(&mut context).map_err(error)?;
    let start = SessionStart {
        agent: Some(opening.agent.to_owned()),
        voice: opening.voice,
        modalities: opening.modalities,
        model: opening.model,
        audio: opening.audio,
        context: Some(key.sign(&context)),
        ..Default::default()
    };
    let text = serde_json::to_string(&ClientMessage::SessionStart(start)).map_err(|e| error(e.to_string()))?;
    socket.send(Message::text(text)).await.map_err(|e| error(e.to_string()))?;
    Ok(socket)
}

/// The verified caller of the session `context` opens: its memory's `verifiedUser`, or the
/// one the handoff that brings it carries.
fn verified_caller(context: &SessionContext) -> Option<&serde_json::Value> {
    let handed = context.carried.handoff.as_ref().map(|handoff| &handoff.memory);
    [Some(&context.carried.memory), handed]
        .into_iter()
        .flatten()
        .find_map(|memory| memory.get(IDENTITY_KEY))
        .filter(|caller| !caller.is_null())
}

/// The identity assertion of `caller` in session `session_id` of Agent `namespace/agent`,
/// issued now ([`switchboard_core::assertion`]); none (logged) when it cannot be made (a
/// `verifiedUser` value too large for a header).
pub fn identity(
    key: &GatewaySigner,
    caller: &serde_json::Value,
    namespace: &str,
    agent: &str,
    session_id: &str,
) -> Option<String> {
    let claims = IdentityClaims::new(caller.clone(), namespace, agent, session_id, now_ms() / 1000);
    sign_identity(key, &claims)
        .inspect_err(
            |error| tracing::warn!(session_id = %session_id, %agent, "no identity assertion for tool servers: {error}"),
        )
        .ok()
}

/// Fits `context` into [`MAX_PAYLOAD_BYTES`], what a runtime reads: the oldest lines of the
/// conversation go first (the session's own, then those a handoff carries), and a line
/// says how many were left out. The memory stays whole: a context whose memory alone is
/// too large is refused here, with a message, rather than by the runtime.
pub fn compact(context: &mut SessionContext) -> Result<(), String> {
    let mut dropped = 0;
    loop {
        let size = serde_json::to_vec(context).map_err(|e| e.to_string())?.len();
        if size <= MAX_PAYLOAD_BYTES {
            if dropped > 0 {
                tracing::info!(session_id = %context.session_id, dropped, size, "the session's context was compacted to fit a runtime");
            }
            return Ok(());
        }
        let over = size - MAX_PAYLOAD_BYTES;
        let carried = &mut context.carried;
        let history = if carried.history.len() > 1 {
            &mut carried.history
        } else if let Some(handoff) = carried.handoff.as_mut().filter(|h| h.history.len() > 1) {
            &mut handoff.history
        } else {
            return Err(format!(
                "the session's context is {size} bytes without its conversation, more than a runtime reads \
                 ({MAX_PAYLOAD_BYTES}); its memory is too large to move"
            ));
        };
        dropped += drop_oldest(history, over);
    }
}

/// Drops the oldest lines of `history` (after a note of how many earlier ones are gone)
/// until about `over` bytes are freed; how many went.
fn drop_oldest(history: &mut Vec<HistoryTurn>, over: usize) -> usize {
    const NOTE: &str = "[Earlier lines of this conversation were left out to fit the session's size limit.]";
    let noted = history.first().is_some_and(|t| t.text == NOTE);
    let start = usize::from(noted);
    let (mut freed, mut count) = (0, 0);
    while freed < over + NOTE.len() && start + count + 1 < history.len() {
        freed += history[start + count].text.len() + 32;
        count += 1;
    }
    history.drain(start..start + count);
    if !noted {
        history
            .insert(0, HistoryTurn { role: switchboard_core::protocol::TranscriptRole::Assistant, text: NOTE.into() });
    }
    count
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use switchboard_core::protocol::TranscriptRole;

    use super::*;

    fn line(i: usize, size: usize) -> HistoryTurn {
        HistoryTurn { role: TranscriptRole::User, text: format!("{i:06} {}", "x".repeat(size)) }
    }

    #[test]
    fn a_context_over_the_limit_loses_its_oldest_lines_and_says_so() {
        let carried = Carried {
            memory: [("verifiedUser".to_owned(), serde_json::json!({"accountNumber": "12345678"}))].into(),
            history: (0..400).map(|i| line(i, 2000)).collect(),
            ..Default::default()
        };
        let mut context = SessionContext { session_id: "s".into(), carried, ..Default::default() };
        compact(&mut context).expect("fits");
        assert!(serde_json::to_vec(&context).expect("json").len() <= MAX_PAYLOAD_BYTES);
        let history = &context.carried.history;
        assert!(history[0].text.contains("left out"), "{}", history[0].text);
        assert!(history[1].text.len() > 2000 && history.last().expect("a line").text.starts_with("000399"));
        assert_eq!(context.carried.memory["verifiedUser"]["accountNumber"], "12345678", "memory stays whole");
        // Compacting again keeps one note.
        context.carried.history.extend((400..500).map(|i| line(i, 2000)));
        compact(&mut context).expect("fits");
        assert_eq!(context.carried.history.iter().filter(|t| t.text.contains("left out")).count(), 1);
        // A small context is left as it is.
        let carried = Carried { history: vec![line(1, 10)], ..Default::default() };
        let mut small = SessionContext { carried, ..Default::default() };
        compact(&mut small).expect("fits");
        assert_eq!(small.carried.history, vec![line(1, 10)]);
    }

    #[test]
    fn the_grant_asserts_the_caller_its_memory_or_handoff_holds_and_a_jwt_library_verifies_it() {
        use switchboard_core::handoff::{HandoffContext, HandoffKind, WorkflowSnapshot};

        let key = GatewaySigner::from_seed(&[7; 32]);
        let ada = serde_json::json!({"name": "Ada Lovelace", "accountNumber": "12345678"});
        let mut context = SessionContext {
            session_id: "gw-1".into(),
            namespace: "bank".into(),
            agent: "banking".into(),
            carried: Carried { memory: [("verifiedUser".to_owned(), ada.clone())].into(), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(verified_caller(&context), Some(&ada));
        let handoff = HandoffContext {
            from_agent: "idv".into(),
            kind: HandoffKind::Transfer,
            reason: "balance".into(),
            last_user_message: None,
            intent: None,
            verified_user: None,
            workflow_state: WorkflowSnapshot::default(),
            return_to: None,
            status: None,
            summary: None,
            memory: std::mem::take(&mut context.carried.memory),
            history: Vec::new(),
        };
        context.carried.handoff = Some(handoff);
        assert_eq!(verified_caller(&context), Some(&ada), "a handoff carries the memory");
        context.carried.handoff = None;
        assert_eq!(verified_caller(&context), None);

        // An independent JWT library accepts it with the published key, as a JWK.
        let token = identity(&key, &ada, "bank", "banking", "gw-1").expect("signed");
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.public().jwk()).expect("a JWK");
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).expect("an Ed25519 key");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
        validation.set_issuer(&[switchboard_core::assertion::ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        let claims =
            jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation).expect("verifies").claims;
        assert_eq!(claims["sub"], "12345678");
        assert_eq!(claims["verifiedUser"], ada);
        assert_eq!((claims["namespace"].as_str(), claims["agent"].as_str()), (Some("bank"), Some("banking")));
        assert_eq!(claims["sid"], "gw-1");
        let other: jsonwebtoken::jwk::Jwk =
            serde_json::from_value(GatewaySigner::from_seed(&[8; 32]).public().jwk()).expect("a JWK");
        let other = jsonwebtoken::DecodingKey::from_jwk(&other).expect("a key");
        assert!(jsonwebtoken::decode::<serde_json::Value>(&token, &other, &validation).is_err(), "another key");
    }

    #[test]
    fn memory_too_large_to_move_is_refused_with_a_message() {
        let huge = serde_json::json!("y".repeat(MAX_PAYLOAD_BYTES));
        let carried = Carried { memory: [("notes".to_owned(), huge)].into(), ..Default::default() };
        let mut context = SessionContext { carried, ..Default::default() };
        let error = compact(&mut context).expect_err("too large");
        assert!(error.contains("memory is too large to move"), "{error}");
    }
}
