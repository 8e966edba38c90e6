//! The outbound HTTP client for tool servers, MCP servers and OpenAI-compatible model
//! servers: `http://` and `https://` (rustls, HTTP/1.1 or HTTP/2 by ALPN), trusting the
//! system's root certificates plus any extra CA certificates the operator configured
//! (`SWITCHBOARD_CA_FILE`: a private CA in front of in-cluster services).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The client type: pooled, `http` and `https`.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How long to wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Certificates trusted for outbound TLS.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    extra: Arc<Vec<CertificateDer<'static>>>,
}

/// The trust settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The CA file cannot be read.
    #[error("cannot read the CA file {path}: {message}; check --ca-file / SWITCHBOARD_CA_FILE")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The CA file holds no usable certificate.
    #[error(
        "the CA file {path} holds no PEM certificate ({message}); it must contain -----BEGIN CERTIFICATE----- blocks"
    )]
    Parse {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
}

impl Trust {
    /// The system roots only.
    pub fn system() -> Self {
        Self::default()
    }

    /// The system roots plus the PEM certificates in `pem`.
    pub fn with_pem(pem: &[u8], origin: &str) -> Result<Self, TrustError> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TrustError::Parse { path: origin.to_owned(), message: e.to_string() })?;
        if certs.is_empty() {
            return Err(TrustError::Parse { path: origin.to_owned(), message: "no certificate found".into() });
        }
        Ok(Self { extra: Arc::new(certs) })
    }

    /// The system roots, plus the PEM file at `path` when given.
    pub fn from_file(path: Option<&Path>) -> Result<Self, TrustError> {
        let Some(path) = path else { return Ok(Self::system()) };
        let pem = std::fs::read(path)
            .map_err(|e| TrustError::Read { path: path.display().to_string(), message: e.to_string() })?;
        Self::with_pem(&pem, &path.display().to_string())
    }

    fn roots(&self) -> Result<RootCertStore, TrustError> {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!(%error, "skipping a system root certificate source");
        }
        let (_, ignored) = roots.add_parsable_certificates(native.certs);
        if ignored > 0 {
            tracing::debug!(ignored, "system root certificates rustls cannot use");
        }
        for cert in self.extra.iter() {
            roots
                .add(cert.clone())
                .map_err(|e| TrustError::Tls(format!("an extra CA certificate is unusable: {e}")))?;
        }
        if roots.is_empty() {
            tracing::warn!(
                "no trusted root certificates (the system has none and no --ca-file was given): https:// tool, MCP and model servers will fail to verify"
            );
        }
        Ok(roots)
    }

    /// A pooled client for `http://` and `https://` URLs.
    pub fn client(&self) -> Result<HttpClient, TrustError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TrustError::Tls(e.to_string()))?
            .with_root_certificates(self.roots()?)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        Ok(Client::builder(TokioExecutor::new()).build(connector))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let error = Trust::with_pem(b"not a certificate", "ca.pem").expect_err("refused");
        assert!(error.to_string().contains("ca.pem holds no PEM certificate"), "{error}");
    }

    #[test]
    fn a_generated_certificate_is_accepted_and_trusted() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let trust = Trust::with_pem(cert.cert.pem().as_bytes(), "test").expect("parses");
        assert_eq!(trust.extra.len(), 1);
        assert!(!trust.roots().expect("roots").is_empty());
    }

    #[test]
    fn a_missing_ca_file_says_which_option_to_check() {
        let error = Trust::from_file(Some(Path::new("/nonexistent/ca.pem"))).expect_err("refused");
        assert!(error.to_string().contains("SWITCHBOARD_CA_FILE"), "{error}");
    }
}
