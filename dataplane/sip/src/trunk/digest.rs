//! SIP digest authentication (RFC 3261 §22, RFC 7616's computation, RFC 8760's SHA-256 for
//! SIP): the challenge the edge sends and the check of a UA's answer. Only `qop=auth` and
//! no `qop` (RFC 2069) are taken; `auth-int` and the `-sess` algorithms are refused.
//! Everything read from a header is bounded ([`MAX_PARAMS`], [`MAX_VALUE`]).
//!
//! The other way round, for calls the edge places through a trunk that challenges its
//! INVITE (401 or 407): [`Challenge::parse`] reads a `WWW-Authenticate` /
//! `Proxy-Authenticate` value and [`Challenge::authorization`] computes the answer.

use md5::Md5;
use sha2::{Digest, Sha256};

/// Parameters read from one Authorization header at most.
pub const MAX_PARAMS: usize = 16;
/// Bytes of one parameter's value at most (a nonce, a URI, a response hash).
pub const MAX_VALUE: usize = 256;

/// A digest algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// RFC 8760's SHA-256, offered first.
    Sha256,
    /// MD5, what most deployed SIP equipment still speaks.
    Md5,
}

impl Algorithm {
    /// The name in `algorithm=`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SHA-256",
            Self::Md5 => "MD5",
        }
    }

    /// `SHA-256` or `MD5` (any case).
    pub fn parse(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("SHA-256") {
            Some(Self::Sha256)
        } else if name.eq_ignore_ascii_case("MD5") {
            Some(Self::Md5)
        } else {
            None
        }
    }

    /// Lower-case hex of the hash of `input`.
    pub fn hex(self, input: &str) -> String {
        let bytes: Vec<u8> = match self {
            Self::Sha256 => Sha256::digest(input.as_bytes()).to_vec(),
            Self::Md5 => Md5::digest(input.as_bytes()).to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The `WWW-Authenticate` value of a challenge.
pub fn challenge(realm: &str, nonce: &str, algorithm: Algorithm, stale: bool) -> String {
    let stale = if stale { ", stale=true" } else { "" };
    format!("Digest realm=\"{realm}\", nonce=\"{nonce}\", algorithm={}, qop=\"auth\"{stale}", algorithm.name())
}

/// A UA's `Authorization` (or `Proxy-Authorization`) answer, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// `username`.
    pub username: String,
    /// `realm`.
    pub realm: String,
    /// `nonce`.
    pub nonce: String,
    /// `uri`.
    pub uri: String,
    /// `response`.
    pub response: String,
    /// `algorithm` (absent: MD5).
    pub algorithm: Algorithm,
    /// `qop=auth` with its `nc` (as a number) and `cnonce`; `None` without `qop`.
    pub qop: Option<(u32, String)>,
}

/// Why an answer cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not `Digest ...`.
    #[error("not a Digest answer")]
    NotDigest,
    /// Too many parameters, or one too long.
    #[error("the answer is too large")]
    TooLarge,
    /// A parameter is missing or malformed.
    #[error("the answer's {0} is missing or malformed")]
    Malformed(&'static str),
    /// An algorithm or qop the edge does not take.
    #[error("unsupported {0}")]
    Unsupported(&'static str),
}

impl Answer {
    /// Reads `Digest k=v, k="v", ...`.
    pub fn parse(header: &str) -> Result<Self, AnswerError> {
        let rest = header.trim_start();
        let rest = match rest.get(..6) {
            Some(scheme) if scheme.eq_ignore_ascii_case("digest") => &rest[6..],
            _ => return Err(AnswerError::NotDigest),
        };
        let params = params(rest)?;
        let get = |name: &str| params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let need = |name: &'static str| get(name).filter(|v| !v.is_empty()).ok_or(AnswerError::Malformed(name));
        let algorithm = match get("algorithm") {
            None => Algorithm::Md5,
            Some(name) => Algorithm::parse(&name).ok_or(AnswerError::Unsupported("algorithm"))?,
        };
        let qop = match get("qop") {
            None => None,
            Some(qop) if qop.eq_ignore_ascii_case("auth") => {
                let nc = need("nc")?;
                let nc = (nc.len() == 8).then(|| u32::from_str_radix(&nc, 16).ok()).flatten();
                Some((nc.ok_or(AnswerError::Malformed("nc"))?, need("cnonce")?))
            }
            Some(_) => return Err(AnswerError::Unsupported("qop")),
        };
        Ok(Self {
            username: need("username")?,
            realm: get("realm").unwrap_or_default(),
            nonce: need("nonce")?,
            uri: need("uri")?,
            response: need("response")?,
            algorithm,
            qop,
        })
    }

    /// Whether the answer proves `password` for `method` (RFC 7616 §3.4.1).
    pub fn verifies(&self, method: &str, password: &str) -> bool {
        let h = |s: &str| self.algorithm.hex(s);
        let ha1 = h(&format!("{}:{}:{password}", self.username, self.realm));
        let ha2 = h(&format!("{method}:{}", self.uri));
        let expected = match &self.qop {
            Some((nc, cnonce)) => h(&format!("{ha1}:{}:{nc:08x}:{cnonce}:auth:{ha2}", self.nonce)),
            None => h(&format!("{ha1}:{}:{ha2}", self.nonce)),
        };
        equal(expected.as_bytes(), self.response.to_ascii_lowercase().as_bytes())
    }
}

/// A challenge the edge got from a trunk (`WWW-Authenticate` of a 401, `Proxy-Authenticate`
/// of a 407), read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// `realm`.
    pub realm: String,
    /// `nonce`.
    pub nonce: String,
    /// `opaque`, echoed back when present.
    pub opaque: Option<String>,
    /// `algorithm` (absent: MD5).
    pub algorithm: Algorithm,
    /// Whether `qop` offers `auth` (then the answer uses it); `false`: RFC 2069.
    pub qop_auth: bool,
}

impl Challenge {
    /// Reads `Digest realm=..., nonce=..., ...`; a challenge with an algorithm or only a qop
    /// the edge cannot answer is refused.
    pub fn parse(header: &str) -> Result<Self, AnswerError> {
        let rest = header.trim_start();
        let rest = match rest.get(..6) {
            Some(scheme) if scheme.eq_ignore_ascii_case("digest") => &rest[6..],
            _ => return Err(AnswerError::NotDigest),
        };
        let params = params(rest)?;
        let get = |name: &str| params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let algorithm = match get("algorithm") {
            None => Algorithm::Md5,
            Some(name) => Algorithm::parse(&name).ok_or(AnswerError::Unsupported("algorithm"))?,
        };
        let qop_auth = match get("qop") {
            None => false,
            Some(qop) if qop.split(',').any(|q| q.trim().eq_ignore_ascii_case("auth")) => true,
            Some(_) => return Err(AnswerError::Unsupported("qop")),
        };
        Ok(Self {
            realm: get("realm").ok_or(AnswerError::Malformed("realm"))?,
            nonce: get("nonce").filter(|n| !n.is_empty()).ok_or(AnswerError::Malformed("nonce"))?,
            opaque: get("opaque"),
            algorithm,
            qop_auth,
        })
    }

    /// The `Authorization` (or `Proxy-Authorization`) value answering this challenge for
    /// `method` to `uri` with `username`/`password`; `cnonce` is the owner's random value
    /// (this crate draws nothing), `nc` the count of answers to this nonce (from 1).
    pub fn authorization(
        &self,
        method: &str,
        uri: &str,
        username: &str,
        password: &str,
        cnonce: &str,
        nc: u32,
    ) -> String {
        let h = |s: &str| self.algorithm.hex(s);
        let ha1 = h(&format!("{username}:{}:{password}", self.realm));
        let ha2 = h(&format!("{method}:{uri}"));
        let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
        let mut value = format!(
            "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", algorithm={}",
            quote(username),
            quote(&self.realm),
            quote(&self.nonce),
            quote(uri),
            self.algorithm.name()
        );
        let response = if self.qop_auth {
            value.push_str(&format!(", qop=auth, nc={nc:08x}, cnonce=\"{}\"", quote(cnonce)));
            h(&format!("{ha1}:{}:{nc:08x}:{cnonce}:auth:{ha2}", self.nonce))
        } else {
            h(&format!("{ha1}:{}:{ha2}", self.nonce))
        };
        value.push_str(&format!(", response=\"{response}\""));
        if let Some(opaque) = &self.opaque {
            value.push_str(&format!(", opaque=\"{}\"", quote(opaque)));
        }
        value
    }
}

/// Compares without stopping at the first difference.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `k=v` and `k="quoted, \"v\""` pairs separated by commas, bounded.
fn params(mut rest: &str) -> Result<Vec<(String, String)>, AnswerError> {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Ok(out);
        }
        if out.len() == MAX_PARAMS {
            return Err(AnswerError::TooLarge);
        }
        let eq = rest.find('=').ok_or(AnswerError::Malformed("parameters"))?;
        let key = rest[..eq].trim().to_owned();
        if key.is_empty() || key.len() > 32 {
            return Err(AnswerError::Malformed("parameters"));
        }
        rest = rest[eq + 1..].trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, c)) => value.push(c),
                    None => return Err(AnswerError::Malformed("parameters")),
                }
                if value.len() > MAX_VALUE {
                    return Err(AnswerError::TooLarge);
                }
            };
            rest = &quoted[end + 1..];
            value
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            let value = rest[..end].trim().to_owned();
            rest = &rest[end..];
            value
        };
        if value.len() > MAX_VALUE {
            return Err(AnswerError::TooLarge);
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7616_examples_verify_in_md5_and_sha256() {
        // RFC 7616 §3.9.1 (HTTP, but the same computation): Mufasa / "Circle of Life".
        let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        let md5 = format!(
            "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", uri=\"/dir/index.html\", algorithm=MD5, \
             nonce=\"{nonce}\", nc=00000001, cnonce=\"{cnonce}\", qop=auth, \
             response=\"8ca523f5e9506fed4657c9700eebdbec\", opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\""
        );
        let answer = Answer::parse(&md5).expect("parses");
        assert_eq!(answer.algorithm, Algorithm::Md5);
        assert!(answer.verifies("GET", "Circle of Life"));
        assert!(!answer.verifies("GET", "circle of life"));
        assert!(!answer.verifies("POST", "Circle of Life"), "the method is in the hash");
        let sha = md5.replace("algorithm=MD5", "algorithm=SHA-256").replace(
            "8ca523f5e9506fed4657c9700eebdbec",
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
        );
        assert!(Answer::parse(&sha).expect("parses").verifies("GET", "Circle of Life"));
    }

    #[test]
    fn a_challenge_offers_qop_auth_and_marks_a_stale_nonce() {
        assert_eq!(
            challenge("edge", "abc", Algorithm::Sha256, false),
            "Digest realm=\"edge\", nonce=\"abc\", algorithm=SHA-256, qop=\"auth\""
        );
        assert!(challenge("edge", "abc", Algorithm::Md5, true).ends_with("algorithm=MD5, qop=\"auth\", stale=true"));
    }

    #[test]
    fn malformed_oversized_and_unsupported_answers_are_refused() {
        let ok = "Digest username=\"u\", nonce=\"n\", uri=\"sip:x@y\", response=\"r\"";
        let answer = Answer::parse(ok).expect("RFC 2069: no qop");
        assert_eq!((answer.algorithm, answer.qop.clone()), (Algorithm::Md5, None));
        assert_eq!(Answer::parse("Basic dTpw"), Err(AnswerError::NotDigest));
        assert_eq!(
            Answer::parse("Digest username=\"u\", uri=\"x\", response=\"r\""),
            Err(AnswerError::Malformed("nonce"))
        );
        assert_eq!(Answer::parse(&format!("{ok}, algorithm=SHA-512-256")), Err(AnswerError::Unsupported("algorithm")));
        assert_eq!(
            Answer::parse(&format!("{ok}, qop=auth-int, nc=00000001, cnonce=c")),
            Err(AnswerError::Unsupported("qop"))
        );
        assert_eq!(Answer::parse(&format!("{ok}, qop=auth, nc=1, cnonce=c")), Err(AnswerError::Malformed("nc")));
        assert_eq!(Answer::parse(&format!("{ok}, opaque=\"{}\"", "a".repeat(300))), Err(AnswerError::TooLarge));
        let many: String = (0..20).map(|i| format!(", p{i}=v")).collect();
        assert_eq!(Answer::parse(&format!("{ok}{many}")), Err(AnswerError::TooLarge));
        assert_eq!(Answer::parse("Digest username=\"unterminated"), Err(AnswerError::Malformed("parameters")));
    }
    #[test]
    fn the_edge_answers_a_trunks_challenge_so_that_the_trunk_verifies_it() {
        for algorithm in [Algorithm::Sha256, Algorithm::Md5] {
            let header = challenge("carrier", "n0nce", algorithm, false);
            let read = Challenge::parse(&header).expect("reads");
            assert_eq!((read.algorithm, read.qop_auth, read.realm.as_str()), (algorithm, true, "carrier"));
            let value = read.authorization("INVITE", "sip:+4420@trunk", "acme", "s3cret \"x\"", "c1", 1);
            let answer = Answer::parse(&value).expect("the answer reads");
            assert_eq!(answer.qop, Some((1, "c1".to_owned())));
            assert!(answer.verifies("INVITE", "s3cret \"x\""), "{value}");
            assert!(!answer.verifies("INVITE", "wrong"));
        }
        // RFC 2069 (no qop) with an opaque echoed back.
        let read = Challenge::parse("Digest realm=\"r\", nonce=\"n\", opaque=\"o\"").expect("reads");
        assert_eq!((read.algorithm, read.qop_auth), (Algorithm::Md5, false));
        let value = read.authorization("INVITE", "sip:x@y", "u", "p", "c", 1);
        assert!(value.ends_with(", opaque=\"o\"") && !value.contains("qop"), "{value}");
        assert!(Answer::parse(&value).expect("reads").verifies("INVITE", "p"));
    }

    #[test]
    fn challenges_the_edge_cannot_answer_are_refused() {
        assert_eq!(Challenge::parse("Basic realm=\"r\""), Err(AnswerError::NotDigest));
        assert_eq!(Challenge::parse("Digest realm=\"r\""), Err(AnswerError::Malformed("nonce")));
        assert_eq!(Challenge::parse("Digest nonce=\"n\""), Err(AnswerError::Malformed("realm")));
        assert_eq!(
            Challenge::parse("Digest realm=\"r\", nonce=\"n\", algorithm=SHA-512-256"),
            Err(AnswerError::Unsupported("algorithm"))
        );
        assert_eq!(
            Challenge::parse("Digest realm=\"r\", nonce=\"n\", qop=\"auth-int\""),
            Err(AnswerError::Unsupported("qop"))
        );
        let both = Challenge::parse("Digest realm=\"r\", nonce=\"n\", qop=\"auth-int,auth\"").expect("auth offered");
        assert!(both.qop_auth);
        assert_eq!(
            Challenge::parse(&format!("Digest realm=\"r\", nonce=\"{}\"", "n".repeat(300))),
            Err(AnswerError::TooLarge)
        );
    }
}
