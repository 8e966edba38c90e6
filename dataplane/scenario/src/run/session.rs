//! One scenario's session as a client of the session protocol: connecting, the opening,
//! each step's turn (the caller's text, speech or keys sent, consent requests answered,
//! messages read until the turn ends and settles), and a polite close.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, StopReason, close_code};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{Connection, KEY_GAP, OPENING_QUIET, RunError, SETTLE, START_PATIENCE, START_PAUSE};
use crate::file::{ConsentAnswer, ConsentExpect, Scenario};
use crate::observe::{self, ConsentSeen, Event, SessionView, Turn, TurnEnd};
use crate::speech;

/// What the caller sends in a step.
pub(super) enum Input {
    /// Typed text.
    Text(String),
    /// Speech: 16 kHz PCM16, trailing silence included.
    Audio(Vec<u8>),
    /// Keys pressed on a keypad (checked: [`switchboard_core::dtmf::check`]).
    Keys(String),
}

/// One session's connection and what it has seen.
pub(super) struct Session {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    view: SessionView,
    closed: Option<(u16, String)>,
}

/// What one read gave.
enum Read {
    Message(Event),
    Closed(u16, String),
    Quiet,
}

impl Session {
    /// Opens the scenario's session and reads its opening. A start the gateway refuses for want
    /// of a ready pod, or whose agent under test its live pods serve, is tried again within
    /// [`START_PATIENCE`].
    pub(super) async fn open(
        scenario: &Scenario,
        connection: &Connection,
        patience: Duration,
    ) -> Result<(Self, Turn), RunError> {
        // Speech needs a session with audio: over (simulated) Nova Sonic for voice and hybrid agents.
        let speaks = scenario.steps.iter().any(|s| s.speech.is_some() || s.audio.is_some());
        let modalities = if speaks { vec!["audio".to_owned(), "text".to_owned()] } else { Vec::new() };
        let greeting = scenario.opening.as_ref().is_some_and(|o| o.transcript.is_some());
        let given_up = Instant::now() + START_PATIENCE;
        loop {
            let mut session = Self::connect(connection).await?;
            let start = SessionStart {
                agent: scenario.agent.clone(),
                modalities: modalities.clone(),
                candidate: !connection.candidates.is_empty(),
                ..Default::default()
            };
            session.send(&ClientMessage::SessionStart(start)).await?;
            let opening = session.opening(patience, greeting).await?;
            let no_pod = matches!(opening.end, TurnEnd::Closed { code: close_code::NO_READY_POD, .. });
            if !(no_pod || session.view.off_candidate.is_some()) || Instant::now() >= given_up {
                return Ok((session, opening));
            }
            session.close().await;
            tokio::time::sleep(START_PAUSE).await;
        }
    }

    /// What the session has seen so far.
    pub(super) fn view(&self) -> &SessionView {
        &self.view
    }

    /// How the server closed the session, if it did.
    pub(super) fn closed(&self) -> Option<&(u16, String)> {
        self.closed.as_ref()
    }

