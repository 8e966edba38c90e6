//! The simulator's TLS: a self-signed certificate generated at start (rcgen) for the
//! loopback names, or a certificate and key given as PEM files, served by rustls with the aws-lc-rs provider and ALPN `h2` then
//! `http/1.1`, so the SDK negotiates HTTP/2 as it does with the real service.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use super::SimError;

/// Names the generated certificate is valid for unless configured otherwise.
pub const DEFAULT_CERT_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A generated certificate and the acceptor that serves it.
pub struct SelfSigned {
    /// The certificate, PEM: what clients trust.
    pub cert_pem: String,
    /// Accepts TLS connections with it.
    pub acceptor: TlsAcceptor,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

/// Generates a certificate for `names` (DNS names or IP addresses).
pub fn self_signed(names: &[String]) -> Result<SelfSigned, SimError> {
    let generated = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| SimError::Tls(format!("cannot generate a certificate for {names:?}: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let acceptor = acceptor(vec![generated.cert.der().clone()], key)?;
    Ok(SelfSigned { cert_pem: generated.cert.pem(), acceptor })
}

/// Serves the certificate chain `cert_pem` (leaf first) with the private key `key_pem`
/// (PKCS#8, PKCS#1 or SEC1), e.g. one issued by the caller's own CA for the address
/// other machines reach the simulator on. `cert_pem` is what is written for clients.
pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<SelfSigned, SimError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SimError::Tls(format!("the certificate PEM is not readable: {e}")))?;
    if chain.is_empty() {
        return Err(SimError::Tls("the certificate PEM holds no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| SimError::Tls(format!("the private key PEM is not readable: {e}")))?;
    Ok(SelfSigned { cert_pem: cert_pem.to_owned(), acceptor: acceptor(chain, key)? })
}

fn acceptor(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<TlsAcceptor, SimError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| SimError::Tls(format!("the certificate and key are not usable together: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
