//! Which browser pages count as the server's own: local mode serves its chat page from the
//! gateway's address, and that page (and only that) may open sessions without being on the
//! `--allowed-origin` list.

use axum::http::HeaderMap;

/// Whether `origin` is this server's own page: `http(s)://` + the request's `Host`, and
/// that host an IP address or `localhost` (see [`crate::auth::Auth::with_own_page`]).
pub(crate) fn own_page(origin: &str, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else { return false };
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    if rest != host {
        return false;
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::own_page;
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
}
