//! Keypad inputs: a tool input the caller types on the phone (the tool's `keypad`), never
//! spoken to or heard by the model. Once a call of such a tool passed the pipeline
//! (authorised, allowed, the model's part of the input valid, consent), it collects: the
//! keys the caller presses go here instead of to the model ([`Calls::keypad_keys`]) — `0`-`9`
//! gathered, `*` starts again, other keys ignored — until `#`, `maxDigits` keys, or a pause
//! of `interDigitTimeoutSeconds`; then the keys fill the input, the whole input is checked
//! against the tool's schema, and the tool runs. Nothing typed within `timeoutSeconds`
//! ends the call as `keypad_timeout`, too few keys as `keypad_too_short`, keys the schema
//! refuses as `keypad_invalid` — errors the model can explain, which never hold the keys.
//!
//! The keys exist only in the collection and the input the tool runs with: not in
//! `tool_start` or the `tool_call` transcript line (both carry the model's input), not in
//! any message to the model. The `keypad` transcript lines say when an entry began
//! (`waiting`) and how it ended, with how many keys — never which.

use std::time::{Duration, Instant};

use switchboard_crds::agent::KeypadInput;

use crate::events::Effect;
use crate::tools::{FailureKind, ToolFailure};

use super::{Calls, Cx};

/// A keypad input being typed.
#[derive(Clone, Debug)]
pub(super) struct Collecting {
    /// The keys so far (digits only).
    keys: String,
    /// When the whole entry's time (`timeoutSeconds`, from the tool call) is up.
    whole: Instant,
    /// The pause after a key that ends the entry (`interDigitTimeoutSeconds`).
    pause: Duration,
    /// When the last key came.
    last: Option<Instant>,
}

impl Collecting {
    fn new(keypad: &KeypadInput, now: Instant) -> Self {
        Self {
            keys: String::new(),
            whole: now + Duration::from_secs(u64::from(keypad.timeout_seconds.max(1))),
            pause: Duration::from_secs(u64::from(keypad.inter_digit_timeout_seconds.max(1))),
            last: None,
        }
    }

    /// When the entry ends unless a key comes: the pause after the last key, or the whole
    /// entry's time, whichever is first.
    pub(super) fn deadline(&self) -> Instant {
        self.last.map_or(self.whole, |last| self.whole.min(last + self.pause))
    }
}

/// How an entry ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// `#` or `maxDigits` keys.
    Complete,
    /// Past the deadline.
    Timeout,
}

impl Calls {
    /// Call `index` (marked running) collects its keypad input now. Voice: the model is
    /// asked to tell the caller to type it (a voice model does not speak while it waits for
    /// a tool result).
    pub(super) fn collect_keys(
        &mut self,
        index: usize,
        keypad: &KeypadInput,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let call = &mut self.calls[index];
        call.keypad = Some(Collecting::new(keypad, now));
        let (id, tool, input) = (call.id.clone(), call.name.clone(), keypad.input.clone());
        let mut effects = vec![keypad_line(cx, &id, &tool, &input, "waiting", 0)];
        effects.extend(cx.drive.ask_caller(|| {
            format!(
                "(The {tool} tool waits for the caller to type {input} on the phone's keypad. If you have not yet asked, ask the caller in one short sentence to type it and press the hash key; never ask them to say it aloud.)"
            )
        }));
        effects
    }

    /// Whether a call collects keys: the caller's keys go to it ([`Calls::keypad_keys`]).
    pub(crate) fn collecting_keys(&self) -> bool {
        self.calls.iter().any(|c| c.keypad.is_some())
    }

    /// Whether the caller's `digits` pressed at `now` are the keypad's: a call collects, or
    /// they are the `#` a caller presses out of habit right after an entry that ended at its
    /// `maxDigits` (taken and dropped, so the agent is not told a stray `#`).
    pub(crate) fn takes_keys(&mut self, digits: &str, now: Instant) -> bool {
        if self.collecting_keys() {
            return true;
        }
        match self.trailing_hash.take() {
            Some(until) => digits == "#" && now <= until,
            None => false,
        }
    }

