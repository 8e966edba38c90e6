//! The one table of what each `bidi_error` code means to the person in the conversation (a
//! bank's caller, a chat user): a sentence a client can show or say, and what they can do.
//! `bidi_error.message` stays for developers; `user_message` and `suggestion` come from here
//! (the source design's error translation; tool failures have theirs in
//! `switchboard_core::FailureKind::for_people`).

use super::{ErrorCode, ServerMessage};

/// A `bidi_error` as the person in the conversation is told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorForPeople {
    /// What went wrong, in plain words (no codes, names of parts or numbers).
    pub message: &'static str,
    /// What they can do.
    pub suggestion: &'static str,
}

const BUSY_NOW: (&str, &str) = ("We are very busy right now.", "Please try again in a few minutes.");
const OUR_SETUP: (&str, &str) =
    ("The assistant is not set up correctly on our side.", "Please contact us another way while we fix it.");
const OUR_ACCESS: (&str, &str) = (
    "The assistant is not available because of a problem on our side.",
    "Please try again later, or contact us another way.",
);
const WENT_WRONG: (&str, &str) = (
    "Something went wrong on our side and the conversation had to end.",
    "Start a new conversation; if it happens again, please let us know.",
);
const MICROPHONE: (&str, &str) =
    ("The sound from your microphone could not be used.", "Check your microphone, or restart the app.");

