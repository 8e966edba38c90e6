//! Trickle ICE and ICE restarts as WHIP carries them (`PATCH`,
//! `application/trickle-ice-sdpfrag`, RFC 8840): a [`Fragment`] holds the ICE credentials it
//! names (if any), its candidates and whether it ends them. A fragment whose credentials
//! (`a=ice-ufrag` and `a=ice-pwd`) differ from the call's is an ICE restart
//! ([`crate::Call::patch`] answers it with the call's new credentials, as a fragment too);
//! one with the same credentials, no credentials, or only `a=ice-ufrag` adds candidates.
//! A ufrag alone names the ICE session the candidates belong to (RFC 8840, 4.4; WHIP, RFC
//! 9725, 4.3.1, sends trickled candidates so): when it is not the call's current one (the
//! client restarted ICE since, or never had it), the candidates are refused
//! ([`FragmentError::OtherIceSession`], HTTP 412) rather than mixed into the wrong session.

use str0m::Candidate;

use crate::offer::snippet;

/// The largest fragment taken, in bytes (a few dozen candidates).
pub const MAX_FRAGMENT_BYTES: usize = 16 * 1024;

/// A parsed `application/trickle-ice-sdpfrag` body.
#[derive(Debug, Default)]
pub struct Fragment {
    /// `a=ice-ufrag`, when given.
    pub ufrag: Option<String>,
    /// `a=ice-pwd`, when given.
    pub pwd: Option<String>,
    /// The candidates (`a=candidate:`).
    pub candidates: Vec<Candidate>,
    /// `a=end-of-candidates` was given.
    pub end_of_candidates: bool,
}

/// Why a fragment was refused: HTTP 400 with the message.
#[derive(Debug, thiserror::Error)]
pub enum FragmentError {
    /// Over [`MAX_FRAGMENT_BYTES`].
    #[error("the fragment is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Not UTF-8 text.
    #[error("the fragment is not UTF-8 text")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// A line that is not `<letter>=<value>`.
    #[error("malformed SDP fragment, line {line}: expected <letter>=<value>, found {found}")]
    Malformed {
        /// The line's number, from 1.
        line: usize,
        /// What it holds (shortened).
        found: String,
    },
    /// A candidate that does not parse.
    #[error("malformed SDP fragment, line {line}: the candidate {found} is not valid: {source}")]
    Candidate {
        /// The line's number, from 1.
        line: usize,
        /// What it holds (shortened).
        found: String,
        /// Why.
        #[source]
        source: str0m::error::IceError,
    },
    /// `a=ice-pwd` without `a=ice-ufrag` (a ufrag alone names the ICE session of trickled
    /// candidates; a password alone names nothing).
    #[error("a=ice-pwd without a=ice-ufrag: an ICE restart needs both, trickled candidates at most the ufrag")]
    PasswordWithoutUfrag,
    /// An ICE credential out of RFC 8839's shape (5.4: `ice-char`s — letters, digits, `+`
    /// and `/` — a ufrag 4 to 256 of them, a password 22 to 256).
    #[error("a=ice-{name} must be {least} to 256 characters of letters, digits, + and /; found {found}")]
    BadCredential {
        /// `ufrag` or `pwd`.
        name: &'static str,
        /// The shortest allowed.
        least: usize,
        /// What it holds (shortened).
        found: String,
    },
    /// Nothing to do: no candidates, no credentials, no end-of-candidates.
    #[error(
        "the fragment names no ICE credentials, candidates or end-of-candidates: PATCH a=candidate: lines to trickle, or a=ice-ufrag and a=ice-pwd to restart ICE"
    )]
    Empty,
    /// The client's password changed under the same ufrag (an ICE restart changes both).
    #[error(
        "a=ice-pwd changed but a=ice-ufrag did not: an ICE restart needs a new ufrag and password (RFC 8839, 4.4.1.1.1)"
    )]
    PasswordWithoutRestart,
    /// Candidates under a ufrag (without a password) that is not the call's current ICE
    /// session: late ones of a session an ICE restart replaced, or another call's (HTTP 412,
    /// the ICE session the request names is not the resource's).
    #[error(
        "the fragment's a=ice-ufrag {found} is not this call's ICE session (it is restarted or never was): trickle candidates under the current ufrag, or restart ICE with a new a=ice-ufrag and a=ice-pwd"
    )]
    OtherIceSession {
        /// The fragment's ufrag (shortened).
        found: String,
    },
}

