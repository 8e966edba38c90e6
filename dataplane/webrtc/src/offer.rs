//! SDP offers (`POST /v1/webrtc`, `application/sdp`): what one must hold for a call, checked
//! before any state is made, each refusal an [`OfferError`] a client can act on (all are
//! HTTP 400, with a stable [`OfferError::code`]).
//!
//! A call needs, from the offer:
//! - text that is SDP: UTF-8, `v=0` first, every line `<letter>=<value>`, every `m=` line with
//!   media, port, protocol and at least one format, every `a=rtpmap` with a payload type and
//!   an encoding (checked here line by line so the error names the line), then parsed by
//!   str0m;
//! - an audio m-line that is not disabled (port 0) or `inactive`, offering Opus
//!   (`opus/48000/2`): the caller's voice and the agent's reply;
//! - a data channel (`m=application ... UDP/DTLS/SCTP webrtc-datachannel`): the session
//!   protocol's JSON runs on it, `session_start` first, so an offer without one could open no
//!   session. Required by default ([`OfferRules::require_data_channel`]);
//! - ICE credentials (`a=ice-ufrag`, `a=ice-pwd`) and a DTLS fingerprint (`a=fingerprint`).
//!
//! Video m-lines are allowed and answered as rejected (the call has no video).

use str0m::change::SdpOffer;
use str0m::format::Codec;
use str0m::media::Direction;

/// The largest offer taken, in bytes. A browser's offer with audio, video and a data channel
/// is 3-6 KiB; this leaves room for many candidates and codecs and bounds the parser's work.
pub const MAX_OFFER_BYTES: usize = 64 * 1024;

/// What an offer must have beyond audio with Opus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferRules {
    /// Refuse an offer without a data channel (default true: the session protocol needs one).
    pub require_data_channel: bool,
}

impl Default for OfferRules {
    fn default() -> Self {
        Self { require_data_channel: true }
    }
}

/// Why an offer was refused. Every one is the client's to fix: HTTP 400 with the message.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// No body.
    #[error("the offer is empty: POST an SDP offer (Content-Type: application/sdp)")]
    Empty,
    /// Over [`MAX_OFFER_BYTES`].
    #[error("the offer is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Not UTF-8 text.
    #[error("the offer is not UTF-8 text: SDP is text")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// A line that is not SDP, named by its number (from 1).
    #[error("malformed SDP, line {line}: {problem}")]
    Malformed {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// Lines that look right but do not parse as SDP together.
    #[error("malformed SDP: {0}")]
    Unparsable(#[source] str0m::error::SdpError),
    /// No usable audio m-line.
    #[error("the offer has no audio: add an audio track (an m=audio line that is not port 0 or inactive)")]
    NoAudio,
    /// Audio without Opus.
    #[error("the offer's audio has no Opus (it offers {offered}): offer opus/48000/2")]
    NoOpus {
        /// The encodings it offers, comma-separated.
        offered: String,
    },
    /// No data channel, where one is required.
    #[error(
        "the offer has no data channel: open one (m=application ... UDP/DTLS/SCTP webrtc-datachannel); the session protocol runs on it"
    )]
    NoDataChannel,
    /// No `a=ice-ufrag` / `a=ice-pwd`.
    #[error("the offer has no ICE credentials (a=ice-ufrag and a=ice-pwd)")]
    NoIceCredentials,
    /// No `a=fingerprint`.
    #[error("the offer has no DTLS fingerprint (a=fingerprint)")]
    NoFingerprint,
    /// str0m refused the offer after these checks (a BUNDLE group that does not match, a
    /// setup role it cannot take, ...).
    #[error("the offer cannot be answered: {0}")]
    Refused(#[source] str0m::RtcError),
}

impl OfferError {
    /// The HTTP status for it: always 400, the offer is the client's.
    pub fn status(&self) -> u16 {
        400
    }

    /// A stable name for programs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty_offer",
            Self::TooLarge { .. } => "offer_too_large",
            Self::NotUtf8(_) | Self::Malformed { .. } | Self::Unparsable(_) => "malformed_sdp",
            Self::NoAudio => "no_audio",
            Self::NoOpus { .. } => "no_opus",
            Self::NoDataChannel => "no_data_channel",
            Self::NoIceCredentials => "no_ice_credentials",
            Self::NoFingerprint => "no_fingerprint",
            Self::Refused(_) => "offer_refused",
        }
    }
}

/// A checked offer, ready to answer ([`crate::Call::accept`]).
#[derive(Debug)]
pub struct Offer {
    pub(crate) sdp: SdpOffer,
    /// The offer's text, kept to answer an ICE restart that comes as a fragment.
    pub(crate) text: String,
    /// Whether it opens a data channel.
    pub data_channel: bool,
}

