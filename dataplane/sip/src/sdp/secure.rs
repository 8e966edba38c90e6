//! SRTP in offer/answer (RFC 4568 §5, §7): what the edge takes of an offered audio
//! stream's keys, and the `a=crypto` lines of its own answers and offers. The owner says
//! per call how the edge stands ([`LocalSrtp`]) — from its policy and the transport the
//! call's signalling came on, since keys in SDP are only as secret as the signalling — and
//! draws the edge's key; this module draws nothing.
//!
//! An offer over `RTP/SAVP` (or `RTP/SAVPF`) needs a usable `a=crypto` line. An offer over
//! `RTP/AVP` that carries `a=crypto` anyway (best-effort SRTP, as baresip's `srtp` module
//! offers it) gets SRTP when the edge takes SRTP and the line is usable, else plain RTP —
//! unless SRTP is required.

use std::fmt::Write as _;

use super::Media;
use super::crypto::{Crypto, choose};
use crate::media::srtp::{MasterKey, SrtpKeys, Suite};

/// How the edge stands on SRTP in one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalSrtp {
    /// No SRTP: an `RTP/SAVP` offer is refused (488) with this reason; `a=crypto` on
    /// `RTP/AVP` is ignored and plain RTP answered.
    Off(String),
    /// SRTP when the offer brings a usable key, plain RTP otherwise; the edge's own key.
    Optional(MasterKey),
    /// SRTP or nothing: an offer without a usable key is refused (488); the edge's key.
    Required(MasterKey),
    /// Every offer is refused (488) with this reason: SRTP is required but the call's
    /// signalling cannot carry keys safely (it did not come over TLS).
    Refused(String),
}

impl Default for LocalSrtp {
    fn default() -> Self {
        Self::Off("SRTP is off on this edge".to_owned())
    }
}

/// Whether an m= line's protocol is SRTP.
pub(super) fn is_secure(proto: &str) -> bool {
    proto == "RTP/SAVP" || proto == "RTP/SAVPF"
}

/// The tag of each suite in the edge's offers (1: the 80-bit tag, 2: the 32-bit one).
fn offered_tag(suite: Suite) -> u32 {
    match suite {
        Suite::AesCm128HmacSha1_80 => 1,
        Suite::AesCm128HmacSha1_32 => 2,
    }
}

fn keys(crypto: Crypto, local: &MasterKey) -> SrtpKeys {
    SrtpKeys {
        suite: crypto.suite,
        tag: crypto.tag,
        remote: crypto.key,
        local: local.clone(),
        lifetime: crypto.lifetime,
    }
}

impl LocalSrtp {
    /// What the edge takes of an offered audio stream: the keys (SRTP), `None` (plain
    /// RTP), or why the stream cannot be taken.
    pub(super) fn answer(&self, media: &Media) -> Result<Option<SrtpKeys>, String> {
        let secure = is_secure(&media.proto);
        match self {
            Self::Refused(reason) => Err(reason.clone()),
            Self::Off(reason) if secure => Err(format!("{} is offered: {reason}", media.proto)),
            Self::Off(_) => Ok(None),
            Self::Optional(local) | Self::Required(local) => match choose(&media.crypto) {
                Ok(crypto) => Ok(Some(keys(crypto, local))),
                Err(why) if matches!(self, Self::Required(_)) => Err(format!("SRTP is required: {why}")),
                Err(why) if secure => Err(why),
                Err(_) => Ok(None),
            },
        }
    }

    /// What the edge takes of the answer to its own offer ([`LocalSrtp::offer_lines`]).
    pub(super) fn accept(&self, media: &Media) -> Result<Option<SrtpKeys>, String> {
        let secure = is_secure(&media.proto);
        let local = match self {
            Self::Refused(reason) => return Err(reason.clone()),
            Self::Off(reason) if secure => return Err(format!("{} is answered: {reason}", media.proto)),
            Self::Off(_) => return Ok(None),
            Self::Optional(local) | Self::Required(local) => local,
        };
        match choose(&media.crypto) {
            Ok(crypto) if crypto.tag == offered_tag(crypto.suite) => Ok(Some(keys(crypto, local))),
            Ok(crypto) => Err(format!("the answer's a=crypto tag {} is not one the edge offered", crypto.tag)),
            Err(why) if secure || matches!(self, Self::Required(_)) => Err(format!("SRTP is required: {why}")),
            Err(_) => Ok(None),
        }
    }

    /// The m= line's protocol in the edge's offers.
    pub(super) fn offer_proto(&self) -> &'static str {
        match self {
            Self::Required(_) => "RTP/SAVP",
            _ => "RTP/AVP",
        }
    }

    /// The `a=crypto` lines of the edge's offers: every suite, with the edge's key.
    pub(super) fn offer_lines(&self, body: &mut String) {
        if let Self::Optional(local) | Self::Required(local) = self {
            for suite in Suite::ALL {
                let _ = write!(body, "a=crypto:{}\r\n", Crypto::value(offered_tag(suite), suite, local));
            }
        }
    }
}

/// The `a=crypto` line of an answer that settled SRTP: the offer's tag and suite, the
/// edge's key.
pub(super) fn answer_line(body: &mut String, keys: &SrtpKeys) {
    let _ = write!(body, "a=crypto:{}\r\n", Crypto::value(keys.tag, keys.suite, &keys.local));
}
