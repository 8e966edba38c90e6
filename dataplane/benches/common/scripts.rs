//! The simulator's scripts the benchmarks run against.

/// The simulator's voice script of the voice benchmarks: one phrase ("hello") and an
/// immediate spoken reply (28 characters at 10 ms each, 20 ms chunks), the turn ending after
/// `silence_ms` of silence.
pub fn voice_script(silence_ms: usize) -> String {
    format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: {silence_ms}, medium: {silence_ms}, low: {silence_ms} }} }}
  phrases: {{ 1: "hello" }}
  speech: {{ msPerChar: {VOICE_MS_PER_CHAR}, chunkMs: 20, responseDelayMs: 0 }}
default: {{ text: "{VOICE_REPLY}" }}
"#
    )
}

/// [`voice_script`]'s reply, and its milliseconds of speech per character.
pub const VOICE_REPLY: &str = "Hello there, how can I help?";
/// See [`VOICE_REPLY`].
pub const VOICE_MS_PER_CHAR: u64 = 10;

/// The Example Bank's simulator script with fast text turns (100 ms to the first token,
/// 2,000 tokens a second): the comparisons are side by side.
pub fn text_script() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/sim/banking.yaml"))
        .expect("the banking script")
        .replace("timeToFirstTokenMs: 250", "timeToFirstTokenMs: 100")
        .replace("tokensPerSecond: 60", "tokensPerSecond: 2000")
}
