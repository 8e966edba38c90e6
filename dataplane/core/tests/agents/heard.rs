//! What the caller heard of a reply they spoke over (issue 26, `audio_played_ms`): the
//! conversation keeps the part of a cut reply the client played — whole words, at the
//! voice's pace — or, without the client's word, the part whose audio was sent.

use std::collections::BTreeMap;
use std::time::Instant;

use switchboard_core::model::{ContentBlock, Role};
use switchboard_core::{Effect, Input, Session, VoiceInput};

use crate::common;

const STORY: &str = "Once upon a time there was a bank that never closed";

fn texts(session: &Session) -> Vec<(Role, String)> {
    session
        .messages()
        .iter()
        .flat_map(|m| {
            m.content.iter().filter_map(move |b| match b {
                ContentBlock::Text(t) => Some((m.role, t.clone())),
                _ => None,
            })
        })
        .collect()
}

fn story_cut(session: &mut Session, sent_ms: u64) -> Vec<Effect> {
    let now = Instant::now();
    session.handle(Input::Voice(VoiceInput::UserFinal("Tell me a story".into())), now);
    // 10 ms a character.
    let mut effects =
        session.handle(Input::Voice(VoiceInput::ReplyCut { text: STORY.into(), sent_ms, us_per_char: 10_000 }), now);
    effects.extend(session.handle(Input::Voice(VoiceInput::Interrupted), now));
    effects
}

#[test]
fn the_part_of_a_cut_reply_the_client_played_enters_the_conversation_before_the_callers_words() {
    let now = Instant::now();
    let (mut session, _) = Session::start_voice(common::core("triage"), common::init(BTreeMap::new()));
    let cut = story_cut(&mut session, 400);
    assert!(!cut.iter().any(|e| matches!(e, Effect::Transcript(t) if t.event == "assistant")), "not yet: {cut:?}");
    // The client played 160 ms of the 400 sent: 16 characters, "Once upon a time".
    let played = session.handle(Input::Voice(VoiceInput::AudioPlayed { ms: 160 }), now);
    let entry = played.iter().find_map(|e| match e {
        Effect::Transcript(t) if t.event == "assistant" => Some(t.data.clone()),
        _ => None,
    });
    assert_eq!(
        entry,
        Some(serde_json::json!({ "text": "Once upon a time", "interrupted": true, "audio_played_ms": 160 }))
    );
    session.handle(Input::Voice(VoiceInput::UserFinal("Stop".into())), now);
    assert_eq!(
        texts(&session),
        vec![
            (Role::User, "Tell me a story".to_owned()),
            (Role::Assistant, "Once upon a time".to_owned()),
            (Role::User, "Stop".to_owned()),
        ]
    );
    // A second report changes nothing.
    assert!(session.handle(Input::Voice(VoiceInput::AudioPlayed { ms: 400 }), now).is_empty());
}

#[test]
fn without_the_clients_word_the_audio_sent_counts_as_heard_and_a_report_cannot_add_to_it() {
    let now = Instant::now();
    let (mut session, _) = Session::start_voice(common::core("triage"), common::init(BTreeMap::new()));
    story_cut(&mut session, 250);
    session.handle(Input::Voice(VoiceInput::UserFinal("Stop".into())), now);
    let heard = texts(&session);
    assert_eq!(heard[1], (Role::Assistant, "Once upon a time there".to_owned()), "25 characters, whole words");

    let (mut other, _) = Session::start_voice(common::core("triage"), common::init(BTreeMap::new()));
    story_cut(&mut other, 100);
    // More played than was sent: what was sent.
    other.handle(Input::Voice(VoiceInput::AudioPlayed { ms: 5000 }), now);
    assert_eq!(texts(&other)[1], (Role::Assistant, "Once upon".to_owned()));

    let (mut early, _) = Session::start_voice(common::core("triage"), common::init(BTreeMap::new()));
    story_cut(&mut early, 400);
    early.handle(Input::Voice(VoiceInput::AudioPlayed { ms: 20 }), now);
    early.handle(Input::Voice(VoiceInput::UserFinal("Stop".into())), now);
    assert_eq!(texts(&early).len(), 2, "nothing of the reply was heard: {:?}", texts(&early));
}