    async fn connect(connection: &Connection) -> Result<Self, RunError> {
        let mut request = connection
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| RunError::Request(format!("{}: {e}", connection.url)))?;
        if let Some(key) = &connection.api_key {
            let value = format!("Bearer {key}")
                .parse()
                .map_err(|_| RunError::Request("the API key is not a valid header value".into()))?;
            request.headers_mut().insert("authorization", value);
        }
        let (ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|source| RunError::Connect { url: connection.url.clone(), source: Box::new(source) })?;
        let view = SessionView::new(connection.entries.clone(), connection.candidates.clone());
        Ok(Self { ws, view, closed: None })
    }

    async fn send(&mut self, message: &ClientMessage) -> Result<(), RunError> {
        let text = serde_json::to_string(message).map_err(|e| RunError::Request(e.to_string()))?;
        self.ws.send(Message::text(text)).await.map_err(|e| RunError::Send(Box::new(e)))
    }

    /// The next message, or `Quiet` when none came by `until`.
    async fn read(&mut self, began: Instant, until: Instant) -> Result<Read, RunError> {
        loop {
            let frame = match tokio::time::timeout_at(until, self.ws.next()).await {
                Err(_) => return Ok(Read::Quiet),
                Ok(frame) => frame,
            };
            let at = began.elapsed();
            let (code, reason) = match frame {
                Some(Ok(Message::Text(text))) => {
                    let (message, raw) = observe::parse(text.as_str())?;
                    if let Some(message) = &message {
                        self.view.observe(message);
                    }
                    return Ok(Read::Message(Event { at, message, raw }));
                }
                Some(Ok(Message::Close(frame))) => {
                    frame.map_or((1005, String::new()), |f| (u16::from(f.code), f.reason.to_string()))
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => (1006, e.to_string()),
                None => (1006, "the connection ended".to_owned()),
            };
            self.closed = Some((code, reason.clone()));
            return Ok(Read::Closed(code, reason));
        }
    }

    /// Reads the session's opening: its `bidi_connection_start`, then until quiet — and,
    /// with `greeting`, not before the agent's first complete message (or `patience`).
    async fn opening(&mut self, patience: Duration, greeting: bool) -> Result<Turn, RunError> {
        let began = Instant::now();
        let deadline = began + patience;
        let mut turn = Turn::new("");
        let mut until = deadline;
        loop {
            match self.read(began, until).await? {
                Read::Message(event) => {
                    turn.events.push(event);
                    let waiting = greeting && turn.first_text().is_none();
                    if self.view.agent.is_some() && !waiting {
                        until = (Instant::now() + OPENING_QUIET).min(deadline);
                    }
                }
                Read::Closed(code, reason) => {
                    turn.end = TurnEnd::Closed { code, reason };
                    return Ok(turn);
                }
                Read::Quiet if self.view.agent.is_none() => {
                    turn.end = TurnEnd::TimedOut(patience);
                    return Ok(turn);
                }
                Read::Quiet => return Ok(turn),
            }
        }
    }

    /// Sends `input` (as the report calls it, `said`) and reads the turn, answering consent
    /// requests as `consent` lists. Audio goes as binary frames of raw PCM, [`speech::CHUNK_MS`]
    /// each, at four times real time; keys as one `bidi_dtmf` each, [`KEY_GAP`] apart; the
    /// turn's clock starts once the last frame or key is sent.
    ///
    /// `keys_on_tool`: keys pressed once the turn's first `tool_start` arrives (a tool whose
    /// input is typed on the keypad starts, then waits for them).
    pub(super) async fn turn(
        &mut self,
        input: Input,
        said: &str,
        consent: &[ConsentExpect],
        keys_on_tool: Option<&str>,
        patience: Duration,
    ) -> Result<Turn, RunError> {
        let mut keys_on_tool = keys_on_tool;
        match input {
            Input::Text(text) => self.send(&ClientMessage::BidiTextInput { text, id: None }).await?,
            Input::Audio(pcm) => {
                let chunk =
                    usize::try_from(speech::CHUNK_MS * u64::from(speech::INPUT_RATE) / 1000 * 2).unwrap_or(3200);
                for frame in pcm.chunks(chunk) {
                    self.ws.send(Message::binary(frame.to_vec())).await.map_err(|e| RunError::Send(Box::new(e)))?;
                    tokio::time::sleep(Duration::from_millis(speech::CHUNK_MS / 4)).await;
                }
            }
            Input::Keys(keys) => self.press(&keys).await?,
        }
        let began = Instant::now();
        let deadline = began + patience;
        let mut turn = Turn::new(said);
        let mut answering = false;
        let mut handing_off = false;
        let mut settled_from: Option<Instant> = None;
        loop {
            let until = settled_from.map_or(deadline, |at| (at + SETTLE).min(deadline));
            let event = match self.read(began, until).await? {
                Read::Message(event) => event,
                Read::Closed(code, reason) => {
                    turn.ended_at = Some(began.elapsed());
                    turn.end = TurnEnd::Closed { code, reason };
                    return Ok(turn);
                }
                Read::Quiet if settled_from.is_some() => return Ok(turn),
                Read::Quiet => {
                    turn.end = TurnEnd::TimedOut(patience);
                    return Ok(turn);
                }
            };
            let at = event.at;
            let mut ends = false;
            match &event.message {
                Some(ServerMessage::BidiResponseStart { .. }) => {
                    answering = true;
                    settled_from = None;
                }
                Some(ServerMessage::BidiResponseComplete { stop_reason, .. }) => {
                    answering = false;
                    handing_off = *stop_reason == StopReason::Handoff;
                    ends = !handing_off;
                }
                Some(ServerMessage::BidiError { recoverable, .. }) => ends = !recoverable || !answering,
                Some(ServerMessage::BidiConnectionRestart { .. }) => ends = handing_off && !answering,
                Some(ServerMessage::ToolStart { .. }) => {
                    if let Some(keys) = keys_on_tool.take() {
                        self.press(keys).await?;
                    }
                }
                Some(ServerMessage::ConsentRequest { tool_use_id, name, .. }) => {
                    let answer = consent
                        .get(turn.consents.len())
                        .filter(|c| &c.tool == name)
                        .map_or(ConsentAnswer::Deny, |c| c.answer);
                    turn.consents.push(ConsentSeen { tool: name.clone(), answer });
                    let approved = answer == ConsentAnswer::Allow;
                    self.send(&ClientMessage::ToolConsent { tool_use_id: tool_use_id.clone(), approved }).await?;
                }
                _ => {}
            }
            if ends {
                turn.ended_at = Some(at);
                settled_from = Some(Instant::now());
            }
            turn.events.push(event);
        }
    }

    /// Presses `keys` as a phone's keypad does through the SIP edge: one `bidi_dtmf` a key,
    /// [`KEY_GAP`] apart.
    async fn press(&mut self, keys: &str) -> Result<(), RunError> {
        for (i, key) in keys.chars().enumerate() {
            if i > 0 {
                tokio::time::sleep(KEY_GAP).await;
            }
            self.send(&ClientMessage::BidiDtmf { digits: key.to_string() }).await?;
        }
        Ok(())
    }

    /// Ends the session politely; the server's answer is not waited for long.
    pub(super) async fn close(mut self) {
        let _ = self.send(&ClientMessage::Close {}).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.ws.close(None)).await;
    }
}