impl Fragment {
    /// Parses a fragment body.
    pub fn parse(body: &[u8]) -> Result<Self, FragmentError> {
        if body.len() > MAX_FRAGMENT_BYTES {
            return Err(FragmentError::TooLarge { size: body.len(), limit: MAX_FRAGMENT_BYTES });
        }
        let text = std::str::from_utf8(body).map_err(FragmentError::NotUtf8)?;
        let mut fragment = Self::default();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r'))) {
            if line.is_empty() {
                continue;
            }
            let bytes = line.as_bytes();
            if bytes.len() < 2 || !bytes[0].is_ascii_lowercase() || bytes[1] != b'=' {
                return Err(FragmentError::Malformed { line: n, found: snippet(line) });
            }
            let Some(attribute) = line.strip_prefix("a=") else { continue };
            if let Some(ufrag) = attribute.strip_prefix("ice-ufrag:") {
                fragment.ufrag = Some(ufrag.trim().to_owned());
            } else if let Some(pwd) = attribute.strip_prefix("ice-pwd:") {
                fragment.pwd = Some(pwd.trim().to_owned());
            } else if attribute.starts_with("candidate:") {
                let candidate = Candidate::from_sdp_string(attribute).map_err(|source| FragmentError::Candidate {
                    line: n,
                    found: snippet(attribute),
                    source,
                })?;
                fragment.candidates.push(candidate);
            } else if attribute == "end-of-candidates" {
                fragment.end_of_candidates = true;
            }
        }
        if fragment.pwd.is_some() && fragment.ufrag.is_none() {
            return Err(FragmentError::PasswordWithoutUfrag);
        }
        if let Some(ufrag) = &fragment.ufrag {
            check_credential("ufrag", 4, ufrag)?;
        }
        if let Some(pwd) = &fragment.pwd {
            check_credential("pwd", 22, pwd)?;
        }
        if fragment.pwd.is_none() && fragment.candidates.is_empty() && !fragment.end_of_candidates {
            return Err(FragmentError::Empty);
        }
        Ok(fragment)
    }

    /// The credentials, when the fragment names both (an ICE restart when they are new).
    pub fn credentials(&self) -> Option<(&str, &str)> {
        Some((self.ufrag.as_deref()?, self.pwd.as_deref()?))
    }
}

/// WHIP's entity-tag of an ICE session (RFC 9725, 4.3.1; the `ETag` of the `201` and of an
/// ICE restart's `200`): the edge's ICE ufrag of that session, quoted (a strong tag). Each
/// ICE restart gives the edge a new ufrag, so the tag names one session.
pub fn ice_session_tag(local_ufrag: &str) -> String {
    format!("\"{local_ufrag}\"")
}

/// Whether the `If-Match` field value `field` holds for the entity-tag `current` (RFC 9110,
/// 13.1.1): `*`, or a list of tags one of which is `current` by strong comparison (a weak
/// tag, `W/"..."`, never matches).
pub fn if_match_holds(field: &str, current: &str) -> bool {
    let field = field.trim();
    field == "*" || field.split(',').map(str::trim).any(|tag| tag == current)
}

/// RFC 8839, 5.4: `least` to 256 `ice-char`s.
fn check_credential(name: &'static str, least: usize, value: &str) -> Result<(), FragmentError> {
    let ice_char = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
    if (least..=256).contains(&value.len()) && value.chars().all(ice_char) {
        Ok(())
    } else {
        Err(FragmentError::BadCredential { name, least, found: snippet(value) })
    }
}

