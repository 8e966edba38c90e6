//! The simulator's TLS: a self-signed certificate generated at start (rcgen) for the
//! loopback names, served by rustls with the aws-lc-rs provider and ALPN `h2` then
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
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![generated.cert.der().clone()], key)
        .map_err(|e| SimError::Tls(format!("the generated certificate is not usable: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(SelfSigned { cert_pem: generated.cert.pem(), acceptor: TlsAcceptor::from(Arc::new(config)) })
}
