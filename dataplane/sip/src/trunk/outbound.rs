//! Where the edge's outbound calls go: an outbound trunk (a carrier's SIP URI or a PBX),
//! over UDP, TCP or TLS (RFC 3261 §18, §26: `;transport=tcp`, `;transport=tls` or a
//! `sips:` URI), with optional digest credentials for its challenges and the caller-id the
//! edge calls from, and the numbers and URIs a call may be placed to ([`Destination`]).
//! Everything is read from configuration or from an API request: validated and bounded
//! here, with an error that says what to write instead.

use std::fmt;

use super::Credentials;
use crate::call::Transport;

/// The longest destination or trunk URI taken.
pub const MAX_URI: usize = 256;

/// Why an outbound trunk or a destination is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// The trunk URI is not `sip:HOST[:PORT]` with a transport the edge speaks.
    #[error(
        "outbound trunk {0:?} is not a SIP URI the edge can call: write sip:HOST[:PORT] (UDP), \
         sip:HOST[:PORT];transport=tcp, sip:HOST[:PORT];transport=tls or sips:HOST[:PORT] (TLS; port 5061 unless \
         given), HOST a name or an IP address"
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
    /// Its SIP port (5060, 5061 over TLS, unless the URI says).
    pub port: u16,
    /// The transport calls go over: UDP, or a TCP or TLS connection the edge opens to the
    /// trunk (the dialogue's later requests go on it too).
    pub transport: Transport,
    /// The URI was `sips:` (TLS all the way, RFC 3261 §26.2.2): the Request-URIs of numbers
    /// through it are `sips:` too.
    pub secure: bool,
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
            .field("transport", &self.transport)
            .field("secure", &self.secure)
            .field("credentials", &self.credentials)
            .field("caller_id", &self.caller_id)
            .finish()
    }
}

impl OutboundTrunk {
    /// The trunk at `uri` (`sip:HOST[:PORT]` with `;transport=udp|tcp|tls` and `;lr`
    /// allowed, or `sips:HOST[:PORT]`: TLS), calling as `caller_id`, with `credentials` for
    /// its challenges.
    pub fn new(uri: &str, caller_id: &str, credentials: Option<Credentials>) -> Result<Self, OutboundError> {
        let bad = || OutboundError::TrunkUri(uri.to_owned());
        let text = uri.trim();
        let (secure, rest) = match (text.strip_prefix("sip:"), text.strip_prefix("sips:")) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err(bad()),
        };
        if uri.len() > MAX_URI {
            return Err(bad());
        }
        let (hostport, params) = rest.split_once(';').unwrap_or((rest, ""));
        let mut transport = None;
        for param in params.split(';').filter(|p| !p.is_empty()) {
            let named = match param.to_ascii_lowercase().as_str() {
                "lr" => continue,
                "transport=udp" => Transport::Udp,
                "transport=tcp" => Transport::Tcp,
                "transport=tls" => Transport::Tls,
                _ => return Err(bad()),
            };
            if transport.replace(named).is_some() {
                return Err(bad());
            }
        }
        let transport = match (secure, transport) {
            // sips: is TLS; `;transport=tcp` on it is the old way of saying TLS over TCP.
            (true, None | Some(Transport::Tcp | Transport::Tls)) => Transport::Tls,
            (true, Some(Transport::Udp)) => return Err(bad()),
            (false, named) => named.unwrap_or(Transport::Udp),
        };
        let default_port = if transport == Transport::Tls { 5061 } else { 5060 };
        let (host, port) = host_port_or(hostport, default_port).ok_or_else(bad)?;
        if !is_user(caller_id) && !is_e164(caller_id) {
            return Err(OutboundError::CallerId(caller_id.to_owned()));
        }
        Ok(Self { host, port, transport, secure, credentials, caller_id: caller_id.to_owned() })
    }

    /// The Request-URI of a call to `to` through this trunk: a number at the trunk's host
    /// (`sip:+442079460018@trunk:5060;user=phone`, with `;transport=tcp` or `;transport=tls`
    /// over those, `sips:` through a `sips:` trunk), a SIP URI as it is (the trunk routes it).
    pub fn request_uri(&self, to: &Destination) -> String {
        match to {
            Destination::Number(number) => {
                let scheme = if self.secure { "sips" } else { "sip" };
                let transport = match (self.secure, self.transport) {
                    (true, _) | (false, Transport::Udp) => "",
                    (false, Transport::Tcp) => ";transport=tcp",
                    (false, Transport::Tls) => ";transport=tls",
                };
                format!("{scheme}:{number}@{}:{};user=phone{transport}", self.host_for_uri(), self.port)
            }
            Destination::Uri(uri) => uri.clone(),
        }
    }

    /// The trunk as a URI again (for logs and errors): `sips:HOST:PORT`, or `sip:HOST:PORT`
    /// with its transport.
    pub fn uri(&self) -> String {
        if self.secure {
            return format!("sips:{}:{}", self.host_for_uri(), self.port);
        }
        let transport = self.transport.as_str().to_ascii_lowercase();
        format!("sip:{}:{};transport={transport}", self.host_for_uri(), self.port)
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

    /// Where a SIP URI's host is, `(HOST, PORT)` (5060 when the URI names none): the edge
    /// reaches a person at a SIP URI there directly. `None` for a number (it goes through a
    /// trunk).
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
    host_port_or(text, 5060)
}

