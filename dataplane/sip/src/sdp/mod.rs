//! SDP (RFC 4566) as the edge reads it: the session's connection address and its media
//! lines with their formats, rtpmap/fmtp, ptime, direction and rtcp-mux. Parsing is
//! strict about the lines it needs (v, o, s, t, c, m) and bounded ([`Limits`]); other
//! lines are skipped, as RFC 4566 §5 allows. Offer/answer for audio is in [`negotiate`],
//! Opus's fmtp parameters in [`mod@opus`]; SDES keys for SRTP (`a=crypto`) in [`crypto`] and
//! [`secure`].

pub mod crypto;
pub mod negotiate;
pub mod opus;
pub mod secure;

use std::net::IpAddr;

pub use negotiate::{Codec, LocalMedia, Negotiated};
pub use opus::OpusParams;
pub use secure::LocalSrtp;

/// How much an SDP body may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Lines in the body.
    pub max_lines: usize,
    /// Media descriptions (m= lines).
    pub max_media: usize,
    /// Formats on one m= line.
    pub max_formats: usize,
}

impl Default for Limits {
    /// 256 lines, 8 media, 32 formats each: a phone or carrier offers one audio stream of
    /// a handful of codecs.
    fn default() -> Self {
        Self { max_lines: 256, max_media: 8, max_formats: 32 }
    }
}

/// Why an SDP body was refused. [`SdpError::status`] is the SIP answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    /// The body is not UTF-8.
    #[error("the SDP body is not UTF-8")]
    NotUtf8,
    /// A line is not `<letter>=<value>`.
    #[error("SDP line {line} is not <type>=<value>: {text:?}")]
    Line {
        /// The line number, from 1.
        line: usize,
        /// The line, cut to 100 characters.
        text: String,
    },
    /// The body does not start with `v=0`.
    #[error("the SDP body does not start with v=0")]
    Version,
    /// A line the session needs (o, s, t) is missing.
    #[error("the SDP body has no {0}= line")]
    Missing(char),
    /// A line of a known type does not read.
    #[error("invalid SDP {kind}= line: {text:?}")]
    Invalid {
        /// The line's type.
        kind: char,
        /// The line, cut to 100 characters.
        text: String,
    },
    /// More lines, media or formats than [`Limits`] allow.
    #[error("the SDP body has more than {limit} {what}")]
    TooMany {
        /// Lines, media or formats.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// An audio stream has no connection address (no c= line at either level).
    #[error("the audio stream has no connection address (c= line)")]
    NoConnection,
    /// The offer has no audio stream the edge can take (RTP/AVP, RTP/AVPF, RTP/SAVP or
    /// RTP/SAVPF).
    #[error("no audio stream over RTP in the offer (media offered: {0})")]
    NoAudio(String),
    /// An audio stream with a common codec was refused for its SRTP (no usable key, SRTP
    /// off or required); the reason says which. It never holds key bytes.
    #[error("{0}")]
    Srtp(String),
    /// No codec the edge speaks is in the offer or answer.
    #[error("no common codec: offered {offered}, this edge speaks {supported}")]
    NoCommonCodec {
        /// What was offered, by name (`G729/8000, 96`).
        offered: String,
        /// What the edge speaks.
        supported: String,
    },
}

impl SdpError {
    /// The SIP status for an INVITE carrying this SDP: 488 Not Acceptable Here when the
    /// offer is readable but has nothing the edge can take, 400 when it does not read.
    pub fn status(&self) -> u16 {
        match self {
            Self::NoAudio(_) | Self::NoCommonCodec { .. } | Self::Srtp(_) => 488,
            _ => 400,
        }
    }
}

/// Which way media flows, from the describing side's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    /// Both ways (the default).
    #[default]
    SendRecv,
    /// The describing side only sends.
    SendOnly,
    /// The describing side only receives.
    RecvOnly,
    /// Neither (on hold).
    Inactive,
}

impl Direction {
    /// The attribute name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SendRecv => "sendrecv",
            Self::SendOnly => "sendonly",
            Self::RecvOnly => "recvonly",
            Self::Inactive => "inactive",
        }
    }

    /// The direction an answer takes for this offered one (RFC 3264 §6.1).
    pub fn answer(self) -> Self {
        match self {
            Self::SendOnly => Self::RecvOnly,
            Self::RecvOnly => Self::SendOnly,
            other => other,
        }
    }
}