/// `offer` with its ICE credentials replaced by `ufrag` and `pwd` and its candidates by
/// `candidates`: the offer an ICE restart by fragment stands for.
pub(crate) fn restart_offer(offer: &str, ufrag: &str, pwd: &str, candidates: &[Candidate]) -> String {
    let mut out = String::with_capacity(offer.len() + 256);
    let mut first_media = true;
    for line in offer.lines().map(|l| l.trim_end_matches('\r')) {
        if line.starts_with("a=candidate:") || line == "a=end-of-candidates" {
            continue;
        }
        if line.starts_with("a=ice-ufrag:") {
            out.push_str("a=ice-ufrag:");
            out.push_str(ufrag);
        } else if line.starts_with("a=ice-pwd:") {
            out.push_str("a=ice-pwd:");
            out.push_str(pwd);
        } else {
            out.push_str(line);
        }
        out.push_str("\r\n");
        // After the first section's a=mid (its c= line must come before any attribute).
        if line.starts_with("a=mid:") && first_media {
            first_media = false;
            for candidate in candidates {
                out.push_str("a=");
                out.push_str(&candidate.to_sdp_string());
                out.push_str("\r\n");
            }
        }
    }
    out
}

/// The fragment that answers an ICE restart: the answer's credentials, and its candidates
/// under its first m-line (BUNDLE: one transport for all).
pub(crate) fn answer_fragment(answer: &str) -> String {
    let mut out = String::new();
    let mut media = String::new();
    let mut candidates = String::new();
    let mut in_first_media = false;
    let mut seen_media = false;
    for line in answer.lines().map(|l| l.trim_end_matches('\r')) {
        if line.starts_with("m=") {
            in_first_media = !seen_media;
            seen_media = true;
            if in_first_media {
                media.push_str(line);
                media.push_str("\r\n");
            }
            continue;
        }
        let keep = |prefix: &str| line.starts_with(prefix);
        if keep("a=ice-ufrag:") || keep("a=ice-pwd:") || keep("a=ice-options:") {
            if !out.contains(line) {
                out.push_str(line);
                out.push_str("\r\n");
            }
        } else if in_first_media && (keep("a=mid:") || keep("a=candidate:") || line == "a=end-of-candidates") {
            candidates.push_str(line);
            candidates.push_str("\r\n");
        }
    }
    out + &media + &candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_names_credentials_and_candidates() {
        let body = b"a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\na=candidate:1 1 udp 2113937151 192.0.2.1 50000 typ host\r\na=end-of-candidates\r\n";
        let fragment = Fragment::parse(body).expect("parses");
        assert_eq!(fragment.credentials(), Some(("abcd", "0123456789012345678901")));
        assert_eq!(fragment.candidates.len(), 1);
        assert_eq!(fragment.candidates[0].addr(), "192.0.2.1:50000".parse().expect("address"));
        assert!(fragment.end_of_candidates);
    }

    /// RFC 8840's trickled candidates (and WHIP's, RFC 9725 4.3.1): the ufrag names the ICE
    /// session, with no password.
    #[test]
    fn trickled_candidates_may_name_their_ufrag_without_the_password() {
        let body = b"a=ice-ufrag:EsAw\r\na=ice-options:trickle\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=candidate:1 1 udp 2113937151 192.0.2.1 50000 typ host\r\n";
        let fragment = Fragment::parse(body).expect("a trickle fragment");
        assert_eq!((fragment.ufrag.as_deref(), fragment.pwd.as_deref()), (Some("EsAw"), None));
        assert_eq!(fragment.credentials(), None, "no restart");
        assert_eq!(fragment.candidates.len(), 1);
        let end = Fragment::parse(b"a=ice-ufrag:EsAw\r\na=end-of-candidates\r\n").expect("the end, under its ufrag");
        assert!(end.end_of_candidates && end.candidates.is_empty());
    }

    #[test]
    fn bad_fragments_are_refused_naming_the_line() {
        let error = Fragment::parse(b"a=ice-ufrag:x\nbogus\n").expect_err("malformed");
        assert!(error.to_string().contains("line 2"), "{error}");
        let error = Fragment::parse(b"a=candidate:1 1 udp nope 192.0.2.1 5 typ host\n").expect_err("bad candidate");
        assert!(matches!(error, FragmentError::Candidate { line: 1, .. }), "{error}");
        let error = Fragment::parse(b"a=ice-pwd:0123456789012345678901\r\na=end-of-candidates\n").expect_err("half");
        assert!(matches!(error, FragmentError::PasswordWithoutUfrag), "{error}");
        let error = Fragment::parse(b"a=ice-ufrag:abcd\n").expect_err("a ufrag alone says nothing");
        assert!(matches!(error, FragmentError::Empty), "{error}");
        let error =
            Fragment::parse(b"a=ice-ufrag:a;\na=end-of-candidates\n").expect_err("a ufrag alone is checked too");
        assert!(matches!(error, FragmentError::BadCredential { name: "ufrag", .. }), "{error}");
        let error = Fragment::parse(&[0xff, 0xfe]).expect_err("binary");
        assert!(matches!(error, FragmentError::NotUtf8(_)));
        let big = vec![b'a'; MAX_FRAGMENT_BYTES + 1];
        assert!(matches!(Fragment::parse(&big), Err(FragmentError::TooLarge { .. })));
        let error =
            Fragment::parse(b"a=ice-ufrag:ab\r\na=ice-pwd:0123456789012345678901\r\n").expect_err("short ufrag");
        assert!(matches!(error, FragmentError::BadCredential { name: "ufrag", .. }), "{error}");
        let error = Fragment::parse(b"a=ice-ufrag:abcd\r\na=ice-pwd:short\r\n").expect_err("short pwd");
        assert!(error.to_string().contains("a=ice-pwd must be 22 to 256"), "{error}");
        let error =
            Fragment::parse(b"a=ice-ufrag:ab;d\r\na=ice-pwd:0123456789012345678901\r\n").expect_err("not ice-chars");
        assert!(error.to_string().contains(r#"found "ab;d""#), "{error}");
        assert!(matches!(Fragment::parse(b""), Err(FragmentError::Empty)));
        assert!(matches!(Fragment::parse(b"a=mid:0\r\n"), Err(FragmentError::Empty)));
        assert!(Fragment::parse(b"a=end-of-candidates\r\n").is_ok(), "the end of candidates alone is news");
    }

    #[test]
    fn if_match_holds_for_star_or_the_exact_strong_tag() {
        let tag = ice_session_tag("Ab3d");
        assert_eq!(tag, "\"Ab3d\"");
        for field in ["*", " * ", "\"Ab3d\"", "\"zz\", \"Ab3d\"", "\"Ab3d\",\"zz\""] {
            assert!(if_match_holds(field, &tag), "{field}");
        }
        for field in ["\"zz\"", "W/\"Ab3d\"", "Ab3d", "\"ab3d\"", ""] {
            assert!(!if_match_holds(field, &tag), "{field}");
        }
    }

    #[test]
    fn a_restart_offer_swaps_credentials_and_candidates() {
        let offer = "v=0\r\na=ice-ufrag:old\r\na=ice-pwd:oldpwd\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=candidate:1 1 udp 1 192.0.2.9 9 typ host\r\na=end-of-candidates\r\n";
        let candidate = Candidate::from_sdp_string("candidate:2 1 udp 5 192.0.2.2 7 typ host").expect("candidate");
        let restarted = restart_offer(offer, "new", "newpwd", &[candidate]);
        assert!(restarted.contains("a=ice-ufrag:new\r\n") && restarted.contains("a=ice-pwd:newpwd\r\n"));
        assert!(!restarted.contains("old") && !restarted.contains("192.0.2.9"), "{restarted}");
        assert!(restarted.contains("a=mid:0\r\na=candidate:2 1 udp 5 192.0.2.2 7 typ host"), "{restarted}");
    }

    #[test]
    fn an_answer_fragment_keeps_credentials_and_the_first_transport() {
        let answer = "v=0\r\na=ice-ufrag:u\r\na=ice-pwd:p\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=ice-ufrag:u\r\na=candidate:1 1 udp 1 192.0.2.1 4000 typ host\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\na=candidate:1 1 udp 1 192.0.2.1 4000 typ host\r\n";
        let fragment = answer_fragment(answer);
        assert_eq!(
            fragment,
            "a=ice-ufrag:u\r\na=ice-pwd:p\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=candidate:1 1 udp 1 192.0.2.1 4000 typ host\r\n"
        );
    }
}
