//! `switchboard chat <url>`: a terminal chat client for the session protocol. Type a line
//! to send it; streamed replies, tool and handoff events are printed as they arrive; a
//! consent request is answered with `y` or `n`; `/quit` closes at once. At the end of
//! input (e.g. a piped script) the client waits until every line was answered and the
//! session has been quiet for a moment, then closes.

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

/// Chats until `/quit`, end of input, or the server closes.
pub async fn run(args: ChatArgs) -> anyhow::Result<()> {
    let ChatArgs { url, agent } = args;
    let (socket, _) =
        tokio_tungstenite::connect_async(url.as_str()).await.with_context(|| format!("cannot connect to {url}"))?;
    let (mut sink, mut stream) = socket.split();
    let start = ClientMessage::SessionStart(SessionStart { agent, ..SessionStart::default() });
    sink.send(Message::text(serde_json::to_string(&start)?)).await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut pending_consent: Option<String> = None;
    let mut input_open = true;
    let mut unanswered = 0usize;
    let mut in_turn = 0i64;
    let mut closing = false;
    let live = std::io::stdout().is_terminal();
    loop {
        let quiet = tokio::time::sleep(QUIET);
        tokio::select! {
            () = quiet, if !input_open && !closing && unanswered == 0 && in_turn <= 0 && pending_consent.is_none() => {
                sink.send(Message::text(serde_json::to_string(&ClientMessage::Close {})?)).await?;
                closing = true;
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                    Ok(message) => {
                        match &message {
                            ServerMessage::ConsentRequest { tool_use_id, .. } => pending_consent = Some(tool_use_id.clone()),
                            ServerMessage::BidiResponseStart { .. } => in_turn += 1,
                            ServerMessage::BidiResponseComplete { .. } => {
                                in_turn -= 1;
                                unanswered = unanswered.saturating_sub(1);
                            }
                            _ => {}
                        }
                        print_message(&message, live);
                    }
                    Err(_) => println!("[server] {text}"),
                },
                Some(Ok(Message::Close(frame))) => {
                    if let Some(frame) = frame { println!("[closed {}: {}]", u16::from(frame.code), frame.reason); }
                    return Ok(());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("connection failed: {e}"),
                None => return Ok(()),
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
                sink.send(Message::text(serde_json::to_string(&message)?)).await?;
            }
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
        ServerMessage::Handoff { from, to, kind, .. } => println!("  [handoff {kind:?}: {from} -> {to}]"),
        ServerMessage::MemoryUpdate { key, value } => println!("  [memory {key} = {value}]"),
        ServerMessage::WorkflowTransition { from, to, by } => println!("  [step {from} -> {to} ({by})]"),
        ServerMessage::BidiError { message, code, .. } => println!("  [error {code}: {message}]"),
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
    }
}
