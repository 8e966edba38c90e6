//! A call whose connection to the gateway drops mid-call goes on: the edge resumes its
//! session as any client of the protocol does (`session_start` with `resume_token` and
//! `last_seq`), through the gateway's URL — another replica when the one it was on is
//! shutting down (close 1001 after its drain) or is gone (the connection lost without a
//! close), the same one after a network blip. The phone never notices more than a gap in
//! the audio: the caller's audio during the gap is not heard, and what the agent said
//! meanwhile comes as the gateway's replay, before anything new.
//!
//! [`Position`] follows what the resume needs from every message the gateway sends: the
//! newest `resume_token` (each `bidi_connection_start` brings one) and the number of the
//! last message received (the start's `seq`, then one more for each message, reply audio
//! included, as the gateway numbers them). [`resume`] tries for
//! [`GatewayConfig::resume_for`]: at once, then after growing pauses; a refusal that says the
//! session is over (4410: the token is unknown, expired or spent; any other close before
//! the start) ends the call at once, a gateway that cannot be reached or is busy is tried
//! again until the time is up.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_sip::media::format::Format;
use tokio_tungstenite::tungstenite::Message;

use super::{GatewayConfig, Session, Socket, connect, session_start};

/// The longest pause between two tries.
const MOST_PAUSE: Duration = Duration::from_secs(1);
/// The first pause after a failed try (each next one twice as long, up to [`MOST_PAUSE`]).
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// Frames the gateway may send before the resumed session's `bidi_connection_start` (its
/// replay of what the call missed) that the edge keeps for the call; past it they are
/// dropped (a gap of a few seconds is a few hundred frames).
const MOST_EARLY: usize = 2_048;

/// Where a call's session stands for a resume.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// The newest `resume_token`.
    token: Option<String>,
    /// The number of the last message received, once a start gave one.
    last_seq: Option<u64>,
    /// A `bidi_connection_close` came: the session is over, not to be resumed.
    closing: bool,
}

impl Position {
    /// Where a session stands at its `bidi_connection_start`.
    pub fn start(token: Option<String>, seq: Option<u64>) -> Self {
        Self { token, last_seq: seq, closing: false }
    }

    /// A text message from the gateway (`None`: one the edge could not read, counted all
    /// the same).
    pub fn text(&mut self, message: Option<&ServerMessage>) {
        match message {
            Some(ServerMessage::BidiConnectionStart { resume_token, seq, .. }) => {
                if resume_token.is_some() {
                    self.token.clone_from(resume_token);
                }
                self.last_seq = seq.or(self.last_seq.map(|n| n + 1));
            }
            Some(ServerMessage::BidiConnectionClose { .. }) => {
                self.closing = true;
                self.count();
            }
            _ => self.count(),
        }
    }

    /// A binary frame (reply audio) from the gateway.
    pub fn binary(&mut self) {
        self.count();
    }

    fn count(&mut self) {
        if let Some(n) = &mut self.last_seq {
            *n += 1;
        }
    }

    /// Whether a lost connection should be resumed: the gateway gave a token, and has not
    /// said the session is closing.
    pub fn resumable(&self) -> bool {
        self.token.is_some() && !self.closing
    }

    /// The number of the last message received.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }
}

/// Whether a connection that ended with `close` (its code; `None`: no close frame, the
/// connection lost) is one to resume: lost, or the gateway going away (1001).
pub fn resumes_after(close: Option<u16>) -> bool {
    close.is_none_or(|code| code == close_code::GOING_AWAY)
}

/// A session resumed: the session (its position at the new start), and the frames the
/// gateway sent before its `bidi_connection_start` (for the call, in order, as if they came
/// after it: the replay of what the call missed).
#[derive(Debug)]
pub struct Resumed {
    pub session: Session,
    pub early: Vec<Message>,
}

/// Resumes the session at `position` (see the module docs); the error says why it cannot
/// be.
pub async fn resume(config: &GatewayConfig, position: &Position, format: Format) -> Result<Resumed, String> {
    let token = position.token.clone().ok_or("the gateway gave no resume token")?;
    let deadline = tokio::time::Instant::now() + config.resume_for;
    let mut pause = FIRST_PAUSE;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = tokio::time::timeout(config.open_timeout.min(left), once(config, &token, position, format));
        let why = match attempt.await {
            Ok(Ok(resumed)) => return Ok(resumed),
            Ok(Err(Try::Over(why))) => return Err(why),
            Ok(Err(Try::Again(why))) => why,
            Err(_) => format!("no answer within {:?}", config.open_timeout.min(left)),
        };
        let now = tokio::time::Instant::now();
        if now + pause >= deadline {
            return Err(format!("not resumed within {:?} ({tries} tries; the last: {why})", config.resume_for));
        }
        tracing::debug!(tries, why, "the session's resume will be tried again");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MOST_PAUSE);
    }
}