impl ErrorCode {
    /// The one table of error codes for people. Every code has its entry (the match has no
    /// catch-all, so a new code cannot be added without one); a code from a newer peer
    /// gets a general one.
    pub fn for_people(&self) -> ErrorForPeople {
        let (message, suggestion) = match self {
            Self::InvalidJson => {
                ("Your app sent something we could not read.", "Try again; if it keeps happening, update the app.")
            }
            Self::UnknownType => {
                ("Your app asked for something we do not understand.", "Update the app, then try again.")
            }
            Self::MalformedMessage => (
                "Your app sent a request with missing or wrong details.",
                "Try again; if it keeps happening, update the app.",
            ),
            Self::AlreadyStarted => {
                ("This conversation has already started.", "Carry on here, or open a new conversation to start over.")
            }
            Self::UnsupportedModality => (
                "The assistant cannot take that kind of input here.",
                "Speak to a voice assistant, and type to a chat assistant.",
            ),
            Self::UnsupportedFrame => {
                ("This conversation is typed only, so sound cannot be sent.", "Type your message.")
            }
            Self::InvalidVoice => ("The voice you chose is not available here.", "Pick another voice from the list."),
            Self::ModelNotAllowed => (
                "The assistant version you chose is not offered here.",
                "Choose one of the versions offered, or let us choose.",
            ),
            Self::InvalidAudioBase64 | Self::InvalidAudioLength | Self::AudioTooLarge => MICROPHONE,
            Self::EmptyAudio => {
                ("No sound arrived from your microphone.", "Check that your microphone is on and not muted.")
            }
            Self::EmptyText => ("Your message was empty.", "Type something, then send it."),
            Self::InvalidDtmf => {
                ("A button press on your phone could not be read.", "Press the buttons on your phone again.")
            }
            Self::DtmfRate => {
                ("Buttons were pressed faster than we can take them.", "Press the buttons again, one at a time.")
            }
            Self::Busy => (
                "The assistant is still answering your earlier messages.",
                "Wait for the answer, then send this again.",
            ),
            Self::NoConsentPending => {
                ("Nothing is waiting for your permission right now.", "Carry on with the conversation.")
            }
            Self::NoClientToolPending => {
                ("Your app answered a request that is no longer waiting.", "Carry on with the conversation.")
            }
            Self::NoTransferPending => {
                ("No transfer to a person is under way right now.", "Carry on with the conversation.")
            }
            Self::NoDigitsPending => {
                ("No buttons are being pressed on the call right now.", "Carry on with the conversation.")
            }
            Self::SessionOver => ("This conversation has ended.", "Start a new conversation."),
            Self::IdentityRefused => (
                "We could not confirm who you are from what your app sent.",
                "Carry on; the assistant will ask you to confirm who you are if it needs to.",
            ),
            Self::ModelError => ("The assistant could not answer just now.", "Say it again, now or in a moment."),
            Self::EmptyReply => {
                ("The assistant did not come up with an answer.", "Say it again, perhaps in other words.")
            }
            Self::ToolRoundsExceeded => {
                ("The assistant got stuck working on your request.", "Ask again, perhaps in a simpler way.")
            }
            Self::ModelThrottled => {
                ("The assistant is very busy, so the conversation had to end.", "Please try again in a few minutes.")
            }
            Self::ModelServiceUnavailable | Self::ModelConnection => {
                ("The assistant could not be reached, so the conversation had to end.", "Please try again later.")
            }
            Self::ModelStreamInterrupted => ("The connection to the assistant was lost.", "Start a new conversation."),
            Self::ModelTimeout => ("The assistant stopped responding.", "Start a new conversation."),
            Self::ModelAccessDenied | Self::ModelCredentials => OUR_ACCESS,
            Self::ModelModelNotFound | Self::ModelConfig => OUR_SETUP,
            Self::ModelValidation | Self::ModelProtocol => WENT_WRONG,
            Self::ModelInvalidToolInput => (
                "Something went wrong while the assistant worked on your request, and the conversation had to end.",
                "Start a new conversation and ask again.",
            ),
            Self::ContextRefused => (
                "The conversation could not start: your app sent details it may not set.",
                "Update the app, or contact whoever provides it.",
            ),
            Self::Origin => {
                ("This page is not allowed to talk to the assistant.", "Open the assistant from its official page.")
            }
            Self::MissingKey => ("You are not signed in.", "Sign in, then try again."),
            Self::AppContextInvalid
            | Self::AppContextReplayed
            | Self::AppContextNotAccepted
            | Self::AppContextWrongSubject => (
                "The conversation could not start: your app's sign-in details were not accepted.",
                "Reload the page or app and try again.",
            ),
            Self::AppContextExpired => {
                ("Your app's sign-in details have expired.", "Reload the page or app and try again.")
            }
            Self::AppContextTooLarge => (
                "The conversation could not start: your app sent too many details.",
                "Update the app, or contact whoever provides it.",
            ),
            Self::InvalidToken => ("Your sign-in is no longer valid.", "Sign in again, then try again."),
            Self::UnknownKey => ("Your sign-in was not recognised.", "Check your sign-in details, then try again."),
            Self::KeySessions => (
                "You already have as many conversations open as you may.",
                "Close one of them, or wait a little, then try again.",
            ),
            Self::KeyRate | Self::SessionRate => {
                ("Messages arrived faster than we can take them.", "Wait a moment, then send fewer messages.")
            }
            Self::AgentNotAllowed => {
                ("You do not have access to this assistant.", "Choose another assistant, or ask us for access.")
            }
            Self::CandidateNotAllowed => (
                "Test conversations are not open to you.",
                "Start an ordinary conversation, or ask us for test access.",
            ),
            Self::NoDefault => ("No assistant was chosen.", "Choose an assistant to talk to."),
            Self::UnknownAgent => {
                ("The assistant you asked for does not exist.", "Check its name, or choose another assistant.")
            }
            Self::AmbiguousAgent => {
                ("More than one assistant has that name.", "Choose the assistant by its full name.")
            }
            Self::NotExposed => (
                "That assistant cannot be reached directly.",
                "Start with the main assistant; it passes you on when needed.",
            ),
            Self::NoReadyPod => ("The assistant is not ready yet.", "Try again in a moment."),
            Self::HandoffNotAllowed => {
                ("You cannot be passed to that assistant from here.", "Start a conversation with that assistant.")
            }
            Self::IdleTimeout => {
                ("The conversation ended because nothing was said for a while.", "Start a new conversation when ready.")
            }
            Self::MemoryBudget | Self::AtCapacity | Self::CapacityFull => BUSY_NOW,
            Self::NoRuntime => (
                "The assistant could not be reached right now.",
                "Try again in a moment; the conversation can go on where it stopped.",
            ),
            Self::AgentRemoved => ("This assistant is no longer available.", "Start a new conversation."),
            Self::HandoffFailed => (
                "You could not be passed on just now, so you stay with the same assistant.",
                "Carry on with the conversation.",
            ),
            Self::ReplayGap => (
                "Some messages were lost while you were disconnected.",
                "Ask the assistant to repeat anything you missed.",
            ),
            Self::SessionRestored => (
                "We had a brief problem, and the assistant may have missed your last words.",
                "If your last request went unanswered, say it again.",
            ),
            Self::SessionAttached => (
                "This conversation is still open in another window or device.",
                "Close it there, or try again in a moment.",
            ),
            Self::ResumeRefused => ("This conversation can no longer be continued.", "Start a new conversation."),
            Self::StoreUnavailable => ("We are having a brief problem on our side.", "Try again in a moment."),
            Self::NothingToCancel => ("There was nothing to stop.", "Carry on with the conversation."),
            Self::UnknownSetting => (
                "Your app asked to change a setting we do not know, so nothing was changed.",
                "Carry on; updating the app may help.",
            ),
            Self::ConsentUnclear => ("Sorry, that was not a clear yes or no.", "Please answer yes or no."),
            Self::UnsupportedAudioFormat => (
                "Your app asked for a sound quality we do not offer, so the usual one is used.",
                "Carry on; if the sound is poor, update the app.",
            ),
            Self::FixedSetting => (
                "That setting can only be chosen when a conversation starts.",
                "Start a new conversation to change it.",
            ),
            Self::Other(_) => ("Something went wrong.", "Try again; if it keeps happening, start a new conversation."),
        };
        ErrorForPeople { message, suggestion }
    }
}

