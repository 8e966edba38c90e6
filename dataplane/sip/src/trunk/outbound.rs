//! Where the edge's outbound calls go: one outbound trunk (a carrier's SIP URI or a PBX),
//! with optional digest credentials for its challenges and the caller-id the edge calls
//! from, and the numbers and URIs a call may be placed to ([`Destination`]). Everything is
//! read from configuration or from an API request: validated and bounded here, with an
//! error that says what to write instead.

use std::fmt;

use super::Credentials;

/// The longest destination or trunk URI taken.
pub const MAX_URI: usize = 256;

/// Why an outbound trunk or a destination is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// The trunk URI is not `sip:HOST[:PORT]`.
    #[error(
        "outbound trunk {0:?} is not a SIP URI: write sip:HOST or sip:HOST:PORT (HOST a name or an IP address; \
         UDP, the default transport, is the one supported)"
    )]
    TrunkUri(String),
    /// The caller-id is neither E.164 nor a SIP user name.
    #[error(
        "caller-id {0:?} is neither an E.164 number ('+' and 2-15 digits, not starting with 0) nor a SIP user name \
         (1-64 letters, digits, '.', '-', '_')"
    )]
    CallerId(String),
    /// The destination is neither E.164 nor a SIP URI.
    #[error(
        "{0:?} is not a number or SIP URI to call: write an E.164 number ('+' and 2-15 digits, e.g. +442079460018) \
         or sip:USER@HOST[:PORT] (at most 256 characters, no parameters or headers)"
    )]
    Destination(String),
}

/// The outbound trunk (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct OutboundTrunk {
    /// The trunk's host: a name (resolved for each call) or an IP address.
    pub host: String,
    /// Its SIP port (5060 unless the URI says).
    pub port: u16,
    /// Digest credentials for its 401/407 challenges.
    pub credentials: Option<Credentials>,
    /// The number (or SIP user) the edge calls from: the From header's user.
    pub caller_id: String,
}

impl fmt::Debug for OutboundTrunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundTrunk")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("credentials", &self.credentials)
            .field("caller_id", &self.caller_id)
            .finish()
    }
}

impl OutboundTrunk {
    /// The trunk at `uri` (`sip:HOST[:PORT]`, `;transport=udp` allowed), calling as
    /// `caller_id`, with `credentials` for its challenges.
    pub fn new(uri: &str, caller_id: &str, credentials: Option<Credentials>) -> Result<Self, OutboundError> {
        let bad = || OutboundError::TrunkUri(uri.to_owned());
        let rest = uri.trim().strip_prefix("sip:").filter(|_| uri.len() <= MAX_URI).ok_or_else(bad)?;
        let (hostport, params) = rest.split_once(';').unwrap_or((rest, ""));
        for param in params.split(';').filter(|p| !p.is_empty()) {
            if !param.eq_ignore_ascii_case("transport=udp") && !param.eq_ignore_ascii_case("lr") {
                return Err(bad());
            }
        }
        let (host, port) = host_port(hostport).ok_or_else(bad)?;
        if !is_user(caller_id) && !is_e164(caller_id) {
            return Err(OutboundError::CallerId(caller_id.to_owned()));
        }
        Ok(Self { host, port, credentials, caller_id: caller_id.to_owned() })
    }

    /// The Request-URI of a call to `to` through this trunk: a number at the trunk's host
    /// (`sip:+442079460018@trunk:5060;user=phone`), a SIP URI as it is (the trunk routes it).
    pub fn request_uri(&self, to: &Destination) -> String {
        match to {
            Destination::Number(number) => format!("sip:{number}@{}:{};user=phone", self.host_for_uri(), self.port),
            Destination::Uri(uri) => uri.clone(),
        }
    }

    /// The From URI: the caller-id at `local` (the edge's advertised SIP address).
    pub fn from_uri(&self, local: std::net::SocketAddr) -> String {
        format!("sip:{}@{local}", self.caller_id)
    }

    fn host_for_uri(&self) -> String {
        if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() }
    }
}

/// Whom a call is placed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// An E.164 number, `+` and digits.
    Number(String),
    /// A SIP URI, `sip:user@host[:port]`.
    Uri(String),
}

impl Destination {
    /// An E.164 number or a SIP URI (see [`OutboundError::Destination`]).
    pub fn parse(text: &str) -> Result<Self, OutboundError> {
        let bad = || OutboundError::Destination(text.chars().take(MAX_URI).collect());
        if is_e164(text) {
            return Ok(Self::Number(text.to_owned()));
        }
        let rest = text.strip_prefix("sip:").filter(|_| text.len() <= MAX_URI).ok_or_else(bad)?;
        let (user, hostport) = rest.split_once('@').ok_or_else(bad)?;
        if !(is_user(user) || is_e164(user)) || host_port(hostport).is_none() {
            return Err(bad());
        }
        Ok(Self::Uri(text.to_owned()))
    }

