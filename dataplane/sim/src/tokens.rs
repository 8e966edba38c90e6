//! The simulator's deterministic tokenizer: splits text into word-like pieces so replies
//! stream in realistic deltas and usage counts are stable across runs.
//!
//! A token is an optional run of leading whitespace followed by either up to
//! [`MAX_WORD_CHARS`] letters/digits or a single other character. On English prose this
//! gives roughly one token per 4-5 characters, close to real tokenizers; the exact count
//! does not matter, only that it is deterministic and that streamed deltas and reported
//! output tokens agree.

/// Longest run of letters/digits in one token; longer words are split.
pub const MAX_WORD_CHARS: usize = 6;

/// Splits `text` into tokens. Joining the tokens gives back `text` exactly.
pub fn split_tokens(text: &str) -> Vec<&str> {
    Tokens { text, chars: text.char_indices().peekable() }.collect()
}

/// The number of tokens in `text` (counted without collecting them).
pub fn estimate_tokens(text: &str) -> u64 {
    if text.is_ascii() {
        return ascii_token_count(text.as_bytes());
    }
    Tokens { text, chars: text.char_indices().peekable() }.count() as u64
}

/// The count [`Tokens`] gives for ASCII text, a byte at a time: the simulator counts every
/// request's prompt, history and tool schemas, and the char iterator was a tenth of its
/// CPU per turn.
fn ascii_token_count(bytes: &[u8]) -> u64 {
    // `char::is_whitespace` on ASCII: tab, line feed, vertical tab, form feed, carriage
    // return and space (`u8::is_ascii_whitespace` leaves out the vertical tab).
    let space = |b: u8| matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ');
    let (mut count, mut i) = (0, 0);
    while i < bytes.len() {
        count += 1;
        while i < bytes.len() && space(bytes[i]) {
            i += 1;
        }
        let Some(&first) = bytes.get(i) else { break };
        i += 1;
        if first.is_ascii_alphanumeric() {
            let end = (i - 1 + MAX_WORD_CHARS).min(bytes.len());
            while i < end && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
        }
    }
    count
}

/// The tokens of a text, in order.
struct Tokens<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let &(start, _) = self.chars.peek()?;
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some((index, c)) = self.chars.next() else {
            return Some(&self.text[start..]);
        };
        let mut end = index + c.len_utf8();
        if c.is_alphanumeric() {
            let mut count = 1;
            while count < MAX_WORD_CHARS {
                match self.chars.next_if(|(_, c)| c.is_alphanumeric()) {
                    Some((i, c)) => {
                        end = i + c.len_utf8();
                        count += 1;
                    }
                    None => break,
                }
            }
        }
        Some(&self.text[start..end])
    }
}

/// The number of tokens of a JSON value, counted on its compact serialisation.
pub fn estimate_json_tokens(value: &serde_json::Value) -> u64 {
    match value {
        serde_json::Value::String(s) => estimate_tokens(s),
        // `to_vec` writes the same text as `Display` without the formatter machinery; it
        // cannot fail on a `Value` and writes UTF-8.
        other => {
            estimate_tokens(std::str::from_utf8(&serde_json::to_vec(other).unwrap_or_default()).unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_words_punctuation_and_long_words() {
        assert_eq!(split_tokens("Hello, world!"), vec!["Hello", ",", " world", "!"]);
        assert_eq!(split_tokens("  balance 1234567890"), vec!["  balanc", "e", " 123456", "7890"]);
        assert_eq!(split_tokens(""), Vec::<&str>::new());
        assert_eq!(split_tokens("end  "), vec!["end", "  "]);
        assert_eq!(estimate_tokens("Your balance is £1,234.56."), 11);
    }

    proptest! {
        #[test]
        fn tokens_rebuild_the_text(text in "\\PC{0,200}") {
            let tokens = split_tokens(&text);
            prop_assert_eq!(tokens.concat(), text.clone());
            prop_assert!(tokens.iter().all(|t| !t.is_empty()));
            prop_assert_eq!(estimate_tokens(&text), tokens.len() as u64);
        }

        #[test]
        fn the_ascii_count_is_the_general_count(text in "[ -~\t\n\x0B\x0C\r]{0,200}") {
            let general = Tokens { text: &text, chars: text.char_indices().peekable() }.count() as u64;
            prop_assert_eq!(ascii_token_count(text.as_bytes()), general);
        }

        #[test]
        fn json_values_count_their_compact_text(value in proptest::collection::btree_map("[a-z]{1,8}", 0i64..100_000, 0..6)) {
            let value = serde_json::to_value(value).expect("json");
            prop_assert_eq!(estimate_json_tokens(&value), estimate_tokens(&value.to_string()));
        }

        #[test]
        fn more_text_never_means_fewer_tokens(a in "[a-z ,.]{0,80}", b in "[a-z ,.]{0,80}") {
            let joined = format!("{a}{b}");
            prop_assert!(estimate_tokens(&joined) + 1 >= estimate_tokens(&a));
        }
    }
}
