//! Where status callbacks may go: the receivers the platform team named
//! (`--calls-webhook-allow`), as URL prefixes. A `statusCallback` comes from whoever holds
//! a key that may place calls, not from the platform team; without this list it could
//! point the gateway at any address the gateway reaches (the Kubernetes API, a cloud's
//! metadata endpoint, another team's service) and have it POST there.
//!
//! A prefix is an `http://` or `https://` URL with a host and no user info; its scheme,
//! host and port (the scheme's default when it names none) must equal the callback's, and
//! its path must begin the callback's path at a `/` boundary (`https://hooks.example.com/calls`
//! allows `/calls` and `/calls/x`, not `/callsign`). Hosts are compared as written,
//! case aside: no name is resolved, so a name that resolves elsewhere later changes nothing
//! here (the network's egress rules are the place for that).

use axum::http::Uri;

/// One allowed prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Prefix {
    scheme: String,
    host: String,
    port: u16,
    /// Without a trailing `/` (empty: the whole origin).
    path: String,
}

/// The receivers status callbacks may go to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Receivers(Vec<Prefix>);

/// A URL's scheme, lower-case host and port, or why it is not an http(s) URL with a host
/// and no user info.
fn origin(uri: &Uri) -> Result<(String, String, u16), &'static str> {
    let scheme = uri.scheme_str().map(str::to_ascii_lowercase);
    let default = match scheme.as_deref() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err("not an http:// or https:// URL"),
    };
    let authority = uri.authority().ok_or("no host")?;
    if authority.as_str().contains('@') {
        return Err("user info (user@host) is not allowed");
    }
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return Err("no host");
    }
    Ok((scheme.unwrap_or_default(), host, authority.port_u16().unwrap_or(default)))
}

impl Receivers {
    /// The prefixes of `--calls-webhook-allow`, or what is wrong with one.
    pub fn parse<S: AsRef<str>>(prefixes: &[S]) -> Result<Self, String> {
        let mut out = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            let text = prefix.as_ref().trim();
            let uri: Uri = text.parse().map_err(|e| format!("{text:?} is not a URL: {e}"))?;
            let (scheme, host, port) = origin(&uri).map_err(|why| format!("{text:?}: {why}"))?;
            if uri.query().is_some() {
                return Err(format!("{text:?}: a receiver prefix has no query"));
            }
            let path = uri.path().trim_end_matches('/').to_owned();
            out.push(Prefix { scheme, host, port, path });
        }
        Ok(Self(out))
    }

    /// Whether none is named (then no call may name a callback).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `uri` goes to one of them; `Err` says why it is not a URL one could.
    pub fn allow(&self, uri: &Uri) -> Result<bool, &'static str> {
        let (scheme, host, port) = origin(uri)?;
        let path = uri.path();
        Ok(self.0.iter().any(|p| {
            p.scheme == scheme
                && p.host == host
                && p.port == port
                && path.strip_prefix(p.path.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(prefixes: &[&str], url: &str) -> bool {
        Receivers::parse(prefixes).expect("prefixes").allow(&url.parse().expect("a URL")).expect("an http URL")
    }

    #[test]
    fn a_callback_goes_only_under_a_named_prefix_of_the_same_origin() {
        let hooks = ["https://hooks.example.com/calls"];
        assert!(allows(&hooks, "https://hooks.example.com/calls"));
        assert!(allows(&hooks, "https://HOOKS.example.com:443/calls/42?x=1"));
        assert!(!allows(&hooks, "https://hooks.example.com/callsign"), "a / boundary");
        assert!(!allows(&hooks, "https://hooks.example.com/"), "above the prefix");
        assert!(!allows(&hooks, "http://hooks.example.com/calls"), "another scheme");
        assert!(!allows(&hooks, "https://hooks.example.com:8443/calls"), "another port");
        assert!(!allows(&hooks, "https://hooks.example.com.evil.test/calls"), "another host");
        assert!(!allows(&hooks, "https://169.254.169.254/calls"));
        assert!(allows(&["http://127.0.0.1:8080/"], "http://127.0.0.1:8080/any/path"));
        assert!(allows(&["http://127.0.0.1:8080"], "http://127.0.0.1:8080/hook"));
        assert!(!allows(&["http://127.0.0.1:8080"], "http://127.0.0.1:8081/hook"));
        assert!(!allows(&[], "https://hooks.example.com/calls"), "none named: none allowed");
        let user = Receivers::parse(&hooks)
            .expect("prefixes")
            .allow(&"https://a@hooks.example.com/calls".parse().expect("uri"));
        assert!(user.is_err(), "{user:?}");
    }

    #[test]
    fn a_prefix_that_is_not_an_http_origin_is_refused_with_why() {
        for (bad, why) in [
            ("ftp://hooks.example.com/", "not an http"),
            ("hooks.example.com/calls", "not a URL"),
            ("//hooks.example.com/calls", "not"),
            ("https://user@hooks.example.com/", "user info"),
            ("https://hooks.example.com/calls?token=1", "no query"),
            ("not a url", "not a URL"),
        ] {
            let error = Receivers::parse(&[bad]).expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
        }
    }
}