/// An `a=rtpmap:<pt> <encoding>/<clock>[/<channels>]` attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtpMap {
    /// The payload type.
    pub payload_type: u8,
    /// The encoding name as written (`PCMU`, `telephone-event`).
    pub encoding: String,
    /// The clock rate.
    pub clock_rate: u32,
    /// The channels (the encoding parameter; 1 when the attribute leaves it out).
    pub channels: u32,
}

/// One m= section.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Media {
    /// `audio`, `video`, ...
    pub kind: String,
    /// The port (0: the stream is refused or disabled).
    pub port: u16,
    /// `RTP/AVP`, `RTP/SAVP`, ...
    pub proto: String,
    /// The formats as written on the m= line (payload types for RTP).
    pub formats: Vec<String>,
    /// The media-level connection address, if any.
    pub connection: Option<IpAddr>,
    /// The rtpmap attributes.
    pub rtpmaps: Vec<RtpMap>,
    /// The fmtp attributes: payload type and parameters.
    pub fmtps: Vec<(u8, String)>,
    /// `a=ptime`, in milliseconds.
    pub ptime: Option<u32>,
    /// The direction attribute (session-level one applied when there is none here).
    pub direction: Option<Direction>,
    /// `a=rtcp-mux` (RFC 5761): RTCP on the RTP port.
    pub rtcp_mux: bool,
    /// The values of the `a=crypto` attributes (RFC 4568), read when offer/answer needs
    /// them ([`crypto`]).
    pub crypto: Vec<String>,
}

impl Media {
    /// The rtpmap of a payload type: its own, or the static one for 0 (PCMU), 8 (PCMA) and
    /// 9 (G722) (RFC 3551).
    pub fn rtpmap(&self, payload_type: u8) -> Option<RtpMap> {
        if let Some(map) = self.rtpmaps.iter().find(|m| m.payload_type == payload_type) {
            return Some(map.clone());
        }
        let encoding = match payload_type {
            0 => "PCMU",
            8 => "PCMA",
            9 => "G722",
            _ => return None,
        };
        Some(RtpMap { payload_type, encoding: encoding.to_owned(), clock_rate: 8000, channels: 1 })
    }
}

/// A session description.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionDescription {
    /// The o= line's session id.
    pub session_id: String,
    /// The session-level connection address, if any.
    pub connection: Option<IpAddr>,
    /// The media sections, in order.
    pub media: Vec<Media>,
}

fn cut(text: &str) -> String {
    text.chars().take(100).collect()
}

