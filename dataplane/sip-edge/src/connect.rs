//! The edge's own TCP and TLS connections to an outbound trunk (RFC 3261 §18.1.1, §26.2):
//! opened when a call is placed through a trunk whose URI says `;transport=tcp`,
//! `;transport=tls` or `sips:`, and kept for the next calls to it. Opening one is bounded in
//! time ([`CONNECT_TIMEOUT`]: the TCP connect and the TLS handshake together), and a TLS
//! trunk's certificate is verified ([`TrunkTls`]: against the system's roots, or only the
//! CA file the trunk is configured with) for the trunk's host name (or IP address). Once
//! open, a connection is served exactly as one a phone opened ([`crate::tcp::serve`]: the
//! same framing, message limits, write queue and idle timeout), so the dialogue's answers
//! and later requests (ACK, BYE, both ways) go on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use switchboard_sip::call::Transport;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long opening a connection to a trunk may take: the TCP connect and the TLS
/// handshake together (the TLS listener's handshake timeout, [`crate::tls::HANDSHAKE_TIMEOUT`]).
pub const CONNECT_TIMEOUT: Duration = crate::tls::HANDSHAKE_TIMEOUT;

/// Why a trunk's TLS settings are unusable (at start).
#[derive(Debug, thiserror::Error)]
pub enum TrunkTlsError {
    /// The CA file cannot be read.
    #[error("cannot read the outbound trunk's CA file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA file holds no usable certificate.
    #[error("the outbound trunk's CA file {} holds no usable CERTIFICATE block{}", path.display(), why(.detail))]
    Ca {
        /// The file.
        path: PathBuf,
        /// What was wrong, when something was.
        detail: Option<String>,
    },
    /// Neither a CA file nor any system root to verify the trunk with.
    #[error(
        "no root certificate to verify a TLS trunk with: the system has none; give the trunk a CA file (the PEM of \
         the CA that issued its certificate)"
    )]
    NoRoots,
    /// rustls refuses the configuration (a bug: the settings are fixed).
    #[error("the outbound TLS client cannot be built: {0}")]
    Config(#[from] rustls::Error),
}

fn why(detail: &Option<String>) -> String {
    detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
}

/// How the edge verifies a TLS trunk: the roots it trusts, as a ready client.
#[derive(Clone)]
pub struct TrunkTls {
    connector: TlsConnector,
    /// What it trusts, in words (for logs).
    trusts: String,
}

impl std::fmt::Debug for TrunkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrunkTls").field("trusts", &self.trusts).finish_non_exhaustive()
    }
}

impl TrunkTls {
    /// Trusts the system's roots (a carrier's publicly issued certificate).
    pub fn system() -> Result<Self, TrunkTlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!(%error, "skipping a system root certificate source");
        }
        let _ = roots.add_parsable_certificates(native.certs);
        if roots.is_empty() {
            return Err(TrunkTlsError::NoRoots);
        }
        Self::with_roots(roots, "the system's root certificates".to_owned())
    }

    /// Trusts only the CA certificates of the PEM file at `path` (a private CA, a PBX's
    /// own): the system's roots are not consulted.
    pub fn from_ca_file(path: &Path) -> Result<Self, TrunkTlsError> {
        let pem = std::fs::read(path).map_err(|source| TrunkTlsError::Read { path: path.to_owned(), source })?;
        let bad = |detail: Option<String>| TrunkTlsError::Ca { path: path.to_owned(), detail };
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(Some(e.to_string())))?;
        if certs.is_empty() {
            return Err(bad(None));
        }
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs {
            roots.add(cert).map_err(|e| bad(Some(e.to_string())))?;
        }
        Self::with_roots(roots, format!("the CA file {}", path.display()))
    }

    fn with_roots(roots: rustls::RootCertStore, trusts: String) -> Result<Self, TrunkTlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self { connector: TlsConnector::from(Arc::new(config)), trusts })
    }

    /// What it trusts, in words.
    pub fn trusts(&self) -> &str {
        &self.trusts
    }
}

