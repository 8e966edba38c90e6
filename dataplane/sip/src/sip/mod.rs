//! SIP messages (RFC 3261 §7): requests and responses as values, their headers, and the
//! responses a server builds from a request (§8.2.6: Via, From, To, Call-ID and CSeq
//! copied, a To-tag added on every answer but 100). Parsing, with its limits, is in
//! [`parse`]; reading the fields the edge needs (branch, tags, CSeq, numbers) in [`header`].

pub mod header;
pub mod parse;

use std::fmt;

pub use header::{CSeq, HeaderError, NameAddr};
pub use parse::{Limits, ParseError, StreamDecoder};

/// A SIP request method. Methods this edge does not know keep their name in `Other`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Start (or, inside a dialogue, change) a session.
    Invite,
    /// Confirm a final answer to an INVITE.
    Ack,
    /// End a dialogue.
    Bye,
    /// Cancel a pending INVITE.
    Cancel,
    /// Ask what a server supports (also a keep-alive).
    Options,
    /// Register a contact.
    Register,
    /// Mid-dialogue information (SIP INFO DTMF, for one).
    Info,
    /// Change a session before or after it is answered (RFC 3311).
    Update,
    /// Acknowledge a reliable provisional answer (RFC 3262).
    Prack,
    /// Ask the other side to call someone (RFC 3515).
    Refer,
    /// A notification of an event (RFC 6665).
    Notify,
    /// Any other token.
    Other(String),
}

impl Method {
    /// The method from its token (case-sensitive, as RFC 3261 §7.1 says).
    pub fn from_token(token: &str) -> Self {
        match token {
            "INVITE" => Self::Invite,
            "ACK" => Self::Ack,
            "BYE" => Self::Bye,
            "CANCEL" => Self::Cancel,
            "OPTIONS" => Self::Options,
            "REGISTER" => Self::Register,
            "INFO" => Self::Info,
            "UPDATE" => Self::Update,
            "PRACK" => Self::Prack,
            "REFER" => Self::Refer,
            "NOTIFY" => Self::Notify,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The method's token.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Invite => "INVITE",
            Self::Ack => "ACK",
            Self::Bye => "BYE",
            Self::Cancel => "CANCEL",
            Self::Options => "OPTIONS",
            Self::Register => "REGISTER",
            Self::Info => "INFO",
            Self::Update => "UPDATE",
            Self::Prack => "PRACK",
            Self::Refer => "REFER",
            Self::Notify => "NOTIFY",
            Self::Other(token) => token,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One header field: its canonical name (compact forms expanded) and its value, trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The name as parsed, or its long form if the message used a compact one.
    pub name: String,
    /// The value with surrounding whitespace and line folding removed.
    pub value: String,
}

/// The header fields of a message, in order. `Content-Length` is not kept: it is checked
/// against the body on parse and written from the body on serialize.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(Vec<Header>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a header.
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        self.0.push(Header { name: header::canonical_name(name).to_owned(), value: value.into() });
    }

    /// The first value of `name` (case-insensitive; compact forms are matched too).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).next()
    }

    /// Every value of `name`, in order.
    pub fn all<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> + 'a {
        let name = header::canonical_name(name).to_owned();
        self.0.iter().filter(move |h| h.name.eq_ignore_ascii_case(&name)).map(|h| h.value.as_str())
    }

    /// Replaces every value of `name` with one.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.remove(name);
        self.push(name, value);
    }

    /// Removes every value of `name`.
    pub fn remove(&mut self, name: &str) {
        let name = header::canonical_name(name);
        self.0.retain(|h| !h.name.eq_ignore_ascii_case(name));
    }

    /// The headers in order.
    pub fn iter(&self) -> impl Iterator<Item = &Header> {
        self.0.iter()
    }

    /// How many header fields there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A SIP request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The Request-URI, as written (`sip:+4930123@edge.example.com`).
    pub uri: String,
    /// The header fields.
    pub headers: Headers,
    /// The body (an SDP offer, say), exactly `Content-Length` bytes.
    pub body: Vec<u8>,
}

/// A SIP response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code, 100 to 699.
    pub status: u16,
    /// The reason phrase.
    pub reason: String,
    /// The header fields.
    pub headers: Headers,
    /// The body.
    pub body: Vec<u8>,
}

/// A SIP message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A response.
    Response(Response),
}

impl Message {
    /// The message's headers.
    pub fn headers(&self) -> &Headers {
        match self {
            Self::Request(r) => &r.headers,
            Self::Response(r) => &r.headers,
        }
    }

    /// The message on the wire: start line, headers, a `Content-Length` computed from the
    /// body, an empty line and the body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (start, headers, body) = match self {
            Self::Request(r) => (format!("{} {} SIP/2.0", r.method, r.uri), &r.headers, &r.body),
            Self::Response(r) => (format!("SIP/2.0 {} {}", r.status, r.reason), &r.headers, &r.body),
        };
        let mut out = String::with_capacity(256 + body.len());
        out.push_str(&start);
        out.push_str("\r\n");
        for h in headers.iter() {
            out.push_str(&h.name);
            out.push_str(": ");
            out.push_str(&h.value);
            out.push_str("\r\n");
        }
        out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(body);
        bytes
    }
}

