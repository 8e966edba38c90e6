//! Offer/answer (RFC 3264) for the edge's one audio stream: G.722 (payload type 9, 16 kHz
//! audio on an 8000 RTP clock, RFC 3551 §4.5.2), G.711 μ-law (PCMU) or A-law (PCMA) at
//! 8 kHz; and RFC 4733 telephone-event/8000 for digits. G.711 goes to the gateway's session
//! protocol as it is (`session_start.audio` `mulaw`/`alaw` at 8000, binary frames); G.722 is
//! decoded to PCM16 at 16 kHz and back ([`crate::media::format`]). The first audio stream
//! over RTP (AVP, or SAVP with SRTP keys: [`super::secure`]) with a common codec and keys the
//! edge takes is taken; every other m= line is refused with port 0, as RFC 3264 §6 says.
//!
//! Which codec: G.722 whenever the stream offers it and the edge takes it,
//! wherever it stands in the offer, because the agent then hears the caller at 16 kHz (the
//! voice model's own input rate) instead of 8 kHz audio resampled up, and the caller hears
//! the reply at 16 kHz instead of 8; otherwise the first G.711 law in the offerer's order.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use super::secure::{self, LocalSrtp};
use super::{Direction, Media, SdpError, SessionDescription};
use crate::media::srtp::SrtpKeys;

/// A codec the edge speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// G.711 μ-law, static payload type 0.
    Pcmu,
    /// G.711 A-law, static payload type 8.
    Pcma,
    /// G.722 at 64 kbit/s, static payload type 9 (16 kHz audio, RTP clock 8000).
    G722,
}

impl Codec {
    /// The rtpmap encoding name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pcmu => "PCMU",
            Self::Pcma => "PCMA",
            Self::G722 => "G722",
        }
    }

    /// The static payload type (RFC 3551).
    pub fn payload_type(self) -> u8 {
        match self {
            Self::Pcmu => 0,
            Self::Pcma => 8,
            Self::G722 => 9,
        }
    }

    /// The gateway session protocol's name for this encoding (`session_start.audio`).
    pub fn session_encoding(self) -> &'static str {
        crate::media::format::Format::of(self).session_encoding().0
    }

    /// Whether it carries wideband (16 kHz) audio.
    pub fn is_wideband(self) -> bool {
        self == Self::G722
    }

    fn from_name(name: &str, clock_rate: u32) -> Option<Self> {
        match (name.to_ascii_uppercase().as_str(), clock_rate) {
            ("PCMU", 8000) => Some(Self::Pcmu),
            ("PCMA", 8000) => Some(Self::Pcma),
            ("G722", 8000) => Some(Self::G722),
            _ => None,
        }
    }
}

/// The edge's side of the media: where it receives RTP and what it speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalMedia {
    /// The address the other side sends RTP to.
    pub address: IpAddr,
    /// The RTP port.
    pub port: u16,
    /// The o= line's session id (a number, unique per call).
    pub session_id: u64,
    /// The o= line's version (raised on each new description in the dialogue).
    pub version: u64,
    /// The codecs the edge takes, most wanted first (for offers; an answer follows the
    /// offerer's order).
    pub codecs: Vec<Codec>,
    /// The payload type for telephone-event in offers.
    pub telephone_event: u8,
    /// How the edge stands on SRTP in this call, with its key.
    pub srtp: LocalSrtp,
}

/// What offer/answer settled for the audio stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Where to send RTP (the other side's connection address and port; port 0 or an
    /// unspecified address means on hold).
    pub remote: SocketAddr,
    /// The codec both ways.
    pub codec: Codec,
    /// The payload type of the codec (the static one).
    pub payload_type: u8,
    /// The telephone-event payload type, if both sides take RFC 4733 digits.
    pub telephone_event: Option<u8>,
    /// The other side's ptime, if it said (the edge sends 20 ms frames).
    pub remote_ptime: Option<u32>,
    /// The direction from the edge's point of view.
    pub direction: Direction,
    /// RTCP on the RTP port.
    pub rtcp_mux: bool,
    /// The SRTP keys, when offer/answer settled SRTP (`None`: plain RTP).
    pub srtp: Option<SrtpKeys>,
    /// The m= line's protocol the edge answered with (`RTP/AVP`, `RTP/SAVP`, ...).
    pub proto: String,
}

