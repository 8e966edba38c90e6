//! Call transfer by REFER (RFC 3515): what the edge reads of the NOTIFYs that report how
//! the transferee's call to the transfer target goes — the `Event: refer` package, the
//! `Subscription-State`, and the `message/sipfrag` body (RFC 3420) whose status line is
//! the target's answer (`SIP/2.0 180 Ringing`, `SIP/2.0 200 OK`, `SIP/2.0 486 Busy Here`)
//! — and what the machine tells its owner ([`TransferProgress`]). A NOTIFY that cannot
//! be read gets a clear answer: 489 for another event package, 400 with the reason for a
//! body that is not a sipfrag status line, 415 for another body type.

use crate::sip::Request;

/// The longest sipfrag body read (a status line and a few headers at most).
pub const MAX_SIPFRAG: usize = 2048;

/// How a transfer the edge asked for goes, for the call's owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransferProgress {
    /// The REFER was accepted (202): the transferee is calling the target.
    Accepted,
    /// The target's provisional answer (100 Trying, 180 Ringing, 183).
    Trying(u16),
    /// The transfer is over.
    Ended(TransferEnd),
}

/// How a transfer ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransferEnd {
    /// The target's final answer, as the NOTIFY's sipfrag says (2xx: the caller is with
    /// the target).
    Target {
        /// The status.
        status: u16,
        /// Its reason phrase.
        reason: String,
    },
    /// The REFER itself was refused (405 or 501: the peer takes no REFER; 403, 488, ...).
    Refused {
        /// The status.
        status: u16,
        /// Its reason phrase.
        reason: String,
    },
    /// No final answer within the transfer's timeout (or the REFER went unanswered).
    TimedOut,
    /// The subscription ended (`Subscription-State: terminated`) without a final answer.
    Abandoned(String),
    /// The REFER could not be sent (the call not established, a target that is no SIP
    /// URI): the owner's, from [`super::TransferError`].
    NotStarted(String),
}

/// Why a NOTIFY for a transfer cannot be taken; each is the status of the answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// No `Event: refer` (RFC 6665 §8.2.1: 489 Bad Event).
    #[error("Bad Event: the edge subscribes only to the refer event package")]
    BadEvent,
    /// The body is not `message/sipfrag`.
    #[error("Unsupported Media Type: a refer NOTIFY carries message/sipfrag")]
    NotSipfrag,
    /// The body does not start with a SIP status line.
    #[error("Bad Request: the sipfrag body is not a SIP status line ({0})")]
    Malformed(String),
}

impl NotifyError {
    /// The SIP status that answers the NOTIFY.
    pub fn status(&self) -> u16 {
        match self {
            Self::BadEvent => 489,
            Self::NotSipfrag => 415,
            Self::Malformed(_) => 400,
        }
    }
}

/// What a refer NOTIFY says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notified {
    /// The target's status and reason phrase, when the NOTIFY has a body.
    pub status: Option<(u16, String)>,
    /// The subscription is over (`Subscription-State: terminated`).
    pub terminated: bool,
}

/// Reads a NOTIFY of the refer event package.
pub fn read_notify(request: &Request) -> Result<Notified, NotifyError> {
    let event = request.headers.get("Event").unwrap_or_default();
    let package = event.split(';').next().unwrap_or_default().trim();
    if !package.eq_ignore_ascii_case("refer") {
        return Err(NotifyError::BadEvent);
    }
    let terminated = request
        .headers
        .get("Subscription-State")
        .is_some_and(|s| s.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("terminated"));
    if request.body.is_empty() {
        return Ok(Notified { status: None, terminated });
    }
    let content_type = request.headers.get("Content-Type").unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("message/sipfrag") {
        return Err(NotifyError::NotSipfrag);
    }
    Ok(Notified { status: Some(parse_sipfrag(&request.body)?), terminated })
}

