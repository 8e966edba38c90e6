//! The outcomes of the edge's SIP connections over TCP and TLS, as its metrics label them.

/// What came of a TCP connection to the TLS listener
/// (`switchboard_sip_tls_connections_total`'s outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsConnection {
    /// The handshake completed: SIP is served on it.
    Established,
    /// The handshake failed (not TLS, a protocol error, no common cipher, the client
    /// refused the certificate).
    HandshakeFailed,
    /// The client did not finish the handshake within its time.
    HandshakeTimeout,
    /// Closed at once: the edge's TLS connections are all taken.
    TooMany,
    /// Closed at once: its address holds as many TLS connections as one address may.
    TooManyFromAddress,
}

impl TlsConnection {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Established => "established",
            Self::HandshakeFailed => "handshake_failed",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::TooMany => "too_many",
            Self::TooManyFromAddress => "too_many_from_address",
        }
    }
}

/// What came of a connection the edge opened to an outbound trunk
/// (`switchboard_sip_outbound_connections_total`'s outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrunkConnection {
    /// Open (and over TLS, the trunk's certificate verified).
    Established,
    /// The TCP connect failed (refused, unreachable).
    ConnectFailed,
    /// The TLS handshake failed (the certificate not trusted or not for the trunk's name).
    HandshakeFailed,
    /// Not open within its time.
    Timeout,
    /// The edge holds as many connections as it may.
    TooMany,
}

impl TrunkConnection {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Established => "established",
            Self::ConnectFailed => "connect_failed",
            Self::HandshakeFailed => "handshake_failed",
            Self::Timeout => "timeout",
            Self::TooMany => "too_many",
        }
    }
}
