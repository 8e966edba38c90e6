//! Why the demo tool server could not start: its data, its trust settings, its address.

use std::net::SocketAddr;

/// The demo tool server could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoToolsError {
    /// The data file cannot be read.
    #[error("cannot read demo tool data {path}: {message}")]
    Data {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Assertions would be trusted from every namespace.
    #[error(
        "trust at least one namespace (--trusted-namespace): the gateway signs identity assertions for every \
         tenant's Agents, so a server that trusts them all serves any tenant's callers"
    )]
    NoTrustedNamespace,
    /// Trusting every request's account number, on an address others reach.
    #[error(
        "{addr} is not a loopback address: a server that trusts the account number in each request \
         (--insecure-no-identity) serves only this machine; give it --gateway-public-key and --trusted-namespace"
    )]
    AnyoneBeyondLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {message}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
}
