//! `switchboard chat <url>`: a terminal chat client for the session protocol. Type a line
//! to send it; streamed replies, tool and handoff events are printed as they arrive; a
//! consent request is answered with `y` or `n`; `/quit` closes at once. At the end of
//! input (e.g. a piped script) the client waits until every line was answered and the
//! session has been quiet for a moment, then closes. A dropped connection is resumed
//! with the session's newest token; what was missed arrives first.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

/// How long the session must be quiet after the end of input before the client closes.
const QUIET: std::time::Duration = std::time::Duration::from_millis(500);

/// Options of `switchboard chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The session endpoint, e.g. ws://127.0.0.1:8080/v1/session (add ?agent=<name>, or use --agent).
    url: String,

    /// The agent to talk to (sent in session_start).
    #[arg(long)]
    agent: Option<String>,
}

/// The socket's two halves.
type Sink = futures_util::stream::SplitSink<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    Message,
>;
type Stream = futures_util::stream::SplitStream<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
>;

/// Pauses between attempts to get a dropped session back (about 30 s in all).
const RESUME_PAUSES_MS: [u64; 7] = [200, 500, 1000, 2000, 4000, 8000, 15000];

/// Connects and starts (or resumes) the session with `start`.
async fn open(url: &str, start: SessionStart) -> anyhow::Result<(Sink, Stream)> {
    let (socket, _) =
        tokio_tungstenite::connect_async(url).await.with_context(|| format!("cannot connect to {url}"))?;
    let (mut sink, stream) = socket.split();
    sink.send(Message::text(serde_json::to_string(&ClientMessage::SessionStart(start))?)).await?;
    Ok((sink, stream))
}

/// Gets the session back after its connection dropped: connects again and resumes with
/// the newest token and the number of the last message received, pausing between tries.
async fn resume(url: &str, token: &str, last_seq: u64) -> anyhow::Result<(Sink, Stream)> {
    let start =
        || SessionStart { resume_token: Some(token.to_owned()), last_seq: Some(last_seq), ..SessionStart::default() };
    let mut failure = None;
    for pause in RESUME_PAUSES_MS {
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        match open(url, start()).await {
            Ok(opened) => return Ok(opened),
            Err(error) => failure = Some(error),
        }
    }
    Err(failure.unwrap_or_else(|| anyhow::anyhow!("no attempt made")).context("the session could not be resumed"))
}