/// [`host_port`] with `default` as the port when absent.
fn host_port_or(text: &str, default: u16) -> Option<(String, u16)> {
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
        None => default,
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
        assert_eq!(uri.host_port(), Some(("pbx.example.com".to_owned(), 5080)));
        assert_eq!(
            Destination::parse("sip:bob@[2001:db8::2]").expect("v6").host_port(),
            Some(("2001:db8::2".to_owned(), 5060))
        );
        assert_eq!(number.host_port(), None);
        assert_eq!(trunk.request_uri(&uri), "sip:alice@pbx.example.com:5080", "a URI goes as it is");
        let trunk = OutboundTrunk::new("sip:127.0.0.1:5090;transport=udp", "switchboard", None).expect("valid");
        assert_eq!((trunk.host.as_str(), trunk.port), ("127.0.0.1", 5090));
        let v6 = OutboundTrunk::new("sip:[2001:db8::1]:5062", "bank", None).expect("IPv6");
        assert_eq!(v6.request_uri(&number), "sip:+442079460018@[2001:db8::1]:5062;user=phone");
    }

    #[test]
    fn bad_trunks_and_caller_ids_are_refused_with_what_to_write() {
        for bad in [
            "trunk.example.com",
            "sips:trunk;transport=udp",
            "sip:",
            "sips:",
            "sip:trunk:0",
            "sip:trunk:70000",
            "sip:tr unk",
            "sip:trunk;transport=sctp",
            "sip:trunk;transport=tcp;transport=tls",
            "sip:trunk;maddr=10.0.0.1",
            "tel:+4930123",
            "sip:-trunk",
            "sip:[::1",
            "sip:user@trunk",
        ] {
            let error = OutboundTrunk::new(bad, "+4930123456", None).expect_err(bad);
            assert_eq!(error, OutboundError::TrunkUri(bad.to_owned()));
        }
        assert!(OutboundTrunk::new(&format!("sip:{}", "a".repeat(300)), "x", None).is_err());
        let error = OutboundTrunk::new("sips:trunk;transport=udp", "x", None).expect_err("TLS over UDP");
        assert!(error.to_string().contains(";transport=tls or sips:"), "says what to write: {error}");
        for bad in ["", "+", "+0123", "+1234567890123456", "a b", "x@y", &"a".repeat(65)] {
            let error = OutboundTrunk::new("sip:trunk", bad, None).expect_err(bad);
            assert!(matches!(error, OutboundError::CallerId(_)), "{bad}");
            assert!(error.to_string().contains("E.164"));
        }
    }

    #[test]
    fn a_trunk_over_tcp_or_tls_says_so_in_its_request_uris() {
        let number = Destination::parse("+442079460018").expect("E.164");
        let tcp = OutboundTrunk::new("sip:10.0.0.9:5070;transport=TCP", "bank", None).expect("TCP");
        assert_eq!((tcp.transport, tcp.port, tcp.secure), (Transport::Tcp, 5070, false));
        assert_eq!(tcp.request_uri(&number), "sip:+442079460018@10.0.0.9:5070;user=phone;transport=tcp");
        assert_eq!(tcp.uri(), "sip:10.0.0.9:5070;transport=tcp");
        let tls = OutboundTrunk::new("sip:trunk.example.com;transport=tls;lr", "bank", None).expect("TLS");
        assert_eq!((tls.transport, tls.port, tls.secure), (Transport::Tls, 5061, false), "TLS's port by default");
        assert_eq!(tls.request_uri(&number), "sip:+442079460018@trunk.example.com:5061;user=phone;transport=tls");
        for sips in ["sips:trunk.example.com", "sips:trunk.example.com:5061;transport=tcp"] {
            let trunk = OutboundTrunk::new(sips, "bank", None).expect("sips");
            assert_eq!((trunk.transport, trunk.port, trunk.secure), (Transport::Tls, 5061, true), "{sips}");
            assert_eq!(trunk.request_uri(&number), "sips:+442079460018@trunk.example.com:5061;user=phone");
            assert_eq!(trunk.uri(), "sips:trunk.example.com:5061");
        }
        let udp = OutboundTrunk::new("sip:trunk", "bank", None).expect("UDP");
        assert_eq!((udp.transport, udp.secure), (Transport::Udp, false));
        let uri = Destination::parse("sip:alice@pbx.example.com:5080").expect("a SIP URI");
        assert_eq!(tls.request_uri(&uri), "sip:alice@pbx.example.com:5080", "a URI goes as it is");
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