fn is_rtp(media: &Media) -> bool {
    media.proto == "RTP/AVP" || media.proto == "RTP/AVPF" || secure::is_secure(&media.proto)
}

fn offered_names(sdp: &SessionDescription) -> String {
    let mut names = Vec::new();
    for media in sdp.media.iter().filter(|m| m.kind == "audio") {
        for format in &media.formats {
            let name = format.parse().ok().and_then(|pt| media.rtpmap(pt));
            names.push(match name {
                Some(map) => format!("{}/{}", map.encoding, map.clock_rate),
                None => format!("payload type {format}"),
            });
        }
    }
    names.join(", ")
}

/// The common codec and telephone-event of one audio m= section: a wideband codec wherever
/// it stands, else the first common one in the section's own order (see the module docs).
fn pick(media: &Media, wanted: &[Codec]) -> Option<(Codec, u8, Option<u8>)> {
    let maps = || media.formats.iter().filter_map(|f| f.parse().ok()).filter_map(|pt| media.rtpmap(pt));
    let common = || {
        maps().filter_map(|m| {
            Codec::from_name(&m.encoding, m.clock_rate).filter(|c| wanted.contains(c)).map(|c| (c, m.payload_type))
        })
    };
    let (codec, pt) = common().find(|(c, _)| c.is_wideband()).or_else(|| common().next())?;
    let event = maps()
        .find(|m| m.encoding.eq_ignore_ascii_case("telephone-event") && m.clock_rate == 8000)
        .map(|m| m.payload_type);
    Some((codec, pt, event))
}

impl LocalMedia {
    /// Answers an offer: the settled stream and the answer's SDP body, or an error whose
    /// [`SdpError::status`] is 488 with a reason that names what was offered.
    pub fn answer(&self, offer: &SessionDescription) -> Result<(Negotiated, String), SdpError> {
        let audio: Vec<usize> = (0..offer.media.len())
            .filter(|&i| offer.media[i].kind == "audio" && is_rtp(&offer.media[i]) && offer.media[i].port != 0)
            .collect();
        if audio.is_empty() {
            let kinds: Vec<String> = offer.media.iter().map(|m| format!("{} {}", m.kind, m.proto)).collect();
            return Err(SdpError::NoAudio(if kinds.is_empty() { "none".to_owned() } else { kinds.join(", ") }));
        }
        let mut refused = Vec::new();
        let chosen = audio.iter().find_map(|&i| {
            let picked = pick(&offer.media[i], &self.codecs)?;
            match self.srtp.answer(&offer.media[i]) {
                Ok(keys) => Some((i, picked, keys)),
                Err(reason) => {
                    refused.push(reason);
                    None
                }
            }
        });
        let Some((index, (codec, payload_type, telephone_event), srtp)) = chosen else {
            if !refused.is_empty() {
                return Err(SdpError::Srtp(refused.join("; ")));
            }
            return Err(self.no_common_codec(offer));
        };
        let media = &offer.media[index];
        let address = media.connection.or(offer.connection).ok_or(SdpError::NoConnection)?;
        let direction = media.direction.unwrap_or_default().answer();
        let negotiated = Negotiated {
            remote: SocketAddr::new(address, media.port),
            codec,
            payload_type,
            telephone_event,
            remote_ptime: media.ptime,
            direction,
            rtcp_mux: media.rtcp_mux,
            srtp,
            proto: media.proto.clone(),
        };
        let mut body = self.head();
        for (i, other) in offer.media.iter().enumerate() {
            if i == index {
                self.audio_section(&mut body, &negotiated);
            } else {
                let first = other.formats.first().map(String::as_str).unwrap_or("0");
                let _ = write!(body, "m={} 0 {} {first}\r\n", other.kind, other.proto);
            }
        }
        Ok((negotiated, body))
    }

