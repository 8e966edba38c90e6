//! The plan of a reply and the output events' JSON.

use super::*;

#[test]
fn a_request_to_speak_first_names_its_greeting_and_other_text_does_not() {
    let asked = "The caller has just joined. Speak first: greet them by saying exactly: \"Hello, I'm \"Ava\".\" ";
    assert_eq!(speak_first_greeting(asked), Some("Hello, I'm \"Ava\"."));
    for text in ["hello", "Speak first: no quotes", "say \"hi\"", "Speak first: \"\"", "Speak first: \"open"] {
        assert_eq!(speak_first_greeting(text), None, "{text}");
    }
    assert_eq!(instructed_line(asked), Some(("speak-first", "Hello, I'm \"Ava\".")));
    let filler = "The tool t is still running. Say now, briefly: \"One moment.\"";
    assert_eq!(instructed_line(filler), Some(("say-now", "One moment.")));
    assert_eq!(instructed_line("Say now, briefly: no quotes"), None);
}

#[test]
fn an_audio_event_s_text_is_the_same_json_as_its_value() {
    let ids = Ids {
        session_id: "s\"1".into(),
        prompt_name: "p".into(),
        completion_id: "c".into(),
        voice: Default::default(),
    };
    let pcm = ids.voice.tone(0, 20);
    let text: Value = serde_json::from_str(&ids.audio_output_text("a", &pcm)).expect("JSON");
    assert_eq!(text, ids.audio_output("a", &pcm));
}

fn names(queue: &VecDeque<Planned>) -> Vec<String> {
    queue
        .iter()
        .filter_map(|p| {
            p.event.to_json().get("event").and_then(Value::as_object).and_then(|o| o.keys().next().cloned())
        })
        .filter(|name| name != "audioOutput")
        .collect()
}

fn plan(text: Option<&str>, tool: bool, pace: f64) -> (VecDeque<Planned>, Usage, Instant) {
    let ids =
        Ids { session_id: "s".into(), prompt_name: "p".into(), completion_id: "c".into(), voice: Default::default() };
    let speech = Speech { ms_per_char: 50, chunk_ms: 40, response_delay_ms: 0, pace };
    let (mut next_id, mut queue, mut total) = (0, VecDeque::new(), Usage::default());
    let input = Usage { input_speech: 5, ..Usage::default() };
    let at = Instant::now();
    let call = json!({"account": "main"});
    let tool = tool.then_some(("tool-1", "check_balance", &call));
    Planner { ids: &ids, speech: &speech, next_id: &mut next_id, queue: &mut queue }
        .reply(at, text, tool, &input, &mut total);
    (queue, total, at)
}

#[test]
fn a_reply_is_speculative_text_paced_audio_usage_and_final_text_in_the_open_completion() {
    let (queue, total, at) = plan(Some("Hello there"), false, 1.0);
    assert_eq!(
        names(&queue),
        [
            "contentStart",
            "textOutput",
            "contentEnd",
            "contentStart",
            "contentEnd",
            "usageEvent",
            "contentStart",
            "textOutput",
            "contentEnd",
        ]
    );
    let audio: Vec<&Planned> =
        queue.iter().filter(|p| p.event.to_json().pointer("/event/audioOutput").is_some()).collect();
    let bytes: usize = audio
        .iter()
        .filter_map(|p| {
            p.event.to_json().pointer("/event/audioOutput/content").and_then(Value::as_str).map(String::from)
        })
        .map(|b64| aws_smithy_types::base64::decode(b64).map(|b| b.len()).unwrap_or(0))
        .sum();
    assert_eq!(bytes, 11 * 50 * 48, "11 characters at 50 ms, 24 kHz 16-bit");
    assert_eq!(audio.len(), 14, "550 ms in 40 ms chunks");
    assert!(audio.windows(2).all(|w| w[1].at - w[0].at == Duration::from_millis(40)), "real-time pacing");
    assert_eq!(queue.back().map(|p| p.at - at), Some(Duration::from_millis(550)));
    assert_eq!(queue.back().map(|p| p.marker.clone()), Some(Marker::Done));
    assert_eq!((total.input_speech, total.output_speech), (5, speech_tokens(550)));
    assert!(total.output_text > 0);
    let stages: Vec<String> = queue
        .iter()
        .filter_map(|p| {
            p.event.to_json().pointer("/event/contentStart/additionalModelFields")?.as_str().map(String::from)
        })
        .collect();
    assert_eq!(stages, [r#"{"generationStage":"SPECULATIVE"}"#, r#"{"generationStage":"FINAL"}"#]);
}

#[test]
fn a_tool_call_ends_the_reply_waiting_for_its_result_and_pace_zero_sends_at_once() {
    let (queue, _, at) = plan(Some("Let me check."), true, 0.0);
    assert!(queue.iter().all(|p| p.at == at));
    let tool =
        queue.iter().map(|p| p.event.to_json()).find(|e| e.pointer("/event/toolUse").is_some()).expect("a toolUse");
    assert_eq!(tool.pointer("/event/toolUse/content"), Some(&json!("{\"account\":\"main\"}")));
    assert!(queue.iter().any(|p| p.marker == Marker::ToolPending("tool-1".into(), "check_balance".into())));
    assert!(!names(&queue).iter().any(|n| n == "completionEnd"), "no completionEnd: one per prompt");
    let (tool_only, _, _) = plan(None, true, 1.0);
    assert_eq!(names(&tool_only), ["usageEvent", "contentStart", "toolUse", "contentEnd"]);
}
