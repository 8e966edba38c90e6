//! Request headers of HTTP and MCP tools: the Agent's plain `headers` and its
//! `secretHeaders`, whose values are read from the Secrets the operator mounts read-only in
//! the runtime pod (`<dir>/<secret name>/<key>`, [`contract::SECRETS_DIR`] by default).
//!
//! The files are read at each call, so a rotated Secret is used as soon as the kubelet has
//! refreshed the mount. Values are marked sensitive (the `http` crate's `Debug` hides them)
//! and never appear in errors or logs: a missing or unusable value is reported by its
//! Secret, key and header name only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use switchboard_core::{FailureKind, ToolFailure};
use switchboard_crds::agent::SecretHeader;
use switchboard_crds::contract;

/// A tool's request headers, ready to send.
pub type Headers = Vec<(HeaderName, HeaderValue)>;

/// Largest secret value read.
const MAX_SECRET_BYTES: u64 = 16 * 1024;

/// Where the Secrets of `secretHeaders` are mounted.
#[derive(Clone, Debug)]
pub struct SecretFiles {
    dir: Arc<PathBuf>,
}

impl Default for SecretFiles {
    fn default() -> Self {
        Self::new(contract::SECRETS_DIR)
    }
}

impl SecretFiles {
    /// Secrets mounted under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: Arc::new(dir.into()) }
    }

    /// The folder the Secrets are read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The plain headers and the secret ones, with their values read now.
    pub fn headers(
        &self,
        plain: &std::collections::BTreeMap<String, String>,
        secret: &[SecretHeader],
    ) -> Result<Headers, ToolFailure> {
        let mut headers = Headers::with_capacity(plain.len() + secret.len());
        for (name, value) in plain {
            let name = header_name(name)?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                ToolFailure::new(
                    FailureKind::Unsupported,
                    format!("the {name} header's value is not valid in a header"),
                )
            })?;
            headers.push((name, value));
        }
        for header in secret {
            headers.push((header_name(&header.name)?, self.value(header)?));
        }
        Ok(headers)
    }

    fn value(&self, header: &SecretHeader) -> Result<HeaderValue, ToolFailure> {
        let reference = &header.secret_key_ref;
        let path = self.dir.join(&reference.name).join(&reference.key);
        let unusable = |why: String| {
            ToolFailure::new(FailureKind::Unsupported, "the tool's credentials are not available in this runtime")
                .with_detail(format!(
                    "the {} header's value (key {:?} of the Secret {:?}) {why}",
                    header.name, reference.key, reference.name
                ))
        };
        let size = std::fs::metadata(&path)
            .map_err(|e| unusable(format!("is not mounted in this runtime at {}: {e}", path.display())))?
            .len();
        if size > MAX_SECRET_BYTES {
            return Err(unusable(format!("is larger than {MAX_SECRET_BYTES} bytes")));
        }
        let mut bytes = std::fs::read(&path).map_err(|e| unusable(format!("cannot be read: {e}")))?;
        // Secrets written with `echo` end with a newline, which no header value has.
        while matches!(bytes.last(), Some(b'\n' | b'\r')) {
            bytes.pop();
        }
        let mut full = header.prefix.as_bytes().to_vec();
        full.extend_from_slice(&bytes);
        let mut value = HeaderValue::from_bytes(&full)
            .map_err(|_| unusable("holds characters a header value cannot carry".to_owned()))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// A tool's header name; the identity assertion's header is the runtime's alone (a tool
/// that set it could pass a copied assertion off as the gateway's word for this session).
fn header_name(name: &str) -> Result<HeaderName, ToolFailure> {
    if name.eq_ignore_ascii_case(switchboard_core::assertion::HEADER) {
        return Err(ToolFailure::new(
            FailureKind::Unsupported,
            format!(
                "a tool may not set the {name} header: the runtime sends it, with the gateway's identity assertion"
            ),
        ));
    }
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ToolFailure::new(FailureKind::Unsupported, format!("{name:?} is not a valid header name")))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use switchboard_crds::agent::SecretKeyRef;

    use super::*;

    fn secret_header(name: &str, secret: &str, key: &str, prefix: &str) -> SecretHeader {
        SecretHeader {
            name: name.into(),
            secret_key_ref: SecretKeyRef { name: secret.into(), key: key.into() },
            prefix: prefix.into(),
        }
    }

    #[test]
    fn values_are_read_from_the_mounted_secret_and_never_shown() {
        let dir = std::env::temp_dir().join(format!("switchboard-secrets-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("crm")).expect("dir");
        std::fs::write(dir.join("crm/token"), "s3cr3t-value\n").expect("writes");
        std::fs::write(dir.join("crm/bad"), "line\none").expect("writes");
        let files = SecretFiles::new(&dir);
        let plain = BTreeMap::from([("X-Tenant".to_owned(), "bank".to_owned())]);
        let headers =
            files.headers(&plain, &[secret_header("Authorization", "crm", "token", "Bearer ")]).expect("headers");
        assert_eq!(headers[0].1, "bank");
        assert_eq!(headers[1].0, "authorization");
        assert_eq!(headers[1].1.as_bytes(), b"Bearer s3cr3t-value");
        assert!(headers[1].1.is_sensitive());
        assert!(!format!("{headers:?}").contains("s3cr3t"), "Debug hides the value");

        let missing = files.headers(&BTreeMap::new(), &[secret_header("X-Api-Key", "crm", "nope", "")]).unwrap_err();
        // The operator's log names the Secret and key; the model and the client hear only
        // that the credentials are missing.
        let detail = missing.detail.clone().unwrap_or_default();
        assert!(detail.contains(r#"key "nope" of the Secret "crm""#), "{detail}");
        assert!(!missing.message.contains("crm") && missing.message.contains("credentials"), "{}", missing.message);
        let bad = files.headers(&BTreeMap::new(), &[secret_header("X-Api-Key", "crm", "bad", "")]).unwrap_err();
        let detail = bad.detail.clone().unwrap_or_default();
        assert!(detail.contains("cannot carry") && !detail.contains("line"), "{detail}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_tool_cannot_set_the_identity_assertion_header() {
        let plain = BTreeMap::from([("x-switchboard-identity".to_owned(), "eyJ.copied.sig".to_owned())]);
        let refused = SecretFiles::default().headers(&plain, &[]).expect_err("refused");
        assert!(refused.message.contains("the runtime sends it"), "{}", refused.message);
    }
}
