//! Speak first: a new voice session whose Persona has a `greeting` and `speakFirst: true`
//! opens with the agent saying the greeting aloud, before the caller says anything.
//!
//! The core greets every new session with a final assistant line (and its record entry).
//! Here that line is held back ([`Greeting::take`]) while Nova Sonic is asked to say the
//! greeting ([`switchboard_models::sonic::speak_first_prompt`]); its audio and SPECULATIVE
//! text reach the client as any reply's do, and the held line follows when the model's
//! FINAL text of it arrives — with the words the model said — so the client sees the
//! greeting like every other reply: deltas and audio, then the final line. The model's
//! FINAL text does not reach the core a second time. Should the greeting end another way
//! (the caller speaks over it, the completion ends, a tool is called), the held line is
//! sent then, as configured. An echo of the instruction as a USER transcript is dropped:
//! the caller did not say it.
//!
//! After a transfer the receiving agent greets too when its Persona speaks first (the core
//! puts its greeting line before the carried request): its stream says the greeting in
//! its own voice first, and the carried request ([`VoiceEffect::SendText`]) is held too
//! and sent into the stream once the greeting's reply has ended, so the model answers it
//! after the greeting rather than over it. The greeting's end does not close the core's
//! turn (it is the carried request's). Should the caller speak over the greeting, their
//! words are the request: the held one is dropped (it is still in the system prompt's
//! handoff context). Resumed sessions and returns get no greeting line from the core, so
//! they do not speak first.

use switchboard_core::protocol::{ServerMessage, StopReason, TranscriptRole};
use switchboard_core::{Effect, Input, VoiceEffect, VoiceInput};
use switchboard_models::sonic::SPEAK_FIRST_PREFIX;

/// A greeting being spoken, and its transcript line held until it has been said.
#[derive(Debug, Default)]
pub struct Greeting {
    /// The greeting as configured (what the model is asked to say).
    text: String,
    /// The core's final line and record entry of the greeting; empty once sent.
    held: Vec<Effect>,
    /// After a transfer: the carried request, sent into the stream once the greeting's
    /// reply has ended.
    request: Vec<Effect>,
}

impl Greeting {
    /// For a new session whose opening line is `spoken` ([`Session::spoken_opening`]: the
    /// greeting of a Persona that speaks first, or the message left on a machine): when the
    /// core's opening `effects` say it, takes its final line and record entry out of them.
    ///
    /// [`Session::spoken_opening`]: switchboard_core::Session::spoken_opening
    pub fn take(spoken: Option<&str>, effects: &mut Vec<Effect>) -> Option<Self> {
        let greeting = spoken.filter(|g| !g.trim().is_empty())?;
        let line = effects.iter().position(|effect| {
            matches!(effect, Effect::Send(ServerMessage::BidiTranscriptStream {
                role: TranscriptRole::Assistant, is_final: true, text, ..
            }) if text == greeting)
        })?;
        let mut held = vec![effects.remove(line)];
        let entry = effects.get(line).is_some_and(|effect| {
            matches!(effect, Effect::Transcript(entry)
                if entry.event == "assistant" && entry.data.get("text").and_then(|t| t.as_str()) == Some(greeting))
        });
        if entry {
            held.push(effects.remove(line));
        }
        let (request, rest) =
            std::mem::take(effects).into_iter().partition(|e| matches!(e, Effect::Voice(VoiceEffect::SendText(_))));
        *effects = rest;
        Some(Self { text: greeting.to_owned(), held, request })
    }

    /// What the model is asked to say.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the greeting's line or a carried request is still held (the greeting is
    /// being spoken).
    pub fn pending(&self) -> bool {
        !self.held.is_empty() || !self.request.is_empty()
    }