impl ServerMessage {
    /// A `bidi_error`, its `user_message` and `suggestion` from [`ErrorCode::for_people`];
    /// `input_id` names the typed input it refuses, if any.
    pub fn error_for_input(
        code: ErrorCode,
        message: impl Into<String>,
        recoverable: bool,
        input_id: Option<String>,
    ) -> Self {
        let said = code.for_people();
        Self::BidiError {
            message: message.into(),
            user_message: said.message.to_owned(),
            suggestion: said.suggestion.to_owned(),
            code,
            recoverable,
            input_id,
            retry_after_seconds: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words that name parts of the system, protocol details or jargon: none belongs in what
    /// a caller hears.
    const INTERNAL: &[&str] = &[
        "runtime",
        "gateway",
        "grant",
        "redis",
        "json",
        "websocket",
        "socket",
        "api",
        "token",
        "pod",
        "modality",
        "base64",
        "pcm",
        "http",
        "credential",
        "bedrock",
        "nova",
        "sonic",
        "model",
        "tool",
        "operator",
        "namespace",
        "snapshot",
        "session",
        "agent",
        "stream",
        "frame",
        "config",
        "protocol",
        "resume",
        "handoff",
        "origin",
        "key",
        "consent",
        "error",
        "code",
        "null",
    ];

    fn plain(text: &str) -> Result<(), String> {
        let lower = text.to_lowercase();
        if text.trim().is_empty() {
            return Err("empty".into());
        }
        if let Some(word) = INTERNAL.iter().find(|w| lower.contains(*w)) {
            return Err(format!("says {word:?}"));
        }
        // No close codes (4403, 1013), sizes or names written as identifiers.
        if let Some(c) = text.chars().find(|c| c.is_ascii_digit() || matches!(c, '_' | '`' | '{' | '<' | '/')) {
            return Err(format!("has {c:?}"));
        }
        if !text.ends_with('.') || !text.starts_with(|c: char| c.is_uppercase()) {
            return Err("is not a sentence".into());
        }
        Ok(())
    }

    #[test]
    fn every_error_code_has_plain_words_for_people() {
        let newer = ErrorCode::Other("quota_exceeded".into());
        for code in ErrorCode::ALL.iter().chain([&newer]) {
            let said = code.for_people();
            for (what, text) in [("message", said.message), ("suggestion", said.suggestion)] {
                if let Err(why) = plain(text) {
                    panic!("{code:?}'s {what} {why}: {text:?}");
                }
            }
            assert_ne!(said.message, said.suggestion, "{code:?}");
        }
        assert_eq!(plain("The runtime failed."), Err("says \"runtime\"".into()), "the check can fail");
        assert!(plain("Close 4403.").is_err() && plain("").is_err());
    }

    #[test]
    fn a_bidi_error_carries_the_words_for_people_and_older_peers_read_it() {
        let sent = ServerMessage::error(ErrorCode::Busy, "3 inputs wait for the reply", true).to_json();
        let value: serde_json::Value = serde_json::from_str(&sent).expect("JSON");
        assert_eq!(value["user_message"], ErrorCode::Busy.for_people().message);
        assert_eq!(value["suggestion"], ErrorCode::Busy.for_people().suggestion);
        assert_eq!(value["message"], "3 inputs wait for the reply", "the developers' message is kept");
        // An older server's error (no words for people) still decodes, and is written as it came.
        let old = r#"{"type":"bidi_error","message":"m","code":"busy","recoverable":true}"#;
        let read: ServerMessage = serde_json::from_str(old).expect("an older peer's error decodes");
        assert!(matches!(&read, ServerMessage::BidiError { user_message, suggestion, .. }
            if user_message.is_empty() && suggestion.is_empty()));
        assert_eq!(read.to_json(), old);
        let refused = ServerMessage::error_for_input(ErrorCode::EmptyText, "blank", true, Some("b".into()));
        assert!(matches!(refused, ServerMessage::BidiError { user_message, input_id: Some(id), .. }
            if user_message == "Your message was empty." && id == "b"));
    }
}
