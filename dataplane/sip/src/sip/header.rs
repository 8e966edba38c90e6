//! Reading the header fields the edge acts on: compact names, the top Via's branch, CSeq,
//! and name-addr values (From, To, Contact, P-Asserted-Identity) with their tag and the
//! user part of their URI (a phone number, for this edge).

use super::Method;

/// A header the edge needs is missing or does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A header every request needs is absent.
    #[error("the {0} header is missing")]
    Missing(&'static str),
    /// The top Via has no branch parameter (RFC 3261 §8.1.1.7 requires one).
    #[error("the top Via header has no branch parameter: {0:?}")]
    NoBranch(String),
    /// CSeq is not `<number> <method>`, or the number is out of range (below 2^31).
    #[error("the CSeq header is not a sequence number below 2^31 and a method: {0:?}")]
    CSeq(String),
    /// CSeq's method is not the request's.
    #[error("the CSeq method {cseq} does not match the request method {request}")]
    CSeqMethod {
        /// CSeq's method.
        cseq: String,
        /// The request line's method.
        request: String,
    },
    /// A From/To/Contact value is not a name-addr or addr-spec.
    #[error("not a SIP address (name-addr or addr-spec): {0:?}")]
    Address(String),
}

/// The long form of a header name given in compact form (RFC 3261 §7.3.3 and later
/// RFCs); other names are returned as they are.
pub fn canonical_name(name: &str) -> &str {
    if name.len() != 1 {
        return name;
    }
    match name.as_bytes()[0].to_ascii_lowercase() {
        b'v' => "Via",
        b'f' => "From",
        b't' => "To",
        b'i' => "Call-ID",
        b'm' => "Contact",
        b'l' => "Content-Length",
        b'c' => "Content-Type",
        b'e' => "Content-Encoding",
        b'k' => "Supported",
        b's' => "Subject",
        b'o' => "Event",
        b'r' => "Refer-To",
        b'b' => "Referred-By",
        b'u' => "Allow-Events",
        b'x' => "Session-Expires",
        _ => name,
    }
}

/// Splits a header value at commas outside quotes and angle brackets (a Via or Contact
/// line may carry several values).
pub fn split_values(value: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut angle) = (0, false, false);
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b'<' if !quoted => angle = true,
            b'>' if !quoted => angle = false,
            b',' if !quoted && !angle => {
                parts.push(value[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(value[start.min(value.len())..].trim());
    parts.into_iter()
}

/// The value of parameter `name` in a `;a=b;c` list (case-insensitive names); a
/// parameter without a value reads as `""`.
pub fn param<'a>(params: &'a str, name: &str) -> Option<&'a str> {
    params.split(';').map(str::trim).find_map(|p| {
        let (key, value) = p.split_once('=').unwrap_or((p, ""));
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The branch parameter of the first Via value.
pub fn via_branch(via: &str) -> Result<&str, HeaderError> {
    let first = split_values(via).next().unwrap_or_default();
    let params = first.split_once(';').map(|(_, p)| p).unwrap_or_default();
    match param(params, "branch") {
        Some(branch) if !branch.is_empty() => Ok(branch),
        _ => Err(HeaderError::NoBranch(via.to_owned())),
    }
}

/// A CSeq value: a sequence number and a method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CSeq {
    /// The sequence number (below 2^31, RFC 3261 §8.1.1.5).
    pub seq: u32,
    /// The method.
    pub method: Method,
}

impl CSeq {
    /// Reads `314159 INVITE`.
    pub fn parse(value: &str) -> Result<Self, HeaderError> {
        let bad = || HeaderError::CSeq(value.to_owned());
        let mut parts = value.split_whitespace();
        let (Some(seq), Some(method), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let seq: u32 = seq.parse().map_err(|_| bad())?;
        if seq >= 1 << 31 || !is_token(method) {
            return Err(bad());
        }
        Ok(Self { seq, method: Method::from_token(method) })
    }
}

/// A name-addr (`"Alice" <sip:alice@example.com>;tag=1`) or addr-spec
/// (`sip:alice@example.com;tag=1`) value, borrowed from its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameAddr<'a> {
    /// The display name, unquoted, if any.
    pub display: Option<&'a str>,
    /// The URI, without the angle brackets.
    pub uri: &'a str,
    /// The header parameters after the address (`tag=1;...`), without the first `;`.
    pub params: &'a str,
}

impl<'a> NameAddr<'a> {
    /// Reads a From, To, Contact or P-Asserted-Identity value.
    pub fn parse(value: &'a str) -> Result<Self, HeaderError> {
        let bad = || HeaderError::Address(value.to_owned());
        let value = value.trim();
        if let Some(open) = value.find('<') {
            let close = value[open..].find('>').ok_or_else(bad)? + open;
            let display = value[..open].trim().trim_matches('"').trim();
            let uri = value[open + 1..close].trim();
            let rest = value[close + 1..].trim();
            let params = match rest.strip_prefix(';') {
                Some(params) => params,
                None if rest.is_empty() => "",
                None => return Err(bad()),
            };
            if uri.is_empty() || !uri.contains(':') {
                return Err(bad());
            }
            Ok(Self { display: (!display.is_empty()).then_some(display), uri, params })
        } else {
            if value.contains(['"', ' ', '>']) || !value.contains(':') {
                return Err(bad());
            }
            let (uri, params) = value.split_once(';').unwrap_or((value, ""));
            Ok(Self { display: None, uri, params })
        }
    }

    /// The tag parameter, if any.
    pub fn tag(&self) -> Option<&'a str> {
        param(self.params, "tag").filter(|t| !t.is_empty())
    }

    /// The user part of the URI: `+4930123` in `sip:+4930123@host;user=phone` or
    /// `tel:+4930123;phone-context=...`; `None` for a URI without one.
    pub fn user(&self) -> Option<&'a str> {
        uri_user(self.uri)
    }
}

/// The user part of a `sip:`, `sips:` or `tel:` URI (without password or parameters).
pub fn uri_user(uri: &str) -> Option<&str> {
    let (scheme, rest) = uri.split_once(':')?;
    let user = if scheme.eq_ignore_ascii_case("tel") {
        rest.split(';').next()?
    } else if scheme.eq_ignore_ascii_case("sip") || scheme.eq_ignore_ascii_case("sips") {
        let (userinfo, _) = rest.split_once('@')?;
        let userinfo = userinfo.split(';').next()?;
        userinfo.split(':').next()?
    } else {
        return None;
    };
    (!user.is_empty()).then_some(user)
}

/// Whether `s` is a non-empty RFC 3261 token.
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&b))
}