    /// An offer for an outbound call: every codec in [`LocalMedia::codecs`] and
    /// telephone-event, sendrecv, 20 ms.
    pub fn offer(&self) -> String {
        let mut body = self.head();
        let mut formats: Vec<String> = self.codecs.iter().map(|c| c.payload_type().to_string()).collect();
        formats.push(self.telephone_event.to_string());
        let _ = write!(body, "m=audio {} {} {}\r\n", self.port, self.srtp.offer_proto(), formats.join(" "));
        for codec in &self.codecs {
            let _ = write!(body, "a=rtpmap:{} {}/8000\r\n", codec.payload_type(), codec.name());
        }
        let te = self.telephone_event;
        let _ = write!(body, "a=rtpmap:{te} telephone-event/8000\r\na=fmtp:{te} 0-15\r\na=ptime:20\r\na=sendrecv\r\n");
        self.srtp.offer_lines(&mut body);
        body
    }

    /// Reads the answer to [`LocalMedia::offer`].
    pub fn accept_answer(&self, answer: &SessionDescription) -> Result<Negotiated, SdpError> {
        let media = answer
            .media
            .iter()
            .find(|m| m.kind == "audio" && is_rtp(m) && m.port != 0)
            .ok_or_else(|| SdpError::NoAudio(offered_names(answer)))?;
        let (codec, payload_type, telephone_event) =
            pick(media, &self.codecs).ok_or_else(|| self.no_common_codec(answer))?;
        let address = media.connection.or(answer.connection).ok_or(SdpError::NoConnection)?;
        let srtp = self.srtp.accept(media).map_err(SdpError::Srtp)?;
        Ok(Negotiated {
            remote: SocketAddr::new(address, media.port),
            codec,
            payload_type,
            telephone_event,
            remote_ptime: media.ptime,
            direction: media.direction.unwrap_or_default().answer(),
            rtcp_mux: media.rtcp_mux,
            srtp,
            proto: media.proto.clone(),
        })
    }

    fn no_common_codec(&self, sdp: &SessionDescription) -> SdpError {
        let supported: Vec<String> = self.codecs.iter().map(|c| format!("{}/8000", c.name())).collect();
        SdpError::NoCommonCodec { offered: offered_names(sdp), supported: supported.join(", ") }
    }

    fn head(&self) -> String {
        let family = if self.address.is_ipv4() { "IP4" } else { "IP6" };
        let a = self.address;
        format!(
            "v=0\r\no=switchboard {} {} IN {family} {a}\r\ns=switchboard\r\nc=IN {family} {a}\r\nt=0 0\r\n",
            self.session_id, self.version
        )
    }

    fn audio_section(&self, body: &mut String, n: &Negotiated) {
        let (pt, name, proto) = (n.payload_type, n.codec.name(), &n.proto);
        match n.telephone_event {
            Some(te) => {
                let _ = write!(body, "m=audio {} {proto} {pt} {te}\r\na=rtpmap:{pt} {name}/8000\r\n", self.port);
                let _ = write!(body, "a=rtpmap:{te} telephone-event/8000\r\na=fmtp:{te} 0-15\r\n");
            }
            None => {
                let _ = write!(body, "m=audio {} {proto} {pt}\r\na=rtpmap:{pt} {name}/8000\r\n", self.port);
            }
        }
        if let Some(keys) = &n.srtp {
            secure::answer_line(body, keys);
        }
        let _ = write!(body, "a=ptime:20\r\na={}\r\n", n.direction.as_str());
        if n.rtcp_mux {
            body.push_str("a=rtcp-mux\r\n");
        }
    }
}