/// A connection just opened to a trunk.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// Why a connection to a trunk could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The TCP connect failed.
    #[error("cannot connect over TCP: {0}")]
    Connect(#[source] std::io::Error),
    /// The TLS handshake failed (its certificate not trusted, not for its name, ...).
    #[error("the TLS handshake failed: {0}")]
    Handshake(#[source] std::io::Error),
    /// The host is not a name a certificate can be checked against.
    #[error("{0:?} is not a host name or IP address a TLS certificate can be checked against")]
    Name(String),
    /// Not done within [`CONNECT_TIMEOUT`].
    #[error("no connection within {} s", CONNECT_TIMEOUT.as_secs())]
    Timeout,
    /// A TLS trunk without TLS settings (a bug: configuration builds them).
    #[error("no TLS settings for a TLS trunk")]
    NoTls,
}

/// Opens a `transport` connection to `peer` (`host` is the trunk's name, which a TLS
/// certificate must be for), within [`CONNECT_TIMEOUT`]; returns it and its local address.
pub(crate) async fn connect(
    peer: SocketAddr,
    transport: Transport,
    host: &str,
    tls: Option<&TrunkTls>,
) -> Result<(Stream, SocketAddr), ConnectError> {
    let open = async {
        let tcp = TcpStream::connect(peer).await.map_err(ConnectError::Connect)?;
        let _ = tcp.set_nodelay(true);
        let local = tcp.local_addr().map_err(ConnectError::Connect)?;
        if transport != Transport::Tls {
            return Ok((Stream::Tcp(tcp), local));
        }
        let tls = tls.ok_or(ConnectError::NoTls)?;
        let name = ServerName::try_from(host.to_owned()).map_err(|_| ConnectError::Name(host.to_owned()))?;
        let stream = tls.connector.connect(name, tcp).await.map_err(ConnectError::Handshake)?;
        Ok((Stream::Tls(Box::new(stream)), local))
    };
    tokio::time::timeout(CONNECT_TIMEOUT, open).await.map_err(|_| ConnectError::Timeout)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_does_not_read_is_refused_by_name() {
        let missing = Path::new("/nonexistent/trunk-ca.pem");
        let error = TrunkTls::from_ca_file(missing).expect_err("no file");
        assert!(error.to_string().contains("/nonexistent/trunk-ca.pem"), "{error}");
        let dir = std::env::temp_dir().join(format!("sb-trunk-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("ca.pem");
        std::fs::write(&file, "not a PEM").expect("write");
        let error = TrunkTls::from_ca_file(&file).expect_err("no certificate");
        assert!(error.to_string().contains("holds no usable CERTIFICATE"), "{error}");
        let ca = rcgen::generate_simple_self_signed(vec!["trunk.example.com".to_owned()]).expect("a certificate");
        std::fs::write(&file, ca.cert.pem()).expect("write");
        let tls = TrunkTls::from_ca_file(&file).expect("a CA");
        assert!(tls.trusts().contains("ca.pem"), "{tls:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_trunk_whose_certificate_is_not_trusted_fails_its_handshake() {
        let served = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("a certificate");
        let (cert, key) = (served.cert.pem(), served.signing_key.serialize_pem());
        let listen = "127.0.0.1:0".parse().expect("addr");
        let server = crate::tls::TlsConfig::from_pem(listen, cert.as_bytes(), key.as_bytes()).expect("a server");
        let listener = tokio::net::TcpListener::bind(listen).await.expect("binds");
        let peer = listener.local_addr().expect("addr");
        let acceptor = server.acceptor();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = acceptor.accept(stream).await;
                });
            }
        });
        let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("another");
        let dir = std::env::temp_dir().join(format!("sb-trunk-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (trusted, untrusted) = (dir.join("trusted.pem"), dir.join("other.pem"));
        std::fs::write(&trusted, &cert).expect("write");
        std::fs::write(&untrusted, other.cert.pem()).expect("write");
        let good = TrunkTls::from_ca_file(&trusted).expect("trusted");
        let (stream, local) = connect(peer, Transport::Tls, "127.0.0.1", Some(&good)).await.expect("verified");
        assert!(matches!(stream, Stream::Tls(_)) && local.ip().is_loopback());
        let bad = TrunkTls::from_ca_file(&untrusted).expect("a CA");
        let error = connect(peer, Transport::Tls, "127.0.0.1", Some(&bad)).await.expect_err("not trusted");
        assert!(matches!(error, ConnectError::Handshake(_)), "{error}");
        assert!(error.to_string().contains("invalid peer certificate"), "{error}");
        let error = connect(peer, Transport::Tls, "localhost", Some(&good)).await.expect_err("not its name");
        assert!(error.to_string().contains("certificate"), "{error}");
        let (stream, _) = connect(peer, Transport::Tcp, "127.0.0.1", None).await.expect("plain TCP");
        assert!(matches!(stream, Stream::Tcp(_)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