    /// Where a SIP URI is, `HOST` and `PORT` (5060 when absent), to call it with no trunk
    /// between; `None` for a number, which only a trunk can route.
    pub fn host_port(&self) -> Option<(String, u16)> {
        match self {
            Self::Number(_) => None,
            Self::Uri(uri) => host_port(uri.strip_prefix("sip:")?.split_once('@')?.1),
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(text) | Self::Uri(text) => f.write_str(text),
        }
    }
}

/// `+` and 2-15 digits, the first not 0.
pub fn is_e164(text: &str) -> bool {
    text.strip_prefix('+').is_some_and(|digits| {
        (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0')
    })
}

/// A SIP user name the edge writes: 1-64 letters, digits, `.`, `-`, `_`.
fn is_user(text: &str) -> bool {
    (1..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// `HOST[:PORT]`: a DNS name, an IPv4 address or a bracketed IPv6 address, and a port
/// (5060 when absent). `None` when it is not one.
fn host_port(text: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<std::net::Ipv6Addr>().ok()?;
        (v6.to_owned(), after.strip_prefix(':'))
    } else {
        let (host, port) = match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        let name = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !name {
            return None;
        }
        (host.to_owned(), port)
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => 5060,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trunk_is_a_sip_uri_with_a_caller_id() {
        let trunk = OutboundTrunk::new("sip:trunk.example.com", "+4930123456", None).expect("valid");
        assert_eq!((trunk.host.as_str(), trunk.port), ("trunk.example.com", 5060));
        let number = Destination::parse("+442079460018").expect("E.164");
        assert_eq!(trunk.request_uri(&number), "sip:+442079460018@trunk.example.com:5060;user=phone");
        assert_eq!(trunk.from_uri("192.0.2.1:5060".parse().unwrap()), "sip:+4930123456@192.0.2.1:5060");
        let uri = Destination::parse("sip:alice@pbx.example.com:5080").expect("a SIP URI");
        assert_eq!(trunk.request_uri(&uri), "sip:alice@pbx.example.com:5080", "a URI goes as it is");
        assert_eq!(uri.host_port(), Some(("pbx.example.com".to_owned(), 5080)), "where it is called with no trunk");
        assert_eq!(
            Destination::parse("sip:bob@[2001:db8::2]").expect("v6").host_port(),
            Some(("2001:db8::2".into(), 5060))
        );
        assert_eq!(number.host_port(), None, "a number needs a trunk");
        let trunk = OutboundTrunk::new("sip:127.0.0.1:5090;transport=udp", "switchboard", None).expect("valid");
        assert_eq!((trunk.host.as_str(), trunk.port), ("127.0.0.1", 5090));
        let v6 = OutboundTrunk::new("sip:[2001:db8::1]:5062", "bank", None).expect("IPv6");
        assert_eq!(v6.request_uri(&number), "sip:+442079460018@[2001:db8::1]:5062;user=phone");
    }

    #[test]
    fn bad_trunks_and_caller_ids_are_refused_with_what_to_write() {
        for bad in [
            "trunk.example.com",
            "sips:trunk",
            "sip:",
            "sip:trunk:0",
            "sip:trunk:70000",
            "sip:tr unk",
            "sip:trunk;transport=tcp",
            "sip:-trunk",
            "sip:[::1",
            "sip:user@trunk",
        ] {
            let error = OutboundTrunk::new(bad, "+4930123456", None).expect_err(bad);
            assert_eq!(error, OutboundError::TrunkUri(bad.to_owned()));
        }
        assert!(OutboundTrunk::new(&format!("sip:{}", "a".repeat(300)), "x", None).is_err());
        for bad in ["", "+", "+0123", "+1234567890123456", "a b", "x@y", &"a".repeat(65)] {
            let error = OutboundTrunk::new("sip:trunk", bad, None).expect_err(bad);
            assert!(matches!(error, OutboundError::CallerId(_)), "{bad}");
            assert!(error.to_string().contains("E.164"));
        }
    }

    #[test]
    fn destinations_are_numbers_or_sip_uris_and_nothing_else() {
        assert_eq!(Destination::parse("+12"), Ok(Destination::Number("+12".into())));
        assert!(matches!(Destination::parse("sip:+442079460018@10.0.0.1"), Ok(Destination::Uri(_))));
        assert!(matches!(Destination::parse("sip:callee@127.0.0.1:5090"), Ok(Destination::Uri(_))));
        for bad in [
            "",
            "442079460018",
            "+44 20 7946",
            "+0442079460018",
            "+1234567890123456",
            "sip:callee",
            "sip:@host",
            "sip:callee@host;transport=tcp",
            "sip:callee@host?subject=x",
            "sip:a b@host",
            "tel:+4420",
            "sip:callee@host\r\nVia: x",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("sip:{}@host", "a".repeat(300));
        let error = Destination::parse(&long).expect_err("too long");
        assert!(error.to_string().len() < 700, "the error does not echo unbounded input");
    }
}