/// How one try ended, short of a resumed session.
enum Try {
    /// The session cannot be resumed (the gateway said so).
    Over(String),
    /// The gateway could not be reached, or had no room: try again.
    Again(String),
}

async fn once(config: &GatewayConfig, token: &str, position: &Position, format: Format) -> Result<Resumed, Try> {
    let mut socket: Socket = connect(config, Vec::new()).await.map_err(|refused| Try::Again(refused.to_string()))?;
    let start =
        SessionStart { resume_token: Some(token.to_owned()), last_seq: position.last_seq, ..session_start("", format) };
    let start = SessionStart { agent: None, ..start };
    let text = serde_json::to_string(&ClientMessage::SessionStart(start)).map_err(|e| Try::Over(e.to_string()))?;
    socket.send(Message::text(text)).await.map_err(|e| Try::Again(e.to_string()))?;
    let mut early = Vec::new();
    let mut said = String::new();
    while let Some(frame) = socket.next().await {
        match frame {
            Ok(Message::Text(text)) => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                Ok(ServerMessage::BidiConnectionStart { session_id, resume_token, seq, .. }) => {
                    let position = Position::start(resume_token.or_else(|| position.token.clone()), seq);
                    return Ok(Resumed { session: Session { socket, id: session_id, position }, early });
                }
                Ok(ServerMessage::BidiError { message, .. }) => said = message,
                _ if early.len() < MOST_EARLY => early.push(Message::Text(text)),
                _ => {}
            },
            Ok(Message::Binary(audio)) if early.len() < MOST_EARLY => early.push(Message::Binary(audio)),
            Ok(Message::Close(frame)) => {
                let (code, reason) =
                    frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
                let why = format!("close {code}: {}", if said.is_empty() { reason } else { said });
                return Err(match code {
                    close_code::TRY_AGAIN_LATER | close_code::NO_READY_POD | close_code::GOING_AWAY => Try::Again(why),
                    _ => Try::Over(why),
                });
            }
            Ok(_) => {}
            Err(error) => return Err(Try::Again(error.to_string())),
        }
    }
    Err(Try::Again("the gateway closed the connection without an answer".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(token: &str, seq: u64) -> ServerMessage {
        serde_json::from_str(&format!(
            r#"{{"type":"bidi_connection_start","session_id":"s","agent":"a","mode":"voice","model":"m","resume_token":"{token}","seq":{seq}}}"#
        ))
        .expect("a start")
    }

    #[test]
    fn the_position_counts_every_message_from_each_start_and_takes_the_newest_token() {
        let mut position = Position::default();
        assert!(!position.resumable(), "no token yet");
        position.text(Some(&start("t1", 4)));
        assert_eq!(position.last_seq(), Some(4));
        position.binary();
        position.text(None);
        position.text(Some(&ServerMessage::BidiInterruption {}));
        assert_eq!(position.last_seq(), Some(7), "audio, an unreadable text and a message: three");
        // A handoff's start brings a new token and its own number.
        position.text(Some(&start("t2", 9)));
        assert_eq!((position.token.as_deref(), position.last_seq()), (Some("t2"), Some(9)));
        assert!(position.resumable());
        position.text(Some(&ServerMessage::BidiConnectionClose { reason: "bye".into() }));
        assert_eq!(position.last_seq(), Some(10));
        assert!(!position.resumable(), "a session that is closing is not resumed");
    }

    #[test]
    fn only_a_lost_connection_or_a_gateway_going_away_is_resumed() {
        assert!(resumes_after(None));
        assert!(resumes_after(Some(close_code::GOING_AWAY)));
        for code in [close_code::NORMAL, close_code::INTERNAL, close_code::RESUME_REFUSED, close_code::IDLE_TIMEOUT] {
            assert!(!resumes_after(Some(code)), "{code}");
        }
    }
}
