//! Where a tool URL is sent: the URL itself, or — for host names local mode maps to the
//! example's own tool servers — another `host:port` over plain HTTP, keeping the original
//! `Host` header.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_core::{FailureKind, ToolFailure};

/// Host name -> `host:port` overrides.
#[derive(Clone, Debug, Default)]
pub struct Aliases(Arc<BTreeMap<String, String>>);

impl Aliases {
    /// Overrides from `map`.
    pub fn new(map: BTreeMap<String, String>) -> Self {
        Self(Arc::new(map))
    }

    /// The URI to connect to and the `Host` header for `url` (`http` or `https`).
    pub fn resolve(&self, url: &str) -> Result<(http::Uri, String), ToolFailure> {
        let unusable = || ToolFailure::new(FailureKind::Unsupported, "the tool's URL is not one this runtime can call");
        let uri: http::Uri =
            url.parse().map_err(|e| unusable().with_detail(format!("tool URL {url:?} is not valid: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(unusable().with_detail(format!(
                "tool URL {url} uses a scheme this runtime cannot call; use http:// or https://"
            )));
        }
        let host = uri.host().unwrap_or_default();
        let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        let Some(alias) = self.0.get(host) else { return Ok((uri, authority)) };
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let target = format!("http://{alias}{path}")
            .parse::<http::Uri>()
            .map_err(|e| unusable().with_detail(format!("host alias {alias:?} for {host} is not usable: {e}")))?;
        Ok((target, authority))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_redirect_only_their_hosts_and_keep_the_host_header() {
        let aliases = Aliases::new([("accounts".to_owned(), "127.0.0.1:9000".to_owned())].into());
        let (uri, host) = aliases.resolve("http://accounts/v1/check?x=1").expect("resolves");
        assert_eq!((uri.to_string().as_str(), host.as_str()), ("http://127.0.0.1:9000/v1/check?x=1", "accounts"));
        let (uri, host) = aliases.resolve("https://api.example.com:8443/x").expect("resolves");
        assert_eq!(
            (uri.to_string().as_str(), host.as_str()),
            ("https://api.example.com:8443/x", "api.example.com:8443")
        );
        let error = aliases.resolve("ftp://files/x").expect_err("refused");
        assert_eq!(error.kind, FailureKind::Unsupported);
    }
}