/// Reads `IN IP4 192.0.2.1` (a multicast TTL suffix is refused).
fn connection(value: &str) -> Result<IpAddr, SdpError> {
    let invalid = || SdpError::Invalid { kind: 'c', text: cut(value) };
    let mut parts = value.split_whitespace();
    let (Some("IN"), Some(family), Some(address), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let address: IpAddr = address.parse().map_err(|_| invalid())?;
    match (family, address) {
        ("IP4", IpAddr::V4(_)) | ("IP6", IpAddr::V6(_)) => Ok(address),
        _ => Err(invalid()),
    }
}

impl SessionDescription {
    /// Parses an SDP body. Lines end in CRLF or LF.
    pub fn parse(body: &[u8], limits: &Limits) -> Result<Self, SdpError> {
        let text = std::str::from_utf8(body).map_err(|_| SdpError::NotUtf8)?;
        let mut sdp = SessionDescription::default();
        let (mut seen_o, mut seen_s, mut seen_t) = (false, false, false);
        let mut session_direction = None;
        let lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.is_empty());
        for (index, line) in lines.enumerate() {
            if index == limits.max_lines {
                return Err(SdpError::TooMany { what: "lines", limit: limits.max_lines });
            }
            let (kind, value) = match line.as_bytes() {
                [k, b'=', ..] if k.is_ascii_lowercase() => (char::from(*k), &line[2..]),
                _ => return Err(SdpError::Line { line: index + 1, text: cut(line) }),
            };
            if index == 0 {
                if kind != 'v' || value != "0" {
                    return Err(SdpError::Version);
                }
                continue;
            }
            let invalid = || SdpError::Invalid { kind, text: cut(value) };
            match kind {
                'o' => {
                    let fields: Vec<&str> = value.split_whitespace().collect();
                    if fields.len() != 6 {
                        return Err(invalid());
                    }
                    fields[1].clone_into(&mut sdp.session_id);
                    seen_o = true;
                }
                's' => seen_s = true,
                't' => seen_t = true,
                'c' => {
                    let address = connection(value)?;
                    match sdp.media.last_mut() {
                        Some(media) => media.connection = Some(address),
                        None => sdp.connection = Some(address),
                    }
                }
                'm' => {
                    if sdp.media.len() == limits.max_media {
                        return Err(SdpError::TooMany { what: "media descriptions", limit: limits.max_media });
                    }
                    sdp.media.push(media_line(value, limits).ok_or_else(invalid)??);
                }
                'a' => attribute(&mut sdp, &mut session_direction, value).ok_or_else(invalid)?,
                _ => {}
            }
        }
        if !seen_o {
            return Err(SdpError::Missing('o'));
        }
        if !seen_s {
            return Err(SdpError::Missing('s'));
        }
        if !seen_t {
            return Err(SdpError::Missing('t'));
        }
        for media in &mut sdp.media {
            media.direction = media.direction.or(session_direction);
        }
        Ok(sdp)
    }
}

/// `audio 49170 RTP/AVP 0 8 101`; `None` if it does not read.
fn media_line(value: &str, limits: &Limits) -> Option<Result<Media, SdpError>> {
    let mut parts = value.split_whitespace();
    let kind = parts.next()?;
    let port = parts.next()?.split('/').next()?.parse().ok()?;
    let proto = parts.next()?;
    let formats: Vec<String> = parts.map(str::to_owned).collect();
    if formats.is_empty() {
        return None;
    }
    if formats.len() > limits.max_formats {
        return Some(Err(SdpError::TooMany { what: "formats on an m= line", limit: limits.max_formats }));
    }
    Some(Ok(Media { kind: kind.to_owned(), port, proto: proto.to_owned(), formats, ..Media::default() }))
}

/// Applies one a= attribute; `None` if an attribute the edge reads does not read.
fn attribute(sdp: &mut SessionDescription, session_direction: &mut Option<Direction>, value: &str) -> Option<()> {
    let (name, rest) = value.split_once(':').unwrap_or((value, ""));
    let direction = match name {
        "sendrecv" => Some(Direction::SendRecv),
        "sendonly" => Some(Direction::SendOnly),
        "recvonly" => Some(Direction::RecvOnly),
        "inactive" => Some(Direction::Inactive),
        _ => None,
    };
    let Some(media) = sdp.media.last_mut() else {
        if direction.is_some() {
            *session_direction = direction;
        }
        return Some(());
    };
    if direction.is_some() {
        media.direction = direction;
    }
    match name {
        "rtpmap" => {
            let (pt, map) = rest.split_once(' ')?;
            let mut parts = map.trim().split('/');
            let encoding = parts.next().filter(|e| !e.is_empty())?;
            let clock_rate = parts.next()?.parse().ok()?;
            let channels = parts.next().map_or(Some(1), |c| c.parse().ok())?;
            let payload_type = pt.parse().ok()?;
            media.rtpmaps.push(RtpMap { payload_type, encoding: encoding.to_owned(), clock_rate, channels });
        }
        "fmtp" => {
            let (pt, params) = rest.split_once(' ')?;
            media.fmtps.push((pt.parse().ok()?, params.trim().to_owned()));
        }
        "ptime" => media.ptime = Some(rest.trim().parse().ok()?),
        "rtcp-mux" => media.rtcp_mux = true,
        "crypto" => media.crypto.push(rest.trim().to_owned()),
        _ => {}
    }
    Some(())
}

#[cfg(test)]
mod opus_tests;
#[cfg(test)]
mod secure_tests;
#[cfg(test)]
mod tests;
