//! SIP over TLS (RFC 3261 §26.2, RFC 5630): a TCP listener of its own (5061 by custom)
//! whose connections get a TLS handshake (rustls, the aws-lc-rs provider the gateway's TLS
//! already builds) and are then served as SIP over TCP is ([`crate::tcp::serve`]: the same
//! framing, limits and write queue), with [`Transport::Tls`] on every message so the
//! dialogues they open say TLS in their Via and Contact and their requests and answers go
//! back on the same connection.
//!
//! Bounded beyond TCP's bounds: the handshake's time ([`TlsConfig::handshake_timeout`]: a
//! client that opens a connection and never finishes it is closed), and the connections one
//! address may hold at once ([`TlsConfig::max_per_address`]; a handshake under way counts).
//! Each connection's outcome (established, handshake failed or timed out, refused for
//! either bound) is logged and counted (`switchboard_sip_tls_connections_total`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use switchboard_sip::call::Transport;
use switchboard_sip::sip::Limits;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::{Metrics, TlsConnection};
use crate::tcp::{Connections, FromConnection, Refused};

/// The port SIP over TLS listens on by custom (RFC 3261 §19.1.2).
pub const DEFAULT_PORT: u16 = 5061;
/// How long a client has to finish its handshake by default.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS connections one address may hold at once by default (a phone holds one; a trunk's
/// proxy a few).
pub const MAX_PER_ADDRESS: usize = 16;

/// Why the TLS listener cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read.
    #[error("cannot read the SIP TLS {what} {}: {source}", path.display())]
    Read {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate PEM holds no readable certificate.
    #[error("the SIP TLS certificate PEM holds no readable CERTIFICATE block{}", detail(.0))]
    Certificate(Option<rustls::pki_types::pem::Error>),
    /// The private key PEM holds no readable key.
    #[error("the SIP TLS private key PEM holds no readable PKCS#8, PKCS#1 or SEC1 key: {0}")]
    Key(#[source] rustls::pki_types::pem::Error),
    /// The certificate and key do not go together, or rustls refuses them.
    #[error("the SIP TLS certificate and private key are not usable together: {0}")]
    Config(#[from] rustls::Error),
}

fn detail(error: &Option<rustls::pki_types::pem::Error>) -> String {
    error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
}

/// The TLS listener's settings (see the module docs).
#[derive(Clone)]
pub struct TlsConfig {
    /// Where to listen (port 0: any free port, see [`crate::Edge::tls_addr`]).
    pub listen: SocketAddr,
    /// The handshakes' certificate and key.
    acceptor: TlsAcceptor,
    /// How long a client has to finish its handshake.
    pub handshake_timeout: Duration,
    /// TLS connections one IP address may hold at once.
    pub max_per_address: usize,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("listen", &self.listen)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_per_address", &self.max_per_address)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Listens on `listen` with the certificate chain `cert_pem` (leaf first) and the
    /// private key `key_pem` (PKCS#8, PKCS#1 or SEC1), the default bounds.
    pub fn from_pem(listen: SocketAddr, cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Certificate(Some(e)))?;
        if chain.is_empty() {
            return Err(TlsError::Certificate(None));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::Key)?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(Self {
            listen,
            acceptor: TlsAcceptor::from(Arc::new(config)),
            handshake_timeout: HANDSHAKE_TIMEOUT,
            max_per_address: MAX_PER_ADDRESS,
        })
    }

    /// The handshakes' acceptor.
    #[cfg(test)]
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// [`TlsConfig::from_pem`] with the PEM files at `cert` and `key` (a Kubernetes TLS
    /// Secret's `tls.crt` and `tls.key`).
    pub fn from_pem_files(listen: SocketAddr, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |what, path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_owned(), source })
        };
        Self::from_pem(listen, &read("certificate", cert)?, &read("private key", key)?)
    }
}

/// The bound TLS listener, as the SIP task holds it.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) listener: TcpListener,
    pub(crate) config: TlsConfig,
}

impl Listener {
    /// Binds `config.listen`.
    pub(crate) async fn bind(config: TlsConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await?;
        Ok(Self { listener, config })
    }
}