impl Offer {
    /// Checks `body` against the rules; see the module docs for what is required.
    pub fn parse(body: &[u8], rules: OfferRules) -> Result<Self, OfferError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(OfferError::Empty);
        }
        if body.len() > MAX_OFFER_BYTES {
            return Err(OfferError::TooLarge { size: body.len(), limit: MAX_OFFER_BYTES });
        }
        let text = std::str::from_utf8(body).map_err(OfferError::NotUtf8)?;
        check_lines(text)?;
        let sdp = SdpOffer::from_sdp_string(text).map_err(OfferError::Unparsable)?;
        let data_channel = check_media(&sdp, rules)?;
        let has_creds = sdp.session.ice_creds().is_some() || sdp.media_lines.iter().any(|m| m.ice_creds().is_some());
        if !has_creds {
            return Err(OfferError::NoIceCredentials);
        }
        if sdp.session.fingerprint().is_none() && sdp.media_lines.iter().all(|m| m.fingerprint().is_none()) {
            return Err(OfferError::NoFingerprint);
        }
        Ok(Self { sdp, text: text.to_owned(), data_channel })
    }
}

/// The audio and data-channel rules; returns whether a data channel is offered.
fn check_media(sdp: &SdpOffer, rules: OfferRules) -> Result<bool, OfferError> {
    let audio: Vec<_> = sdp
        .media_lines
        .iter()
        .filter(|m| m.typ.to_string() == "audio" && !m.disabled && m.direction() != Direction::Inactive)
        .collect();
    if audio.is_empty() {
        return Err(OfferError::NoAudio);
    }
    let opus = audio.iter().any(|m| m.rtp_params().iter().any(|p| p.spec().codec == Codec::Opus));
    if !opus {
        let mut offered: Vec<String> = audio
            .iter()
            .flat_map(|m| m.rtp_params())
            .map(|p| format!("{}", p.spec().codec).to_ascii_lowercase())
            .collect();
        offered.dedup();
        let offered = if offered.is_empty() { "no codec Switchboard knows".to_owned() } else { offered.join(", ") };
        return Err(OfferError::NoOpus { offered });
    }
    let data_channel = sdp.media_lines.iter().any(|m| m.typ.is_channel() && !m.disabled);
    if rules.require_data_channel && !data_channel {
        return Err(OfferError::NoDataChannel);
    }
    Ok(data_channel)
}

/// Line by line: the structure str0m's parser would refuse with less precise words.
fn check_lines(text: &str) -> Result<(), OfferError> {
    let malformed = |line: usize, problem: String| OfferError::Malformed { line, problem };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    match lines.next() {
        Some((_, "v=0")) => {}
        Some((n, other)) => return Err(malformed(n, format!("SDP starts with v=0, not {}", snippet(other)))),
        None => return Err(OfferError::Empty),
    }
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        let bytes = line.as_bytes();
        if bytes.len() < 2 || !bytes[0].is_ascii_lowercase() || bytes[1] != b'=' {
            return Err(malformed(n, format!("expected <letter>=<value>, found {}", snippet(line))));
        }
        let value = &line[2..];
        match bytes[0] {
            b'm' => check_m_line(value).map_err(|p| malformed(n, p))?,
            b'a' => {
                if let Some(rtpmap) = value.strip_prefix("rtpmap:") {
                    check_rtpmap(rtpmap).map_err(|p| malformed(n, p))?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_m_line(value: &str) -> Result<(), String> {
    let fields: Vec<&str> = value.split_ascii_whitespace().collect();
    let [media, port, proto, formats @ ..] = fields.as_slice() else {
        return Err(format!("an m-line is m=<media> <port> <protocol> <formats>, found m={}", snippet(value)));
    };
    let port_number = port.split('/').next().unwrap_or_default();
    if port_number.parse::<u16>().is_err() {
        return Err(format!("m={media}: the port {} is not a number from 0 to 65535", snippet(port)));
    }
    if formats.is_empty() {
        return Err(format!("m={media} {port} {proto}: no formats (payload types) listed"));
    }
    let bad = formats.iter().find(|f| f.parse::<u8>().map_or(true, |pt| pt > 127));
    if let Some(bad) = bad.filter(|_| proto.contains("RTP")) {
        return Err(format!("m={media}: the payload type {} is not a number from 0 to 127", snippet(bad)));
    }
    Ok(())
}

fn check_rtpmap(value: &str) -> Result<(), String> {
    let (pt, encoding) = value.split_once(' ').unwrap_or((value, ""));
    if pt.parse::<u8>().map_or(true, |pt| pt > 127) {
        return Err(format!("a=rtpmap: the payload type {} is not a number from 0 to 127", snippet(pt)));
    }
    let mut parts = encoding.trim().split('/');
    let name = parts.next().unwrap_or_default();
    let rate = parts.next().unwrap_or_default();
    if name.is_empty() || rate.parse::<u32>().is_err() {
        return Err(format!("a=rtpmap:{pt}: expected <encoding>/<clock rate>, found {}", snippet(encoding)));
    }
    Ok(())
}

/// At most 40 characters of outside text, quoted, for a message.
pub(crate) fn snippet(text: &str) -> String {
    let short: String = text.chars().take(40).collect();
    if short.len() < text.len() { format!("{short:?}...") } else { format!("{short:?}") }
}

#[cfg(test)]
#[path = "offer_tests.rs"]
mod tests;