    /// Keys the caller pressed (already checked and rate-limited) while a call collects.
    pub(crate) fn keypad_keys(&mut self, digits: &str, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.keypad.is_some()) else { return Vec::new() };
        let Some(keypad) = cx.common.core().tool(&self.calls[index].name).and_then(|t| t.keypad.clone()) else {
            return Vec::new();
        };
        let max = keypad.max_digits.clamp(1, crate::dtmf::MAX_DIGITS as u32) as usize;
        for (at, key) in digits.char_indices() {
            let Some(collecting) = self.calls[index].keypad.as_mut() else { break };
            match key {
                '0'..='9' => collecting.keys.push(key),
                '*' => collecting.keys.clear(),
                '#' => return self.end_entry(index, &keypad, Ended::Complete, cx, now),
                _ => continue,
            }
            collecting.last = Some(now);
            if collecting.keys.len() >= max {
                let pause = collecting.pause;
                let rest = &digits[at + key.len_utf8()..];
                let effects = self.end_entry(index, &keypad, Ended::Complete, cx, now);
                // A `#` right after the last key belongs to the entry.
                if !rest.starts_with('#') {
                    self.trailing_hash = Some(now + pause);
                }
                return effects;
            }
        }
        Vec::new()
    }

    /// Time passed: an entry past its deadline ends (with the keys typed, if any).
    pub(super) fn expire_keypad(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.keypad.is_some()) else { return Vec::new() };
        let Some(keypad) = cx.common.core().tool(&self.calls[index].name).and_then(|t| t.keypad.clone()) else {
            return Vec::new();
        };
        match self.calls[index].keypad.as_ref().map(Collecting::deadline) {
            Some(deadline) if deadline <= now => self.end_entry(index, &keypad, Ended::Timeout, cx, now),
            _ => Vec::new(),
        }
    }

    /// The entry of call `index` ended: its keys fill the input and the tool runs, or the
    /// call ends with a keypad error.
    fn end_entry(
        &mut self,
        index: usize,
        keypad: &KeypadInput,
        ended: Ended,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let Some(collecting) = self.calls[index].keypad.take() else { return Vec::new() };
        let (name, id) = (self.calls[index].name.clone(), self.calls[index].id.clone());
        let count = collecting.keys.len();
        let min = keypad.min_digits.max(1) as usize;
        let field = &keypad.input;
        let failure = if count == 0 && ended == Ended::Timeout {
            Some(ToolFailure::new(
                FailureKind::KeypadTimeout,
                format!(
                    "the caller typed no {field} on the keypad in time; {name} did not run. Ask whether they want to try again"
                ),
            ))
        } else if count < min {
            Some(ToolFailure::new(
                FailureKind::KeypadTooShort,
                format!(
                    "the caller typed {count} keys for {field}, fewer than the {min} it takes; {name} did not run. Ask them to type it again and press hash"
                ),
            ))
        } else {
            None
        };
        let mut effects = Vec::new();
        let outcome = match failure {
            Some(failure) => {
                let label = if failure.kind == FailureKind::KeypadTimeout { "timeout" } else { "too_short" };
                effects.push(keypad_line(cx, &id, &name, field, label, count));
                effects.extend(self.finish_call(index, Err(failure), cx, now));
                return effects;
            }
            None => {
                let mut input = self.calls[index].input.clone();
                if let Some(fields) = input.as_object_mut() {
                    fields.insert(field.clone(), serde_json::Value::String(collecting.keys));
                }
                input
            }
        };
        // The whole input against the whole schema; the error says which field, never what
        // was typed (a schema's message quotes the value).
        if cx.common.core().validate_input(&name, &outcome).is_err() {
            effects.push(keypad_line(cx, &id, &name, field, "invalid", count));
            let failure = ToolFailure::new(
                FailureKind::KeypadInvalid,
                format!(
                    "the {count} keys the caller typed are not a valid {field} for {name}; it did not run. Ask them to check it and type it again"
                ),
            );
            effects.extend(self.finish_call(index, Err(failure), cx, now));
            return effects;
        }
        effects.push(keypad_line(cx, &id, &name, field, "collected", count));
        let call = &mut self.calls[index];
        call.input = outcome;
        effects.push(Effect::ExecuteTool {
            tool_use_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.input.clone(),
        });
        effects
    }
}