/// Chats until `/quit`, end of input, or the server closes. A connection that drops (no
/// close, or the gateway's "resume with your token") is resumed: the messages missed
/// arrive first, and lines typed meanwhile are sent once the session is back.
pub async fn run(args: ChatArgs) -> anyhow::Result<()> {
    let ChatArgs { url, agent } = args;
    let (mut sink, mut stream) = open(&url, SessionStart { agent, ..SessionStart::default() }).await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut pending_consent: Option<String> = None;
    let mut input_open = true;
    let mut unanswered = 0usize;
    let mut in_turn = 0i64;
    let mut closing = false;
    // The newest resume token and the number of the last message received.
    let mut position: Option<(String, u64)> = None;
    // Lines typed while the session was being resumed.
    let mut queued: Vec<ClientMessage> = Vec::new();
    // Resumes in a row that ended before the session was back (1013: try again).
    let mut retries = 0usize;
    let live = std::io::stdout().is_terminal();
    loop {
        let quiet = tokio::time::sleep(QUIET);
        let dropped = tokio::select! {
            () = quiet, if !input_open && !closing && unanswered == 0 && in_turn <= 0 && pending_consent.is_none() => {
                sink.send(Message::text(serde_json::to_string(&ClientMessage::Close {})?)).await?;
                closing = true;
                false
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    match serde_json::from_str::<ServerMessage>(text.as_str()) {
                        Ok(message) => {
                            match &message {
                                ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } => {
                                    position = Some((token.clone(), *seq));
                                    retries = 0;
                                    for message in queued.drain(..) {
                                        sink.send(Message::text(serde_json::to_string(&message)?)).await?;
                                    }
                                }
                                ServerMessage::ConsentRequest { tool_use_id, .. } => pending_consent = Some(tool_use_id.clone()),
                                // The chat client runs no client tools: it says so at once
                                // rather than leave the agent waiting.
                                ServerMessage::ClientToolCall { tool_use_id, name, .. } => {
                                    let answer = ClientMessage::ClientToolResult {
                                        tool_use_id: tool_use_id.clone(),
                                        result: None,
                                        error: Some(format!("the chat client has no handler for the tool {name}")),
                                    };
                                    sink.send(Message::text(serde_json::to_string(&answer)?)).await?;
                                }
                                ServerMessage::BidiResponseStart { .. } => in_turn += 1,
                                ServerMessage::BidiResponseComplete { .. } => {
                                    in_turn -= 1;
                                    unanswered = unanswered.saturating_sub(1);
                                }
                                _ => {}
                            }
                            if !matches!(message, ServerMessage::BidiConnectionStart { .. }) && let Some((_, seq)) = position.as_mut() {
                                *seq += 1;
                            }
                            print_message(&message, live);
                        }
                        Err(_) => {
                            if let Some((_, seq)) = position.as_mut() { *seq += 1; }
                            println!("[server] {text}");
                        }
                    }
                    false
                }
                Some(Ok(Message::Binary(_))) => {
                    if let Some((_, seq)) = position.as_mut() { *seq += 1; }
                    false
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
                    // The gateway restarting (1001) or asking to try again (1013) lets the
                    // session be resumed; any other close ends it.
                    let again = matches!(code, 1001 | 1013) && !closing && position.is_some() && retries < RESUME_PAUSES_MS.len();
                    if !again {
                        println!("[closed {code}: {reason}]");
                        return Ok(());
                    }
                    true
                }
                Some(Ok(_)) => false,
                Some(Err(_)) | None if closing => return Ok(()),
                Some(Err(e)) if position.is_none() => anyhow::bail!("connection failed: {e}"),
                Some(Err(_)) | None => position.is_some() || return Ok(()),
            },
            line = lines.next_line(), if input_open => {
                let Some(line) = line? else {
                    input_open = false;
                    continue;
                };
                let line = line.trim().to_owned();
                if line.is_empty() { continue; }
                let message = if line == "/quit" {
                    ClientMessage::Close {}
                } else if let Some(id) = pending_consent.take() {
                    let approved = matches!(line.to_lowercase().as_str(), "y" | "yes");
                    ClientMessage::ToolConsent { tool_use_id: id, approved }
                } else {
                    unanswered += 1;
                    ClientMessage::BidiTextInput { text: line, id: None }
                };
                match sink.send(Message::text(serde_json::to_string(&message)?)).await {
                    Ok(()) => false,
                    Err(_) if position.is_some() => {
                        queued.push(message);
                        true
                    }
                    Err(e) => anyhow::bail!("connection failed: {e}"),
                }
            }
        };
        if dropped && let Some((token, last_seq)) = &position {
            println!("[connection lost; resuming the session]");
            retries += 1;
            (sink, stream) = resume(&url, token, *last_seq).await?;
        }
    }
}

