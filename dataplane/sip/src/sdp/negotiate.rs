//! Offer/answer (RFC 3264) for the edge's one audio stream: Opus (RFC 7587: a dynamic
//! payload type, `opus/48000/2` on a 48 kHz RTP clock), G.722 (payload type 9, 16 kHz audio
//! on an 8000 RTP clock, RFC 3551 §4.5.2), G.711 μ-law (PCMU) or A-law (PCMA) at 8 kHz;
//! and RFC 4733 telephone-event for digits, at the codec's clock or at 8000. G.711 goes to
//! the gateway's session protocol as it is (`session_start.audio` `mulaw`/`alaw` at 8000,
//! binary frames); Opus and G.722 are decoded to PCM16 at 16 kHz and back
//! ([`crate::media::format`]). The first audio stream over RTP (AVP, or SAVP with SRTP keys:
//! [`super::secure`]) with a common codec and keys the edge takes is taken; every other m=
//! line is refused with port 0, as RFC 3264 §6 says.
//!
//! Which codec: a wideband one (Opus, G.722) whenever the stream offers it and the edge
//! takes it, wherever it stands in the offer, the one the edge lists first
//! ([`LocalMedia::codecs`]; the edge lists Opus, then G.722), because the agent then hears
//! the caller at 16 kHz (the voice model's own input rate) instead of 8 kHz audio resampled
//! up, and the caller hears the reply at 16 kHz instead of 8; Opus before G.722 because it
//! also conceals a lost packet from the next one's in-band FEC, at a third of G.722's
//! bitrate. Otherwise the first G.711 law in the offerer's order. Opus is taken only as
//! RFC 7587 writes it: `opus/48000/2` on a dynamic payload type (96-127); its fmtp is read
//! ([`super::opus`]).

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use super::opus::{LOCAL_FMTP, OpusParams};
use super::secure::{self, LocalSrtp};
use super::{Direction, Media, RtpMap, SdpError, SessionDescription};
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
    /// Opus (RFC 7587), a dynamic payload type, RTP clock 48000; mono here, at 16 kHz.
    Opus,
}