/// The transcript line of an entry's start (`waiting`) or end: which input, how it ended and
/// how many keys — never the keys.
fn keypad_line(cx: &Cx<'_>, id: &str, name: &str, field: &str, outcome: &str, keys: usize) -> Effect {
    cx.common.transcript(
        "keypad",
        serde_json::json!({ "id": id, "name": name, "input": field, "outcome": outcome, "keys": keys }),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::agent::AgentCore;
    use crate::model::ToolUse;
    use crate::protocol::ServerMessage;
    use crate::session::common::Common;
    use crate::session::drive::Drive;
    use crate::session::test_agents::{core, init};

    /// The example bank's `banking` with `check_pin`: a 4-6 digit PIN typed on the keypad,
    /// and a reason the model gives.
    fn pin_core() -> Arc<AgentCore> {
        let mut spec = core("banking").spec().clone();
        let tool: switchboard_crds::agent::ToolSpec = serde_json::from_value(serde_json::json!({
            "name": "check_pin",
            "description": "Check the caller's card PIN.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "pin": { "type": "string", "pattern": "^[0-9]{4,6}$" },
                    "reason": { "type": "string" }
                },
                "required": ["pin", "reason"],
                "additionalProperties": false
            },
            "http": { "url": "http://tools/pin" },
            "keypad": { "input": "pin", "minDigits": 2, "maxDigits": 6, "timeoutSeconds": 20, "interDigitTimeoutSeconds": 5 }
        }))
        .expect("a keypad tool");
        spec.tools.push(tool);
        for node in &mut spec.workflow.spec.nodes {
            node.tools.push("check_pin".into());
        }
        Arc::new(AgentCore::new(spec).expect("runnable"))
    }

    fn with_calls(voice: bool, f: impl FnOnce(&mut Calls, &mut Cx<'_>)) {
        let (mut common, conversation) = Common::new(pin_core(), init());
        let mut drive = Drive::new(voice);
        let mut calls = Calls::default();
        let mut cx = Cx { common: &mut common, conversation: &conversation, drive: &mut drive };
        f(&mut calls, &mut cx);
    }

    fn call(input: serde_json::Value) -> Vec<ToolUse> {
        vec![ToolUse { id: "t1".into(), name: "check_pin".into(), input }]
    }

    fn reason() -> serde_json::Value {
        serde_json::json!({ "reason": "card blocked" })
    }

    fn executed(effects: &[Effect]) -> Option<serde_json::Value> {
        effects.iter().find_map(|e| match e {
            Effect::ExecuteTool { input, .. } => Some(input.clone()),
            _ => None,
        })
    }

    fn errors(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(ServerMessage::ToolError { kind, .. }) => Some(kind.clone()),
                _ => None,
            })
            .collect()
    }

    fn keypad_lines(effects: &[Effect]) -> Vec<serde_json::Value> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Transcript(entry) if entry.event == "keypad" => Some(entry.data.clone()),
                _ => None,
            })
            .collect()
    }

    /// Everything but the tool's execution, as text: where the keys must never be.
    fn elsewhere(effects: &[Effect]) -> String {
        effects.iter().filter(|e| !matches!(e, Effect::ExecuteTool { .. })).map(|e| format!("{e:?}")).collect()
    }

    #[test]
    fn the_model_never_sees_or_gives_the_keypad_input() {
        let tool = pin_core().tool("check_pin").cloned().expect("the tool");
        let schema = crate::authority::model_schema(&tool);
        assert!(schema["properties"].get("pin").is_none(), "{schema}");
        assert_eq!(schema["required"], serde_json::json!(["reason"]));
        with_calls(false, |calls, cx| {
            let effects = calls.start(call(serde_json::json!({ "reason": "r", "pin": "1234" })), cx, Instant::now());
            assert_eq!(errors(&effects), ["bound_input"], "the model cannot fill it in");
            assert!(!calls.collecting_keys());
        });
    }

    #[test]
    fn keys_typed_to_the_hash_fill_the_input_and_the_tool_runs() {
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            let started = calls.start(call(reason()), cx, now);
            assert!(executed(&started).is_none() && calls.collecting_keys() && !calls.all_answered());
            assert_eq!(calls.next_deadline(), Some(now + Duration::from_secs(20)), "the whole entry's time");
            let mut effects = calls.keypad_keys("9", cx, now);
            effects.extend(calls.keypad_keys("8*", cx, now + Duration::from_secs(1)));
            assert_eq!(calls.next_deadline(), Some(now + Duration::from_secs(6)), "a pause after the last key");
            effects.extend(calls.keypad_keys("43A", cx, now + Duration::from_secs(2)));
            effects.extend(calls.keypad_keys("21#", cx, now + Duration::from_secs(3)));
            assert_eq!(executed(&effects), Some(serde_json::json!({ "reason": "card blocked", "pin": "4321" })));
            assert!(!calls.collecting_keys() && calls.running());
            assert_eq!(keypad_lines(&started)[0]["outcome"], "waiting");
            assert_eq!(keypad_lines(&effects)[0]["outcome"], "collected");
            assert_eq!(keypad_lines(&effects)[0]["keys"], 4);
            let all = format!("{}{}", elsewhere(&started), elsewhere(&effects));
            assert!(!all.contains("4321") && !all.contains("98"), "the keys are nowhere else: {all}");
            let done = calls.finished("t1", Ok(serde_json::json!({ "ok": true })), cx, now).expect("running");
            assert!(!format!("{done:?}").contains("4321"));
        });
    }

    #[test]
    fn max_digits_or_a_pause_end_the_entry_without_a_hash() {
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            calls.start(call(reason()), cx, now);
            let effects = calls.keypad_keys("1234567", cx, now);
            assert_eq!(executed(&effects).expect("ran")["pin"], "123456", "six keys at most");
            assert!(calls.takes_keys("#", now + Duration::from_secs(1)), "the caller's habitual # is the entry's");
            assert!(!calls.takes_keys("#", now + Duration::from_secs(1)), "once");
        });
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            calls.start(call(reason()), cx, now);
            calls.keypad_keys("123456", cx, now);
            assert!(!calls.takes_keys("#", now + Duration::from_secs(6)), "past the pause a # is the agent's");
        });
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            calls.start(call(reason()), cx, now);
            calls.keypad_keys("5555", cx, now);
            assert!(calls.tick(cx, now + Duration::from_secs(4)).is_empty(), "still within the pause");
            let effects = calls.tick(cx, now + Duration::from_secs(5));
            assert_eq!(executed(&effects).expect("ran")["pin"], "5555");
        });
    }

    #[test]
    fn nothing_typed_too_few_keys_or_keys_the_schema_refuses_end_the_call_with_a_keypad_error() {
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            calls.start(call(reason()), cx, now);
            assert!(calls.tick(cx, now + Duration::from_secs(19)).is_empty());
            let effects = calls.tick(cx, now + Duration::from_secs(20));
            assert_eq!(errors(&effects), ["keypad_timeout"]);
            assert!(calls.all_answered() && calls.next_deadline().is_none() && !calls.collecting_keys());
        });
        with_calls(false, |calls, cx| {
            calls.start(call(reason()), cx, Instant::now());
            let effects = calls.keypad_keys("7#", cx, Instant::now());
            assert_eq!(errors(&effects), ["keypad_too_short"]);
        });
        with_calls(false, |calls, cx| {
            calls.start(call(reason()), cx, Instant::now());
            let effects = calls.keypad_keys("987#", cx, Instant::now());
            assert_eq!(errors(&effects), ["keypad_invalid"], "three keys: the schema's pattern takes 4-6");
            assert!(executed(&effects).is_none() && !elsewhere(&effects).contains("987"), "{effects:?}");
            assert_eq!(keypad_lines(&effects)[0]["outcome"], "invalid");
        });
    }

    #[test]
    fn a_voice_model_is_asked_to_tell_the_caller_to_type() {
        with_calls(true, |calls, cx| {
            let effects = calls.start(call(reason()), cx, Instant::now());
            let asked = effects.iter().any(|e| {
                matches!(e, Effect::Voice(crate::events::VoiceEffect::SendText(t)) if t.contains("type pin") && t.contains("hash"))
            });
            assert!(asked, "{effects:?}");
        });
    }

    #[test]
    fn a_cancelled_call_stops_collecting() {
        with_calls(false, |calls, cx| {
            let now = Instant::now();
            calls.start(call(reason()), cx, now);
            calls.keypad_keys("12", cx, now);
            assert_eq!(errors(&calls.cancel(cx, now)), ["cancelled"]);
            assert!(!calls.collecting_keys() && calls.next_deadline().is_none());
            assert!(calls.keypad_keys("34#", cx, now).is_empty(), "keys after it go nowhere");
        });
    }

    proptest! {
        /// However the caller types (any keys, any pauses), the keys typed reach nothing but
        /// the tool's execution, and the call ends within the entry's time.
        #[test]
        fn the_keys_reach_only_the_tool(presses in proptest::collection::vec(("[78*#AB]{1,4}", 0u64..7000), 1..12)) {
            with_calls(false, |calls, cx| {
                let start = Instant::now();
                let mut effects = calls.start(call(reason()), cx, start);
                let mut at = start;
                let mut typed = String::new();
                for (keys, gap) in &presses {
                    at += Duration::from_millis(*gap);
                    effects.extend(calls.tick(cx, at));
                    if calls.collecting_keys() {
                        typed.extend(keys.chars().filter(char::is_ascii_digit));
                    }
                    effects.extend(calls.keypad_keys(keys, cx, at));
                }
                effects.extend(calls.tick(cx, start + Duration::from_secs(21)));
                assert!(calls.all_answered() || calls.running(), "the entry ended: {effects:?}");
                if typed.len() >= 3 {
                    for run in typed.as_bytes().windows(3) {
                        let run = std::str::from_utf8(run).expect("digits");
                        assert!(!elsewhere(&effects).contains(run), "{run} leaked: {effects:?}");
                    }
                }
            });
        }
    }
}
