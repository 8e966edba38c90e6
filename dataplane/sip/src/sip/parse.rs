//! Parsing SIP messages (RFC 3261 §7) strictly and within limits: a datagram holds one
//! message; a stream (TCP, TLS) is cut into messages by [`StreamDecoder`] using
//! Content-Length, which a stream must carry (§18.3). Lines end in CRLF; folded header
//! lines are joined; compact header names are expanded. Every failure is a
//! [`ParseError`] with the status a server answers it with ([`ParseError::status`]),
//! and, once a request's head has been read, the head to answer it from.

use super::header::is_token;
use super::{Header, HeaderError, Headers, Message, Method, Request, Response, header};

/// How big a message may be. A message past a limit is refused, never buffered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in one message, head and body (a UDP datagram, or one message on a stream).
    pub max_message: usize,
    /// Header fields in one message.
    pub max_headers: usize,
    /// Bytes in one header field, folded lines joined.
    pub max_header_len: usize,
    /// Bytes in a body.
    pub max_body: usize,
}

impl Default for Limits {
    /// 16 KiB messages, 64 headers of at most 2 KiB, 8 KiB bodies: an INVITE with an SDP
    /// offer from a carrier is 1-4 KiB.
    fn default() -> Self {
        Self { max_message: 16 * 1024, max_headers: 64, max_header_len: 2048, max_body: 8 * 1024 }
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but line breaks or NULs: a keep-alive, not a message.
    #[error("no message, only a keep-alive")]
    Empty,
    /// The message is bigger than [`Limits::max_message`].
    #[error("the message is {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// Its size (so far, on a stream).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// No empty line ends the head.
    #[error("the message head does not end with an empty line (CRLF CRLF)")]
    Unterminated,
    /// The head is not UTF-8.
    #[error("the message head is not UTF-8")]
    NotUtf8,
    /// The first line is neither a request line nor a status line.
    #[error("not a SIP request or status line: {0:?}")]
    StartLine(String),
    /// Not SIP/2.0.
    #[error("unsupported SIP version {0:?} (only SIP/2.0)")]
    Version(String),
    /// More header fields than [`Limits::max_headers`].
    #[error("more than {limit} header fields")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// A header field longer than [`Limits::max_header_len`].
    #[error("the {name} header is longer than {limit} bytes")]
    HeaderTooLong {
        /// The header's name.
        name: String,
        /// The limit.
        limit: usize,
    },
    /// A header line without a colon or with a name that is not a token.
    #[error("not a header field (name: value): {0:?}")]
    HeaderLine(String),
    /// Content-Length is not a number, or two of them differ.
    #[error("invalid Content-Length {0:?}")]
    ContentLength(String),
    /// A message on a stream without Content-Length (RFC 3261 §18.3).
    #[error("a message on a stream must carry Content-Length")]
    NoContentLength,
    /// The body is longer than [`Limits::max_body`].
    #[error("the body is {length} bytes, more than the limit of {limit}")]
    BodyTooLarge {
        /// The body's declared length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// Fewer body bytes than Content-Length says.
    #[error("Content-Length says {declared} bytes but the body has {actual}")]
    Truncated {
        /// Content-Length.
        declared: usize,
        /// The bytes there are.
        actual: usize,
    },
    /// A request whose head read but which cannot be served as it is.
    #[error("{method} request refused: {error}")]
    Request {
        /// The request's head (its body, if any, is dropped), to answer it from.
        head: Box<Request>,
        /// What is wrong with it.
        #[source]
        error: Box<ParseError>,
        /// The method, for the message.
        method: Method,
    },
    /// A header the message needs is missing or does not read.
    #[error(transparent)]
    Header(#[from] HeaderError),
}

impl ParseError {
    /// The status a server answers with when it can answer: 413 for a body too large,
    /// 505 for another version, 513 for a message too large, 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            Self::Request { error, .. } => error.status(),
            Self::BodyTooLarge { .. } => 413,
            Self::Version(_) => 505,
            Self::TooLarge { .. } => 513,
            _ => 400,
        }
    }

    /// The request to answer, when its head read (with Via, From, To, Call-ID and CSeq);
    /// without one a server cannot answer and drops the message.
    pub fn head(&self) -> Option<&Request> {
        match self {
            Self::Request { head, .. } => Some(head),
            _ => None,
        }
    }
}

/// Parses one message from a datagram. Bytes past Content-Length are discarded (RFC 3261
/// §18.3); without Content-Length the body is the rest of the datagram.
pub fn parse_datagram(bytes: &[u8], limits: &Limits) -> Result<Message, ParseError> {
    parse(bytes, limits, false).map(|(message, _)| message)
}

/// Parses one message at the start of `bytes`; returns it and the bytes it took.
/// `stream`: Content-Length is required and the body is exactly that long.
fn parse(bytes: &[u8], limits: &Limits, stream: bool) -> Result<(Message, usize), ParseError> {
    if bytes.iter().all(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(ParseError::Empty);
    }
    if bytes.len() > limits.max_message && !stream {
        return Err(ParseError::TooLarge { size: bytes.len(), limit: limits.max_message });
    }
    let head_end = find(bytes, b"\r\n\r\n").ok_or(ParseError::Unterminated)?;
    let head = std::str::from_utf8(&bytes[..head_end]).map_err(|_| ParseError::NotUtf8)?;
    let (start, fields) = head.split_once("\r\n").unwrap_or((head, ""));
    let headers = parse_headers(fields, limits)?;
    let body_start = head_end + 4;
    let mut message = start_line(start, headers)?;
    let body = body_of(&message, &bytes[body_start..], limits, stream);
    match body {
        Ok(body) => {
            let used = body_start + body.len();
            if used > limits.max_message {
                return Err(ParseError::TooLarge { size: used, limit: limits.max_message });
            }
            if let Message::Request(request) = &message {
                request.check().map_err(|e| refused(request, e.into()))?;
            }
            match &mut message {
                Message::Request(r) => {
                    r.headers.remove("Content-Length");
                    r.body = body.to_vec();
                }
                Message::Response(r) => {
                    r.headers.remove("Content-Length");
                    r.body = body.to_vec();
                }
            }
            Ok((message, used))
        }
        Err(error) => match message {
            Message::Request(request) if request.check().is_ok() => Err(refused(&request, error)),
            _ => Err(error),
        },
    }
}

fn refused(request: &Request, error: ParseError) -> ParseError {
    let head = Request { body: Vec::new(), ..request.clone() };
    ParseError::Request { method: request.method.clone(), head: Box::new(head), error: Box::new(error) }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn start_line(line: &str, headers: Headers) -> Result<Message, ParseError> {
    let bad = || ParseError::StartLine(line.chars().take(200).collect());
    let mut parts = line.splitn(3, ' ');
    let (Some(a), Some(b), Some(c)) = (parts.next(), parts.next(), parts.next()) else { return Err(bad()) };
    if a.starts_with("SIP/") {
        if a != "SIP/2.0" {
            return Err(ParseError::Version(a.to_owned()));
        }
        let status: u16 = b.parse().map_err(|_| bad())?;
        if b.len() != 3 || !(100..=699).contains(&status) || c.chars().any(char::is_control) {
            return Err(bad());
        }
        return Ok(Message::Response(Response { status, reason: c.to_owned(), headers, body: Vec::new() }));
    }
    if c != "SIP/2.0" {
        return Err(if c.starts_with("SIP/") { ParseError::Version(c.to_owned()) } else { bad() });
    }
    if !is_token(a) || b.is_empty() || !b.contains(':') || b.bytes().any(|x| x <= b' ' || x == 0x7f) {
        return Err(bad());
    }
    Ok(Message::Request(Request { method: Method::from_token(a), uri: b.to_owned(), headers, body: Vec::new() }))
}

/// Reads the header lines (after the start line), joining folded lines; Content-Length
/// is kept for [`body_of`] under its canonical name.
fn parse_headers(fields: &str, limits: &Limits) -> Result<Headers, ParseError> {
    let mut headers: Vec<Header> = Vec::new();
    for line in fields.split("\r\n").filter(|_| !fields.is_empty()) {
        if line.starts_with([' ', '\t']) {
            let Some(last) = headers.last_mut() else { return Err(ParseError::HeaderLine(line.to_owned())) };
            if line.chars().any(|c| c.is_control() && c != '\t') {
                return Err(ParseError::HeaderLine(line.chars().take(200).collect()));
            }
            let more = line.trim();
            if !more.is_empty() {
                if !last.value.is_empty() {
                    last.value.push(' ');
                }
                last.value.push_str(more);
            }
            if last.name.len() + last.value.len() > limits.max_header_len {
                return Err(ParseError::HeaderTooLong { name: last.name.clone(), limit: limits.max_header_len });
            }
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ParseError::HeaderLine(line.chars().take(200).collect()));
        };
        let name = name.trim_end_matches([' ', '\t']);
        if !is_token(name) || value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(ParseError::HeaderLine(line.chars().take(200).collect()));
        }
        if line.len() > limits.max_header_len {
            return Err(ParseError::HeaderTooLong { name: name.to_owned(), limit: limits.max_header_len });
        }
        if headers.len() == limits.max_headers {
            return Err(ParseError::TooManyHeaders { limit: limits.max_headers });
        }
        headers.push(Header { name: header::canonical_name(name).to_owned(), value: value.trim().to_owned() });
    }
    Ok(Headers(headers))
}