/// Prints one server message. With `live` (stdout is a terminal) reply deltas stream as
/// they arrive and the final text redraws their line; otherwise (piped) only the final
/// text is printed, without terminal control codes.
fn print_message(message: &ServerMessage, live: bool) {
    let mut out = std::io::stdout();
    match message {
        ServerMessage::BidiConnectionStart { agent, session_id, .. } => {
            println!("[connected to {agent}, session {session_id}]")
        }
        ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, text, delta: true, .. } => {
            if live {
                let _ = write!(out, "{text}");
                let _ = out.flush();
            }
        }
        ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, text, is_final: true, .. } => {
            if live {
                println!("\r\x1b[2K< {text}");
            } else {
                println!("< {text}");
            }
        }
        ServerMessage::BidiTranscriptStream { .. } | ServerMessage::BidiResponseStart { .. } => {}
        ServerMessage::BidiResponseComplete { .. } => {}
        ServerMessage::BidiUsage { input_tokens, output_tokens, .. } => {
            println!("  [tokens: {input_tokens} in, {output_tokens} out]")
        }
        ServerMessage::ToolStart { name, input, description, .. } => match description {
            Some(description) => println!("  [tool {name}: {description}]\n  input: {input}"),
            None => println!("  [tool {name} {input}]"),
        },
        ServerMessage::ToolProgress { name, message, .. } => println!("  [tool {name}: {message}]"),
        ServerMessage::ToolComplete { name, result, cached, duration_ms, .. } => {
            let took = if *cached { " (cached)".to_owned() } else { format!(" ({duration_ms} ms)") };
            println!("  [tool {name} -> {result}{took}]");
        }
        ServerMessage::ToolError { name, kind, message, user_message, suggestion, .. } => {
            println!("  [tool {name} failed ({kind}): {message}]");
            if !user_message.is_empty() {
                println!("  [{user_message} {suggestion}]");
            }
        }
        ServerMessage::ConsentRequest { name, description, input, .. } => {
            println!("  [consent] {name}: {description}\n  input: {input}\n  Allow it? (y/n)");
        }
        ServerMessage::ClientToolCall { name, input, .. } => {
            println!("  [client tool {name} asked with {input}: this client has no handler]")
        }
        ServerMessage::DisplayCard { card, .. } => {
            println!("  [card] {}", card.title);
            if !card.text.is_empty() {
                println!("    {}", card.text);
            }
            for field in &card.fields {
                println!("    {}: {}", field.label, field.value);
            }
            if let Some(link) = &card.link {
                println!("    {} <{}>", if link.label.is_empty() { "link" } else { &link.label }, link.url);
            }
        }
        ServerMessage::Handoff { from, to, kind, .. } => println!("  [handoff {kind:?}: {from} -> {to}]"),
        ServerMessage::MemoryUpdate { key, value } => println!("  [memory {key} = {value}]"),
        ServerMessage::WorkflowTransition { from, to, by } => println!("  [step {from} -> {to} ({by})]"),
        ServerMessage::WorkflowLine { node, played, .. } => println!("  [line of {node}: {}]", played.as_str()),
        ServerMessage::BidiError { message, code, .. } => println!("  [error {code}: {message}]"),
        ServerMessage::BidiSessionQueued { position, estimated_wait_seconds, message, .. } => {
            println!("[waiting for a free line: position {position}, about {estimated_wait_seconds} s]");
            if !message.is_empty() {
                println!("[{message}]");
            }
        }
        ServerMessage::BidiSessionFallback { agent, message, person, retry_after_seconds, .. } => {
            println!("[{agent} is in outage mode: {message}]");
            if let Some(person) = person {
                println!("[reach {} at {}]", person.name, person.address);
            }
            if let Some(seconds) = retry_after_seconds {
                println!("[try again in about {seconds} s]");
            }
        }
        ServerMessage::BidiSessionOutage { agent, active: true, message, person, cause, text_only } => {
            let why = if cause == "breaker" { "its model service is failing" } else { "an operator switched it on" };
            if *text_only {
                println!("[{agent} is in outage mode ({why}): this session is served in text only: {message}]");
            } else {
                println!("[{agent} is in outage mode ({why}); this session goes on: {message}]");
            }
            if let Some(person) = person {
                println!("[or reach {} at {}]", person.name, person.address);
            }
        }
        ServerMessage::BidiSessionOutage { agent, active: false, .. } => {
            println!("[{agent} is out of outage mode again]")
        }
        ServerMessage::BidiConnectionClose { reason } => println!("[session closed: {reason}]"),
        ServerMessage::BidiConnectionDraining { seconds } => {
            println!("  [the server shuts down within {seconds} s; reconnect when convenient]")
        }
        // The chat client is text only: it does not ask for audio (nor show speech or state).
        ServerMessage::BidiAudioStream { .. }
        | ServerMessage::BidiSpeechStarted {}
        | ServerMessage::BidiSpeechStopped {}
        | ServerMessage::BidiSessionState { .. } => {}
        ServerMessage::BidiInterruption {} => println!("  [interrupted]"),
        ServerMessage::BidiSessionUpdated { voice, modalities } => {
            let voice = voice.iter().map(|v| format!(" voice {v}"));
            let modalities = modalities.iter().map(|m| format!(" modalities {}", m.join(", ")));
            println!("  [updated:{}]", voice.chain(modalities).collect::<String>());
        }
        ServerMessage::BidiConnectionRestart { reason, .. } => println!("  [model stream restarted: {reason}]"),
        // A text chat cannot put anyone through: the transfer ends unanswered after its
        // timeout, and the agent says so.
        ServerMessage::TransferRequest { person, address, .. } => {
            println!("  [the agent asks to put you through to {person} ({address}); this client cannot transfer]")
        }
        // Offered on phone calls only: a chat never gets one from a gateway.
        ServerMessage::DigitsRequest { digits, .. } => {
            println!("  [the agent asks to press {digits} on the call; this client has no keypad]")
        }
    }
}
