//! The edge's SRTP policy (`--srtp`; chart: `sip.srtp`) and, per call, what it means for
//! the transport the call's signalling came on ([`SrtpPolicy::for_call`]): SDES keys
//! travel in SDP, so they are only as secret as the signalling. Over TLS the edge offers
//! and takes SRTP (and requires it with `required`); over plain UDP or TCP it never sends
//! or takes a key: an `RTP/SAVP` offer there is refused (488) with the reason, and with
//! `required` every call there is. The edge's own master key for each call is drawn here,
//! from the operating system's CSPRNG.

use std::fmt;
use std::str::FromStr;

use switchboard_sip::call::Transport;
use switchboard_sip::media::srtp::MasterKey;
use switchboard_sip::sdp::LocalSrtp;

/// How the edge stands on SRTP (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SrtpPolicy {
    /// Never: `RTP/SAVP` offers are refused (488); `a=crypto` on `RTP/AVP` is ignored.
    Off,
    /// On calls over TLS, SRTP when the caller offers a usable key, plain RTP otherwise.
    #[default]
    Optional,
    /// Only SRTP, only over TLS: any other call is refused (488) with the reason.
    Required,
}

impl SrtpPolicy {
    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }

    /// The edge's stance in one call whose signalling came on `transport`, with a fresh
    /// key when it may use one.
    pub fn for_call(self, transport: Transport) -> LocalSrtp {
        match (self, transport) {
            (Self::Off, _) => LocalSrtp::Off("SRTP is off on this edge (--srtp off)".to_owned()),
            (Self::Optional, Transport::Tls) => match fresh_key() {
                Some(key) => LocalSrtp::Optional(key),
                None => LocalSrtp::Off("the edge could not draw an SRTP key".to_owned()),
            },
            (Self::Required, Transport::Tls) => match fresh_key() {
                Some(key) => LocalSrtp::Required(key),
                None => LocalSrtp::Refused("SRTP is required and the edge could not draw a key".to_owned()),
            },
            (Self::Optional, other) => LocalSrtp::Off(format!(
                "SRTP keys are exchanged only over TLS and this call came over {}",
                other.as_str()
            )),
            (Self::Required, other) => LocalSrtp::Refused(format!(
                "SRTP is required and its keys are exchanged only over TLS; this call came over {} \
                 (call sips: or ;transport=tls)",
                other.as_str()
            )),
        }
    }
}

impl fmt::Display for SrtpPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SrtpPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "optional" => Ok(Self::Optional),
            "required" => Ok(Self::Required),
            _ => Err(format!("{text:?} is not off, optional or required")),
        }
    }
}

/// 30 bytes from the operating system's CSPRNG: a master key and salt.
fn fresh_key() -> Option<MasterKey> {
    let mut bytes = [0u8; 30];
    match getrandom::fill(&mut bytes) {
        Ok(()) => Some(MasterKey::from_bytes(&bytes)),
        Err(error) => {
            tracing::error!(%error, "no SRTP key: the operating system's random source failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_offered_only_over_tls_and_required_refuses_the_rest() {
        assert!(matches!(SrtpPolicy::Optional.for_call(Transport::Tls), LocalSrtp::Optional(_)));
        assert!(matches!(SrtpPolicy::Required.for_call(Transport::Tls), LocalSrtp::Required(_)));
        for transport in [Transport::Udp, Transport::Tcp] {
            let LocalSrtp::Off(why) = SrtpPolicy::Optional.for_call(transport) else {
                panic!("no key over {transport:?}")
            };
            assert!(why.contains(transport.as_str()), "{why}");
            let LocalSrtp::Refused(why) = SrtpPolicy::Required.for_call(transport) else { panic!("refused") };
            assert!(why.contains("only over TLS"), "{why}");
        }
        assert!(matches!(SrtpPolicy::Off.for_call(Transport::Tls), LocalSrtp::Off(_)));
    }

    #[test]
    fn each_call_draws_its_own_key() {
        let (LocalSrtp::Optional(a), LocalSrtp::Optional(b)) =
            (SrtpPolicy::Optional.for_call(Transport::Tls), SrtpPolicy::Optional.for_call(Transport::Tls))
        else {
            panic!("keys")
        };
        assert_ne!(a, b);
    }

    #[test]
    fn the_flag_reads_its_three_values_and_nothing_else() {
        for policy in [SrtpPolicy::Off, SrtpPolicy::Optional, SrtpPolicy::Required] {
            assert_eq!(policy.as_str().parse::<SrtpPolicy>(), Ok(policy));
        }
        assert_eq!("Required".parse::<SrtpPolicy>(), Ok(SrtpPolicy::Required));
        assert!("mandatory".parse::<SrtpPolicy>().unwrap_err().contains("off, optional or required"));
    }
}