/// The body after the head, as Content-Length says, and takes Content-Length out of the
/// message's headers.
fn body_of<'a>(message: &Message, rest: &'a [u8], limits: &Limits, stream: bool) -> Result<&'a [u8], ParseError> {
    let mut declared: Option<usize> = None;
    for value in message.headers().all("Content-Length") {
        let length: usize = value.parse().map_err(|_| ParseError::ContentLength(value.to_owned()))?;
        if declared.is_some_and(|d| d != length) {
            return Err(ParseError::ContentLength(value.to_owned()));
        }
        declared = Some(length);
    }
    let length = match declared {
        Some(length) => length,
        None if stream => return Err(ParseError::NoContentLength),
        None => rest.len(),
    };
    if length > limits.max_body {
        return Err(ParseError::BodyTooLarge { length, limit: limits.max_body });
    }
    rest.get(..length).ok_or(ParseError::Truncated { declared: length, actual: rest.len() })
}

/// What a stream yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamItem {
    /// A message.
    Message(Message),
    /// A CRLF CRLF keep-alive (RFC 5626 §3.5.1): answer with one CRLF.
    Ping,
}

/// Cuts a byte stream (TCP or TLS) into messages. It holds at most one message's worth of
/// bytes ([`Limits::max_message`]); after an error the stream has lost its framing and
/// must be closed.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    limits: Limits,
    buffer: Vec<u8>,
    failed: bool,
}

