//! Which requests are addressed to this machine in a way no other site can forge: local mode
//! serves its chat page from the gateway's address, and that page (and only that) may open
//! sessions without being on the `--allowed-origin` list; and where local mode serves data
//! without a credential, it answers only requests that name it by an address or `localhost`.
//!
//! A host name is never enough: a page of another site can make its own name resolve to this
//! machine's address (DNS rebinding), and its requests then carry that name as `Host` (and
//! as `Origin`, which a browser leaves out of a same-origin `GET`).

use axum::http::HeaderMap;

impl crate::Auth {
    /// Whether pages of `origin` may open sessions here: it is listed (`--allowed-origin`;
    /// `*` allows any), or it is this server's own page where that is admitted
    /// ([`crate::Auth::with_own_page`]; `headers` are the request's, for its `Host`). The rule
    /// [`crate::Auth::admit`] applies to a request with an `Origin`; the WebRTC edge answers
    /// browsers' CORS preflights by it too, so that one list says which pages may call.
    pub fn allows_origin(&self, origin: &str, headers: &HeaderMap) -> bool {
        self.origins.iter().any(|allowed| allowed == "*" || allowed == origin)
            || (self.own_page && own_page(origin, headers))
    }
}

/// Whether `origin` is this server's own page: `http(s)://` + the request's `Host`, and
/// that host an IP address or `localhost` (see [`crate::Auth::with_own_page`]).
pub(crate) fn own_page(origin: &str, headers: &HeaderMap) -> bool {
    let Some(host) = host(headers) else { return false };
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    rest == host && address_or_localhost(host)
}

/// The request's `Host` header, if it is text.
pub(crate) fn host(headers: &HeaderMap) -> Option<&str> {
    headers.get("host").and_then(|h| h.to_str().ok())
}

/// Whether `host` (a `Host` header: a name or address, then an optional `:port`) is an IP
/// address or `localhost`: a name only this machine gives itself.
pub(crate) fn address_or_localhost(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::{address_or_localhost, own_page};
    use axum::http::{HeaderMap, HeaderValue};

    fn check(origin: &str, host: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_str(host).expect("header"));
        own_page(origin, &headers)
    }

    #[test]
    fn only_the_same_origin_on_an_address_or_localhost() {
        assert!(check("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(check("https://[::1]:8443", "[::1]:8443"));
        assert!(check("http://LOCALHOST", "LOCALHOST"));
        assert!(!check("http://evil.example:8080", "evil.example:8080"), "a name could be rebound to us");
        assert!(!check("http://127.0.0.1:9999", "127.0.0.1:8080"), "another port is another page");
        assert!(!check("ftp://127.0.0.1:8080", "127.0.0.1:8080"));
    }

    #[test]
    fn a_local_host_is_an_address_or_localhost_with_any_port() {
        for host in ["127.0.0.1:8080", "127.0.0.1", "[::1]:8080", "localhost:8080", "LocalHost", "192.168.1.5:80"] {
            assert!(address_or_localhost(host), "{host}");
        }
        for host in ["evil.example:8080", "evil.example", "localhost.evil.example:8080", "127.0.0.1.nip.io", "", "[::1"]
        {
            assert!(!address_or_localhost(host), "{host}");
        }
    }
}
