//! Finds the line of a key path (`steps[2].expect.tools[0].name`) in a scenario file's YAML
//! text, so that a problem found after parsing (a regex that does not compile, a tool no
//! agent has) names the line to change, as serde_yaml's own errors do.
//!
//! serde_yaml keeps no positions once a document is parsed, so this reads the text again
//! by indentation: block mappings and block sequences, the layout people write scenarios
//! in. Where a path cannot be followed (flow style `{a: b}`, a block scalar), the line of
//! the deepest part it found is returned.

use std::fmt;

/// One part of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence item, from 0.
    Index(usize),
}

/// A key path into a scenario file, shown as `steps[2].expect.tools[0].name`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    /// This path with a key added.
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.into()));
        Self(segs)
    }

    /// This path with a relative path written as [`KeyPath`] displays (`tools[0].name`)
    /// added; parts that are not keys or indexes are left out.
    pub fn join(&self, relative: &str) -> Self {
        let mut path = self.clone();
        for part in relative.split('.') {
            let mut pieces = part.split('[');
            if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
                path = path.key(key);
            }
            for index in pieces.filter_map(|p| p.strip_suffix(']')?.parse().ok()) {
                path = path.index(index);
            }
        }
        path
    }

    /// This path with a sequence index added.
    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Self(segs)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) if i == 0 => write!(f, "{key}")?,
                Seg::Key(key) => write!(f, ".{key}")?,
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A meaningful line: its number (from 1), the indent of its key, its key, and the indent
/// of its `- ` when it starts a sequence item.
#[derive(Debug)]
struct Line<'a> {
    number: usize,
    key_indent: usize,
    key: Option<&'a str>,
    item_indent: Option<usize>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        let mut rest = raw.trim_start();
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with("---") {
            continue;
        }
        let mut key_indent = indent;
        let mut item_indent = None;
        if rest == "-" || rest.starts_with("- ") {
            item_indent = Some(indent);
            let after = rest.trim_start_matches('-');
            let trimmed = after.trim_start();
            key_indent = indent + 1 + (after.len() - trimmed.len());
            rest = trimmed;
        }
        let key = rest.split_once(':').map(|(k, _)| k.trim().trim_matches(|c| c == '"' || c == '\''));
        let key = key.filter(|k| !k.is_empty() && !k.contains(char::is_whitespace));
        out.push(Line { number: i + 1, key_indent, key, item_indent });
    }
    out
}

/// The line of `path` in `text`, or of the deepest part of it found; `None` when not even
/// its first key is there.
pub fn line_of(text: &str, path: &KeyPath) -> Option<usize> {
    let lines = lines(text);
    let (mut start, mut end) = (0, lines.len());
    // Keys inside the current node are indented more than this.
    let mut parent: Option<usize> = None;
    let mut found = None;
    for seg in &path.0 {
        let range = &lines[start..end];
        let deeper = |indent: usize| parent.is_none_or(|p| indent > p);
        match seg {
            Seg::Key(key) => {
                let Some(indent) = range.iter().map(|l| l.key_indent).filter(|&i| deeper(i)).min() else { break };
                let Some(at) = range.iter().position(|l| l.key_indent == indent && l.key == Some(key.as_str())) else {
                    break;
                };
                let from = start + at;
                let to = lines[from + 1..end]
                    .iter()
                    .position(|l| l.key_indent <= indent || l.item_indent.is_some_and(|i| i < indent))
                    .map_or(end, |p| from + 1 + p);
                found = Some(lines[from].number);
                (start, end, parent) = (from + 1, to, Some(indent));
            }
            Seg::Index(index) => {
                let Some(indent) =
                    range.iter().filter_map(|l| l.item_indent).filter(|&i| deeper(i) || parent == Some(i)).min()
                else {
                    break;
                };
                let items: Vec<usize> = range
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.item_indent == Some(indent))
                    .map(|(i, _)| start + i)
                    .collect();
                let Some(&from) = items.get(*index) else { break };
                let to = items.get(index + 1).copied().unwrap_or(end);
                found = Some(lines[from].number);
                (start, end, parent) = (from, to, Some(indent));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
name: balance
# a comment
steps:
  - say: hello
    expect:
      agent: triage
  - say: \"My balance please\"
    expect:
      tools:
        - name: check_balance
          args: {}
        - name: get_transactions
          args:
            limit: 5
      transcript:
        contains: [balance]
";

    fn path(segs: Vec<Seg>) -> KeyPath {
        KeyPath(segs)
    }

    #[test]
    fn follows_keys_and_items_by_indentation() {
        use Seg::{Index, Key};
        assert_eq!(line_of(TEXT, &path(vec![Key("name".into())])), Some(1));
        assert_eq!(line_of(TEXT, &path(vec![Key("steps".into()), Index(0)])), Some(4));
        assert_eq!(line_of(TEXT, &path(vec![Key("steps".into()), Index(0), Key("say".into())])), Some(4));
        assert_eq!(
            line_of(TEXT, &path(vec![Key("steps".into()), Index(0), Key("expect".into()), Key("agent".into())])),
            Some(6)
        );
        assert_eq!(line_of(TEXT, &path(vec![Key("steps".into()), Index(1)])), Some(7));
        let tool = |i| {
            path(vec![
                Key("steps".into()),
                Index(1),
                Key("expect".into()),
                Key("tools".into()),
                Index(i),
                Key("name".into()),
            ])
        };
        assert_eq!(line_of(TEXT, &tool(0)), Some(10));
        assert_eq!(line_of(TEXT, &tool(1)), Some(12));
        let limit = path(vec![
            Key("steps".into()),
            Index(1),
            Key("expect".into()),
            Key("tools".into()),
            Index(1),
            Key("args".into()),
            Key("limit".into()),
        ]);
        assert_eq!(line_of(TEXT, &limit), Some(14));
        let contains = path(vec![
            Key("steps".into()),
            Index(1),
            Key("expect".into()),
            Key("transcript".into()),
            Key("contains".into()),
        ]);
        assert_eq!(line_of(TEXT, &contains), Some(16));
    }

    #[test]
    fn stops_at_the_deepest_part_found() {
        use Seg::{Index, Key};
        // Flow style: the line of `args`.
        let inside = path(vec![
            Key("steps".into()),
            Index(1),
            Key("expect".into()),
            Key("tools".into()),
            Index(0),
            Key("args".into()),
            Key("x".into()),
        ]);
        assert_eq!(line_of(TEXT, &inside), Some(11));
        // A key of another step is not taken for this one's.
        assert_eq!(
            line_of(TEXT, &path(vec![Key("steps".into()), Index(0), Key("expect".into()), Key("tools".into())])),
            Some(5)
        );
        assert_eq!(line_of(TEXT, &path(vec![Key("steps".into()), Index(7)])), Some(3));
        assert_eq!(line_of(TEXT, &path(vec![Key("nothing".into())])), None);
    }

    #[test]
    fn paths_display_as_written_and_join_as_displayed() {
        let p = KeyPath::default().key("steps").index(2).key("expect").key("tools").index(0).key("name");
        assert_eq!(p.to_string(), "steps[2].expect.tools[0].name");
        assert_eq!(KeyPath::default().key("steps").index(2).key("expect").join("tools[0].name"), p);
        assert_eq!(KeyPath::default().join("latency.turnMs").to_string(), "latency.turnMs");
    }
}