impl StreamDecoder {
    /// A decoder with these limits.
    pub fn new(limits: Limits) -> Self {
        Self { limits, buffer: Vec::new(), failed: false }
    }

    /// Adds bytes read from the stream; refuses them once a message would pass the limit.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), ParseError> {
        let size = self.buffer.len() + bytes.len();
        // The limit, plus room for keep-alives between messages.
        if size > self.limits.max_message + 4 {
            self.failed = true;
            return Err(ParseError::TooLarge { size, limit: self.limits.max_message });
        }
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    /// The next complete message or keep-alive, if the buffer holds one.
    pub fn next_item(&mut self) -> Option<Result<StreamItem, ParseError>> {
        if self.failed {
            return None;
        }
        if self.buffer.starts_with(b"\r\n\r\n") {
            self.buffer.drain(..4);
            return Some(Ok(StreamItem::Ping));
        }
        let skip = self.buffer.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
        if skip > 0 && skip < self.buffer.len() {
            self.buffer.drain(..skip);
        }
        if self.buffer.is_empty() || find(&self.buffer, b"\r\n\r\n").is_none() {
            return None;
        }
        match parse(&self.buffer, &self.limits, true) {
            Ok((message, used)) => {
                self.buffer.drain(..used);
                Some(Ok(StreamItem::Message(message)))
            }
            Err(ParseError::Truncated { .. }) => None,
            Err(ParseError::Request { error, .. }) if matches!(*error, ParseError::Truncated { .. }) => None,
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }

    /// Bytes held, waiting for the rest of a message.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }
}