/// The status line of a sipfrag body (RFC 3420): `SIP/2.0 <3 digits> <reason>`.
pub fn parse_sipfrag(body: &[u8]) -> Result<(u16, String), NotifyError> {
    let malformed = |why: &str| Err(NotifyError::Malformed(why.to_owned()));
    if body.len() > MAX_SIPFRAG {
        return malformed("longer than 2048 bytes");
    }
    let Ok(text) = std::str::from_utf8(body) else { return malformed("not UTF-8") };
    let line = text.split('\n').next().unwrap_or_default().trim_end_matches('\r');
    let Some(rest) = line.strip_prefix("SIP/2.0 ") else { return malformed("it does not start with SIP/2.0") };
    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return malformed("the status is not three digits");
    }
    let status: u16 = code.parse().map_err(|_| NotifyError::Malformed("the status is not a number".into()))?;
    if !(100..=699).contains(&status) {
        return malformed("the status is not between 100 and 699");
    }
    Ok((status, super::phrase(reason)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sip::{Headers, Method};

    fn notify(event: &str, state: &str, content_type: Option<&str>, body: &str) -> Request {
        let mut headers = Headers::new();
        headers.push("Event", event);
        headers.push("Subscription-State", state);
        if let Some(t) = content_type {
            headers.push("Content-Type", t);
        }
        Request {
            method: Method::Notify,
            uri: "sip:switchboard@127.0.0.1".into(),
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn sipfrag_status_lines_are_read() {
        assert_eq!(parse_sipfrag(b"SIP/2.0 200 OK\r\n"), Ok((200, "OK".into())));
        assert_eq!(parse_sipfrag(b"SIP/2.0 180 Ringing"), Ok((180, "Ringing".into())));
        assert_eq!(parse_sipfrag(b"SIP/2.0 486 Busy Here\r\nContent-Length: 0\r\n"), Ok((486, "Busy Here".into())));
        assert_eq!(parse_sipfrag(b"SIP/2.0 603"), Ok((603, String::new())));
        for bad in [
            &b""[..],
            b"200 OK",
            b"SIP/2.0 2000 OK",
            b"SIP/2.0 099 Low",
            b"SIP/2.0 7xx Hm",
            b"SIP/3.0 200 OK",
            b"\xff\xfe",
        ] {
            let error = parse_sipfrag(bad).expect_err("malformed");
            assert_eq!(error.status(), 400, "{bad:?}");
            assert!(error.to_string().contains("sipfrag"), "{error}");
        }
        assert!(parse_sipfrag(&vec![b'S'; MAX_SIPFRAG + 1]).is_err());
    }

    #[test]
    fn a_refer_notify_is_read_and_others_get_their_answer() {
        let ok = notify(
            "refer;id=7",
            "terminated;reason=noresource",
            Some("message/sipfrag;version=2.0"),
            "SIP/2.0 200 OK\r\n",
        );
        assert_eq!(read_notify(&ok), Ok(Notified { status: Some((200, "OK".into())), terminated: true }));
        let trying = notify("refer", "active;expires=60", Some("message/sipfrag"), "SIP/2.0 100 Trying\r\n");
        assert_eq!(read_notify(&trying), Ok(Notified { status: Some((100, "Trying".into())), terminated: false }));
        let empty = notify("refer", "active", None, "");
        assert_eq!(read_notify(&empty), Ok(Notified { status: None, terminated: false }));
        assert_eq!(
            read_notify(&notify("presence", "active", Some("message/sipfrag"), "SIP/2.0 200 OK")),
            Err(NotifyError::BadEvent)
        );
        assert_eq!(
            read_notify(&notify("refer", "active", Some("text/plain"), "SIP/2.0 200 OK")).map_err(|e| e.status()),
            Err(415)
        );
        assert_eq!(
            read_notify(&notify("refer", "active", Some("message/sipfrag"), "hello")).map_err(|e| e.status()),
            Err(400)
        );
    }

    proptest! {
        #[test]
        fn any_body_is_read_or_refused_with_400_never_a_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            match parse_sipfrag(&body) {
                Ok((status, reason)) => {
                    prop_assert!((100..=699).contains(&status));
                    prop_assert!(!reason.chars().any(char::is_control));
                }
                Err(error) => prop_assert_eq!(error.status(), 400),
            }
        }

        #[test]
        fn every_status_line_reads_back(status in 100u16..700, reason in "[A-Za-z ]{0,20}") {
            let line = format!("SIP/2.0 {status} {reason}\r\n");
            prop_assert_eq!(parse_sipfrag(line.as_bytes()).map(|(s, _)| s), Ok(status));
        }
    }
}