impl Codec {
    /// The rtpmap encoding name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pcmu => "PCMU",
            Self::Pcma => "PCMA",
            Self::G722 => "G722",
            Self::Opus => "opus",
        }
    }

    /// The payload type the edge offers it with: the static one (RFC 3551), or 111 for Opus
    /// (dynamic: [`LocalMedia::offer`] takes another when telephone-event has 111).
    pub fn payload_type(self) -> u8 {
        match self {
            Self::Pcmu => 0,
            Self::Pcma => 8,
            Self::G722 => 9,
            Self::Opus => 111,
        }
    }

    /// Its RTP clock rate: 8000, or 48000 for Opus.
    pub fn clock_rate(self) -> u32 {
        match self {
            Self::Opus => switchboard_opus::RTP_CLOCK,
            _ => 8000,
        }
    }

    /// Its rtpmap's `<encoding>/<clock>[/<channels>]`: `PCMU/8000`, `opus/48000/2`.
    pub fn rtpmap(self) -> &'static str {
        match self {
            Self::Pcmu => "PCMU/8000",
            Self::Pcma => "PCMA/8000",
            Self::G722 => "G722/8000",
            Self::Opus => "opus/48000/2",
        }
    }

    /// The gateway session protocol's name for this encoding (`session_start.audio`).
    pub fn session_encoding(self) -> &'static str {
        crate::media::format::Format::of(self).session_encoding().0
    }

    /// Whether it carries wideband (16 kHz) audio.
    pub fn is_wideband(self) -> bool {
        matches!(self, Self::G722 | Self::Opus)
    }

    /// The codec an rtpmap names, if the edge speaks it: G.711 and G.722 at 8000, Opus only
    /// as `opus/48000/2` on a dynamic payload type (RFC 7587 §7).
    fn of(map: &RtpMap) -> Option<Self> {
        match (map.encoding.to_ascii_uppercase().as_str(), map.clock_rate) {
            ("PCMU", 8000) => Some(Self::Pcmu),
            ("PCMA", 8000) => Some(Self::Pcma),
            ("G722", 8000) => Some(Self::G722),
            ("OPUS", 48_000) if map.channels == 2 && (96..=127).contains(&map.payload_type) => Some(Self::Opus),
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
    /// The payload type of the codec (the static one; Opus's, the offer's dynamic one).
    pub payload_type: u8,
    /// The telephone-event payload type, if both sides take RFC 4733 digits.
    pub telephone_event: Option<u8>,
    /// The telephone-event clock rate: the codec's where the other side offered that,
    /// 8000 otherwise (RFC 4733 §2.1); durations of digits are in its units.
    pub telephone_event_clock: u32,
    /// The other side's Opus parameters (its fmtp), on an Opus call.
    pub opus: Option<OpusParams>,
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

/// What one audio m= section has in common with the edge.
struct Picked {
    codec: Codec,
    payload_type: u8,
    /// The telephone-event payload type and its clock.
    telephone_event: Option<(u8, u32)>,
    opus: Option<OpusParams>,
}

/// The common codec and telephone-event of one audio m= section: the wideband codec the
/// edge wants most wherever it stands, else the first common one in the section's own order
/// (see the module docs).
fn pick(media: &Media, wanted: &[Codec]) -> Option<Picked> {
    let maps = || media.formats.iter().filter_map(|f| f.parse().ok()).filter_map(|pt| media.rtpmap(pt));
    let common = || maps().filter_map(|m| Codec::of(&m).filter(|c| wanted.contains(c)).map(|c| (c, m.payload_type)));
    let rank = |codec: &Codec| wanted.iter().position(|w| w == codec).unwrap_or(usize::MAX);
    let wide = common().filter(|(c, _)| c.is_wideband()).min_by_key(|(c, _)| rank(c));
    let (codec, payload_type) = wide.or_else(|| common().next())?;
    let event = |clock: u32| {
        maps()
            .find(|m| m.encoding.eq_ignore_ascii_case("telephone-event") && m.clock_rate == clock)
            .map(|m| (m.payload_type, clock))
    };
    let telephone_event = event(codec.clock_rate()).or_else(|| event(8000));
    let opus = (codec == Codec::Opus).then(|| OpusParams::of(media, payload_type));
    Some(Picked { codec, payload_type, telephone_event, opus })
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
        let Some((index, picked, srtp)) = chosen else {
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
            codec: picked.codec,
            payload_type: picked.payload_type,
            telephone_event: picked.telephone_event.map(|(pt, _)| pt),
            telephone_event_clock: picked.telephone_event.map_or(8000, |(_, clock)| clock),
            opus: picked.opus,
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

    /// The payload type the edge offers `codec` with: [`Codec::payload_type`], or for Opus
    /// 110 when telephone-event has 111.
    pub fn payload_type(&self, codec: Codec) -> u8 {
        match codec.payload_type() {
            111 if self.telephone_event == 111 => 110,
            pt => pt,
        }
    }

    /// An offer for an outbound call: every codec in [`LocalMedia::codecs`] (Opus with
    /// its fmtp, [`LOCAL_FMTP`]) and telephone-event at 8000, sendrecv, 20 ms.
    pub fn offer(&self) -> String {
        let mut body = self.head();
        let mut formats: Vec<String> = self.codecs.iter().map(|c| self.payload_type(*c).to_string()).collect();
        formats.push(self.telephone_event.to_string());
        let _ = write!(body, "m=audio {} {} {}\r\n", self.port, self.srtp.offer_proto(), formats.join(" "));
        for codec in &self.codecs {
            let pt = self.payload_type(*codec);
            let _ = write!(body, "a=rtpmap:{pt} {}\r\n", codec.rtpmap());
            if *codec == Codec::Opus {
                let _ = write!(body, "a=fmtp:{pt} {LOCAL_FMTP}\r\n");
            }
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
        let picked = pick(media, &self.codecs).ok_or_else(|| self.no_common_codec(answer))?;
        let address = media.connection.or(answer.connection).ok_or(SdpError::NoConnection)?;
        let srtp = self.srtp.accept(media).map_err(SdpError::Srtp)?;
        Ok(Negotiated {
            remote: SocketAddr::new(address, media.port),
            codec: picked.codec,
            payload_type: picked.payload_type,
            telephone_event: picked.telephone_event.map(|(pt, _)| pt),
            telephone_event_clock: picked.telephone_event.map_or(8000, |(_, clock)| clock),
            opus: picked.opus,
            remote_ptime: media.ptime,
            direction: media.direction.unwrap_or_default().answer(),
            rtcp_mux: media.rtcp_mux,
            srtp,
            proto: media.proto.clone(),
        })
    }

    fn no_common_codec(&self, sdp: &SessionDescription) -> SdpError {
        let supported: Vec<&str> = self.codecs.iter().map(|c| c.rtpmap()).collect();
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
        let (pt, map, proto) = (n.payload_type, n.codec.rtpmap(), &n.proto);
        match n.telephone_event {
            Some(te) => {
                let _ = write!(body, "m=audio {} {proto} {pt} {te}\r\na=rtpmap:{pt} {map}\r\n", self.port);
            }
            None => {
                let _ = write!(body, "m=audio {} {proto} {pt}\r\na=rtpmap:{pt} {map}\r\n", self.port);
            }
        }
        if n.codec == Codec::Opus {
            let _ = write!(body, "a=fmtp:{pt} {LOCAL_FMTP}\r\n");
        }
        if let Some(te) = n.telephone_event {
            let clock = n.telephone_event_clock;
            let _ = write!(body, "a=rtpmap:{te} telephone-event/{clock}\r\na=fmtp:{te} 0-15\r\n");
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