    /// An input from the model while the greeting may be under way: the effects to perform
    /// first, and whether `input` still goes to the core.
    pub fn on_input(&mut self, input: &Input) -> (Vec<Effect>, bool) {
        if !self.request.is_empty() {
            match input {
                // The greeting's reply is over: the model answers the request next. This end
                // is not the end of the request's turn.
                Input::Voice(VoiceInput::CompletionEnd { stop_reason }) if *stop_reason != StopReason::Interrupted => {
                    return (self.release_request(), false);
                }
                // A tool called instead of greeting: the request goes in now.
                Input::Voice(VoiceInput::ToolUse(_)) => return (self.release_request(), true),
                Input::Voice(VoiceInput::UserFinal(heard)) if is_echo(heard) => return (Vec::new(), false),
                // The caller spoke over the greeting: what they say is their request.
                Input::Voice(VoiceInput::UserFinal(_))
                | Input::Voice(VoiceInput::Interrupted)
                | Input::Voice(VoiceInput::CompletionEnd { .. }) => {
                    self.request.clear();
                }
                _ => {}
            }
        }
        if self.held.is_empty() {
            return (Vec::new(), true);
        }
        match input {
            Input::Voice(VoiceInput::AssistantFinal(said)) => {
                let said = said.trim();
                let mut held = std::mem::take(&mut self.held);
                if !said.is_empty() {
                    for effect in &mut held {
                        match effect {
                            Effect::Send(ServerMessage::BidiTranscriptStream { text, .. }) => said.clone_into(text),
                            Effect::Transcript(entry) => entry.data = serde_json::json!({ "text": said }),
                            _ => {}
                        }
                    }
                }
                (held, false)
            }
            Input::Voice(VoiceInput::UserFinal(heard)) if is_echo(heard) => (Vec::new(), false),
            Input::Voice(VoiceInput::UserFinal(_))
            | Input::Voice(VoiceInput::Interrupted)
            | Input::Voice(VoiceInput::CompletionEnd { .. })
            | Input::Voice(VoiceInput::ToolUse(_)) => (std::mem::take(&mut self.held), true),
            _ => (Vec::new(), true),
        }
    }

    /// The greeting's line if still held, then the carried request.
    fn release_request(&mut self) -> Vec<Effect> {
        let mut effects = std::mem::take(&mut self.held);
        effects.append(&mut self.request);
        effects
    }
}