/// What a TLS connection's task is handed besides its socket.
pub(crate) struct Serving<'a> {
    pub(crate) limits: Limits,
    pub(crate) inbound: &'a mpsc::Sender<FromConnection>,
    pub(crate) tasks: &'a TaskTracker,
    pub(crate) shutdown: &'a CancellationToken,
    pub(crate) metrics: &'a Metrics,
}

/// Takes a TCP connection accepted on the TLS listener: closes it at once when the edge or
/// its address holds too many, else starts its task (the handshake within its time, then
/// SIP as over TCP).
pub(crate) fn accept(
    connections: &mut Connections,
    config: &TlsConfig,
    stream: TcpStream,
    peer: SocketAddr,
    serving: Serving<'_>,
) {
    let writes = match connections.open(peer) {
        Ok(writes) => writes,
        Err(refused) => {
            let (outcome, why) = match refused {
                Refused::TooMany => (TlsConnection::TooMany, "the edge's TLS connections are all taken"),
                Refused::TooManyFromAddress => {
                    (TlsConnection::TooManyFromAddress, "its address holds as many TLS connections as one may")
                }
            };
            tracing::warn!(%peer, limit = config.max_per_address, "SIP TLS connection closed at once: {why}");
            serving.metrics.tls_connection(outcome);
            return;
        }
    };
    let Serving { limits, inbound, tasks, shutdown, metrics } = serving;
    let (acceptor, timeout) = (config.acceptor.clone(), config.handshake_timeout);
    let (inbound, shutdown, metrics) = (inbound.clone(), shutdown.clone(), metrics.clone());
    tasks.spawn(async move {
        let handshake = tokio::select! {
            done = tokio::time::timeout(timeout, acceptor.accept(stream)) => done,
            () = shutdown.cancelled() => Ok(Err(std::io::Error::other("the edge is shutting down"))),
        };
        match handshake {
            Ok(Ok(stream)) => {
                metrics.tls_connection(TlsConnection::Established);
                tracing::debug!(%peer, "SIP TLS connection established");
                crate::tcp::serve(stream, Transport::Tls, peer, limits, inbound, writes, shutdown).await;
            }
            Ok(Err(error)) => {
                metrics.tls_connection(TlsConnection::HandshakeFailed);
                tracing::warn!(%peer, %error, "SIP TLS handshake failed: closing the connection");
                drop(writes);
                let _ = inbound.send(FromConnection::Closed(Transport::Tls, peer)).await;
            }
            Err(_) => {
                metrics.tls_connection(TlsConnection::HandshakeTimeout);
                tracing::warn!(%peer, ?timeout, "SIP TLS handshake not finished in time: closing the connection");
                drop(writes);
                let _ = inbound.send(FromConnection::Closed(Transport::Tls, peer)).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{TlsConfig, TlsError};

    #[test]
    fn a_certificate_and_key_that_do_not_read_or_do_not_match_are_refused_by_name() {
        let listen = "127.0.0.1:0".parse().expect("addr");
        let one = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let (cert, key) = (one.cert.pem(), one.signing_key.serialize_pem());
        TlsConfig::from_pem(listen, cert.as_bytes(), key.as_bytes()).expect("a matching pair serves");
        let error = TlsConfig::from_pem(listen, b"not a PEM", key.as_bytes()).expect_err("no certificate");
        assert!(matches!(error, TlsError::Certificate(None)), "{error}");
        let error = TlsConfig::from_pem(listen, cert.as_bytes(), cert.as_bytes()).expect_err("no key");
        assert!(error.to_string().contains("private key PEM holds no readable"), "{error}");
        let wrong = other.signing_key.serialize_pem();
        let error = TlsConfig::from_pem(listen, cert.as_bytes(), wrong.as_bytes()).expect_err("another's key");
        assert!(error.to_string().contains("not usable together"), "{error}");
        let missing = std::path::Path::new("/nonexistent/tls.crt");
        let error = TlsConfig::from_pem_files(listen, missing, missing).expect_err("no file");
        assert!(error.to_string().contains("/nonexistent/tls.crt"), "{error}");
    }
}