impl Request {
    /// The Call-ID.
    pub fn call_id(&self) -> Result<&str, HeaderError> {
        self.headers.get("Call-ID").ok_or(HeaderError::Missing("Call-ID"))
    }

    /// The CSeq.
    pub fn cseq(&self) -> Result<CSeq, HeaderError> {
        CSeq::parse(self.headers.get("CSeq").ok_or(HeaderError::Missing("CSeq"))?)
    }

    /// The branch of the top Via: with the method it names the server transaction
    /// (RFC 3261 §17.2.3).
    pub fn branch(&self) -> Result<&str, HeaderError> {
        header::via_branch(self.headers.get("Via").ok_or(HeaderError::Missing("Via"))?)
    }

    /// The From header's address.
    pub fn from(&self) -> Result<NameAddr<'_>, HeaderError> {
        NameAddr::parse(self.headers.get("From").ok_or(HeaderError::Missing("From"))?)
    }

    /// The To header's address.
    pub fn to(&self) -> Result<NameAddr<'_>, HeaderError> {
        NameAddr::parse(self.headers.get("To").ok_or(HeaderError::Missing("To"))?)
    }

    /// Checks that the headers every request needs are there and readable (Via with a
    /// branch, From, To, Call-ID, CSeq whose method matches the request's).
    pub fn check(&self) -> Result<(), HeaderError> {
        self.branch()?;
        self.from()?;
        self.to()?;
        self.call_id()?;
        let cseq = self.cseq()?;
        if cseq.method != self.method {
            return Err(HeaderError::CSeqMethod { cseq: cseq.method.to_string(), request: self.method.to_string() });
        }
        Ok(())
    }

    /// A response to this request (RFC 3261 §8.2.6): every Via in order, From, To,
    /// Call-ID and CSeq copied; `to_tag` added to To on every status but 100 when To has
    /// no tag yet; on a 101–299 to an INVITE, every Record-Route in order (§12.1.1). The
    /// reason phrase is the usual one for the status.
    pub fn response(&self, status: u16, to_tag: Option<&str>) -> Response {
        let mut headers = Headers::new();
        for via in self.headers.all("Via") {
            headers.push("Via", via);
        }
        if let Some(from) = self.headers.get("From") {
            headers.push("From", from);
        }
        if let Some(to) = self.headers.get("To") {
            let has_tag = NameAddr::parse(to).map(|a| a.tag().is_some()).unwrap_or(false);
            match to_tag {
                Some(tag) if status != 100 && !has_tag => headers.push("To", format!("{to};tag={tag}")),
                _ => headers.push("To", to),
            }
        }
        for name in ["Call-ID", "CSeq"] {
            if let Some(value) = self.headers.get(name) {
                headers.push(name, value);
            }
        }
        // A response that establishes a dialogue (101–299 to an INVITE) carries every
        // Record-Route in order (§12.1.1): the proxies that asked to stay on the dialogue's
        // path (a carrier's, for its billing or NAT) then see its ACK and BYE.
        if self.method == Method::Invite && (101..300).contains(&status) {
            for route in self.headers.all("Record-Route") {
                headers.push("Record-Route", route);
            }
        }
        Response { status, reason: reason_phrase(status).to_owned(), headers, body: Vec::new() }
    }
}

impl Response {
    /// The CSeq.
    pub fn cseq(&self) -> Result<CSeq, HeaderError> {
        CSeq::parse(self.headers.get("CSeq").ok_or(HeaderError::Missing("CSeq"))?)
    }

    /// The To header's address.
    pub fn to(&self) -> Result<NameAddr<'_>, HeaderError> {
        NameAddr::parse(self.headers.get("To").ok_or(HeaderError::Missing("To"))?)
    }

    /// Sets the reason phrase (a 488 or 403 that says why).
    pub fn with_reason(mut self, reason: &str) -> Self {
        reason.clone_into(&mut self.reason);
        self
    }

    /// Sets a body and its Content-Type.
    pub fn with_body(mut self, content_type: &str, body: Vec<u8>) -> Self {
        self.headers.set("Content-Type", content_type);
        self.body = body;
        self
    }
}

/// The usual reason phrase of a status code (RFC 3261 §21).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Trying",
        180 => "Ringing",
        182 => "Queued",
        183 => "Session Progress",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        420 => "Bad Extension",
        480 => "Temporarily Unavailable",
        481 => "Call/Transaction Does Not Exist",
        482 => "Loop Detected",
        483 => "Too Many Hops",
        486 => "Busy Here",
        487 => "Request Terminated",
        488 => "Not Acceptable Here",
        491 => "Request Pending",
        500 => "Server Internal Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "Version Not Supported",
        513 => "Message Too Large",
        603 => "Decline",
        _ => match status / 100 {
            1 => "Progress",
            2 => "OK",
            3 => "Redirect",
            4 => "Client Error",
            5 => "Server Error",
            _ => "Global Failure",
        },
    }
}

#[cfg(test)]
mod tests;