/// The model's echo of the instruction to speak first, as a USER transcript.
fn is_echo(heard: &str) -> bool {
    heard.contains(SPEAK_FIRST_PREFIX.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::TranscriptEntry;
    use switchboard_crds::persona::PersonaSpec;

    const HELLO: &str = "Hello, you're through to Example Bank.";

    fn spec(speak_first: bool, greeting: Option<&str>) -> PersonaSpec {
        PersonaSpec {
            display_name: "Ava".into(),
            system_prompt: "You are {name}.".into(),
            voice: "tiffany".into(),
            language: "en-GB".into(),
            greeting: greeting.map(str::to_owned),
            speak_first,
            response_style: Default::default(),
            turn_taking: Default::default(),
            languages: Vec::new(),
        }
    }

    fn line(text: &str) -> Effect {
        Effect::Send(ServerMessage::BidiTranscriptStream {
            role: TranscriptRole::Assistant,
            text: text.into(),
            delta: false,
            is_final: true,
            input_id: None,
        })
    }

    fn entry(text: &str) -> Effect {
        Effect::Transcript(TranscriptEntry {
            session_id: "s".into(),
            agent: "triage".into(),
            event: "assistant".into(),
            data: serde_json::json!({ "text": text }),
        })
    }

    /// What the core's session would ask to say first, for a Persona (no machine).
    fn spoken(persona: &PersonaSpec) -> Option<&str> {
        persona.greeting.as_deref().filter(|g| persona.speak_first && !g.trim().is_empty())
    }

    fn opening() -> Vec<Effect> {
        vec![Effect::Send(ServerMessage::BidiInterruption {}), line(HELLO), entry(HELLO)]
    }

    #[test]
    fn a_persona_that_speaks_first_has_its_greeting_line_held_until_the_model_said_it() {
        let mut effects = opening();
        let mut greeting = Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).expect("speaks first");
        assert_eq!(effects, vec![Effect::Send(ServerMessage::BidiInterruption {})]);
        assert_eq!(greeting.text(), HELLO);
        assert_eq!(
            greeting.on_input(&Input::Voice(VoiceInput::Activity(switchboard_core::Activity::ReplyAudioStarted))).0,
            vec![]
        );
        let echo = Input::Voice(VoiceInput::UserFinal(switchboard_models::sonic::speak_first_prompt(HELLO)));
        assert_eq!(greeting.on_input(&echo), (vec![], false), "the instruction's echo is not the caller's");
        let said = "Hello, you are through to Example Bank.";
        let (held, pass) = greeting.on_input(&Input::Voice(VoiceInput::AssistantFinal(said.into())));
        assert_eq!((held, pass), (vec![line(said), entry(said)], false));
        assert!(!greeting.pending());
        let after = Input::Voice(VoiceInput::AssistantFinal("Anything else?".into()));
        assert_eq!(greeting.on_input(&after), (vec![], true), "later replies go to the core");
    }

    #[test]
    fn a_greeting_cut_short_is_shown_as_configured_and_the_input_still_counts() {
        let mut effects = opening();
        let mut greeting = Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).expect("speaks first");
        let end = Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::Interrupted });
        assert_eq!(greeting.on_input(&end), (vec![line(HELLO), entry(HELLO)], true));
        assert_eq!(greeting.on_input(&Input::Voice(VoiceInput::Interrupted)), (vec![], true));
    }

    /// After a transfer: the greeting line, then the turn of the carried request.
    fn arrival() -> Vec<Effect> {
        let mut effects = opening();
        effects.push(Effect::Send(ServerMessage::BidiResponseStart { turn: 1 }));
        effects.push(Effect::Voice(VoiceEffect::SendText(ASK.into())));
        effects
    }

    const ASK: &str = "I'd like to check my balance";

    #[test]
    fn after_a_transfer_the_carried_request_goes_in_once_the_greeting_was_said() {
        let mut effects = arrival();
        let mut greeting = Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).expect("speaks first");
        let start = Effect::Send(ServerMessage::BidiResponseStart { turn: 1 });
        assert_eq!(effects, vec![Effect::Send(ServerMessage::BidiInterruption {}), start]);
        let echo = Input::Voice(VoiceInput::UserFinal(switchboard_models::sonic::speak_first_prompt(HELLO)));
        assert_eq!(greeting.on_input(&echo), (vec![], false));
        let (held, pass) = greeting.on_input(&Input::Voice(VoiceInput::AssistantFinal(HELLO.into())));
        assert_eq!((held, pass), (vec![line(HELLO), entry(HELLO)], false));
        assert!(greeting.pending(), "the request still waits for the greeting's end");
        let end = Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn });
        let (sent, pass) = greeting.on_input(&end);
        assert_eq!(sent, vec![Effect::Voice(VoiceEffect::SendText(ASK.into()))]);
        assert!(!pass, "the greeting's end does not close the request's turn");
        assert!(!greeting.pending());
        assert_eq!(greeting.on_input(&end), (vec![], true), "the answer's end closes it");
    }

    #[test]
    fn a_caller_who_speaks_over_the_greeting_after_a_transfer_replaces_the_carried_request() {
        let mut effects = arrival();
        let mut greeting = Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).expect("speaks first");
        assert_eq!(greeting.on_input(&Input::Voice(VoiceInput::Interrupted)), (vec![line(HELLO), entry(HELLO)], true));
        assert!(!greeting.pending(), "the carried request is dropped");
        let end = Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::Interrupted });
        assert_eq!(greeting.on_input(&end), (vec![], true));
        assert_eq!(greeting.on_input(&Input::Voice(VoiceInput::UserFinal("Hello?".into()))), (vec![], true));
    }

    #[test]
    fn no_greeting_is_held_unless_the_persona_speaks_first_and_the_core_greeted() {
        for (speak_first, text) in [(false, Some(HELLO)), (true, None), (true, Some("  "))] {
            let mut effects = opening();
            assert!(Greeting::take(spoken(&spec(speak_first, text)), &mut effects).is_none());
            assert_eq!(effects, opening(), "{speak_first} {text:?}");
        }
        // A resumed session, a return, or a transfer to a Persona that does not speak
        // first: the core did not greet, and the carried request goes in at once.
        let mut effects = vec![Effect::Send(ServerMessage::BidiInterruption {})];
        assert!(Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).is_none());
        let mut effects = arrival();
        effects
            .retain(|e| !matches!(e, Effect::Send(ServerMessage::BidiTranscriptStream { .. }) | Effect::Transcript(_)));
        let before = effects.clone();
        assert!(Greeting::take(spoken(&spec(true, Some(HELLO))), &mut effects).is_none());
        assert_eq!(effects, before);
    }
}
