//! An incremental server-sent-events parser (the WHATWG event-stream format): bytes in,
//! whole events out. Lines end with LF, CRLF or CR; `data` lines of one event are joined
//! with LF; comments (`:`) and unknown fields are ignored; an event is dispatched at a
//! blank line. A line longer than the configured limit is an error, so a server cannot
//! grow the buffer without bound.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field; `message` when absent.
    pub event: String,
    /// The joined `data` lines.
    pub data: String,
    /// The `id` field, when given.
    pub id: Option<String>,
}

/// A line exceeded the limit.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an event-stream line is longer than {0} bytes")]
pub struct LineTooLong(pub usize);

/// The parser state.
#[derive(Debug)]
pub struct SseParser {
    buffer: Vec<u8>,
    max_line: usize,
    skip_lf: bool,
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

impl SseParser {
    /// A parser refusing lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        Self { buffer: Vec::new(), max_line, skip_lf: false, event: None, data: None, id: None }
    }

    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.skip_lf {
                self.skip_lf = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.skip_lf = byte == b'\r';
                    let line = std::mem::take(&mut self.buffer);
                    if let Some(event) = self.line(&String::from_utf8_lossy(&line)) {
                        events.push(event);
                    }
                }
                _ => {
                    if self.buffer.len() >= self.max_line {
                        return Err(LineTooLong(self.max_line));
                    }
                    self.buffer.push(byte);
                }
            }
        }
        Ok(events)
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let data = self.data.take()?;
            return Some(SseEvent {
                event: self.event.take().unwrap_or_else(|| "message".to_owned()),
                data,
                id: self.id.clone(),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new(1 << 20);
        chunks.iter().flat_map(|c| parser.feed(c).expect("parses")).collect()
    }

    #[test]
    fn events_with_names_ids_and_multiline_data() {
        let events = parse_all(&[b": comment\nevent: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\ndata: two\r\n\r\n"]);
        assert_eq!(
            events,
            vec![
                SseEvent { event: "message".into(), data: "{\"a\":\n1}".into(), id: Some("7".into()) },
                SseEvent { event: "message".into(), data: "two".into(), id: Some("7".into()) },
            ]
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_cr_ends_lines() {
        assert_eq!(parse_all(&[b"event: ping\n\n"]), vec![]);
        assert_eq!(parse_all(&[b"data:x\r\r"]), vec![SseEvent { event: "message".into(), data: "x".into(), id: None }]);
    }

    #[test]
    fn a_line_over_the_limit_is_refused() {
        let mut parser = SseParser::new(8);
        assert_eq!(parser.feed(b"data: 0123456789"), Err(LineTooLong(8)));
    }

    proptest! {
        #[test]
        fn chunk_boundaries_do_not_change_the_events(
            datas in proptest::collection::vec("[a-z {}:\"]{0,20}", 1..6),
            cuts in proptest::collection::vec(0usize..200, 0..8),
            crlf in any::<bool>(),
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let text: String = datas.iter().map(|d| format!("data: {d}{eol}{eol}")).collect();
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            let whole = parse_all(&[bytes]);
            prop_assert_eq!(parse_all(&chunks), whole.clone());
            let got: Vec<String> = whole.into_iter().map(|e| e.data).collect();
            prop_assert_eq!(got, datas);
        }
    }
}
