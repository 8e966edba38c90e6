//! Opus's SDP (RFC 7587 §6): the `a=fmtp` parameters a side gives for its Opus payload
//! type, which describe what that side's *decoder* takes, so the other side's encoder
//! follows them ([`OpusParams`], read from the phone's description), and the parameters the
//! edge writes for its own decoder ([`LOCAL_FMTP`]).
//!
//! What the edge does with the phone's parameters: `useinbandfec=1` turns its encoder's
//! in-band FEC on (off otherwise: the phone's decoder would not use it); `maxplaybackrate`
//! caps the encoder's bandwidth (8000: narrowband); `maxaveragebitrate` caps its bitrate;
//! `cbr=1` makes it constant; `stereo` is read but the edge sends mono, which every Opus
//! decoder takes (RFC 7587 §6.1). `usedtx` is a preference the edge does not take: it sends
//! a packet every 20 ms, silence included, to keep NAT bindings and media gateways' timers
//! alive, as it does for G.711. `ptime`, `maxptime` and `minptime` are SDP attributes, not
//! fmtp: the edge sends 20 ms packets and asks for them (`a=ptime:20`), and decodes any
//! packet length the phone sends (2.5 to 120 ms). Parameters it does not know, or whose
//! value does not read, are ignored, as RFC 7587 §6.1 tells a receiver to.

use super::Media;

/// What the edge's own decoder takes, written in its offers and answers: mono (`stereo=0`)
/// at up to 16 kHz (`maxplaybackrate=16000`: the gateway's session takes 16 kHz PCM16, so
/// wider audio would be spent bits), in-band FEC used (`useinbandfec=1`); and what it sends:
/// mono, captured at 16 kHz.
pub const LOCAL_FMTP: &str = "maxplaybackrate=16000;sprop-maxcapturerate=16000;stereo=0;sprop-stereo=0;useinbandfec=1";

/// The Opus parameters of one side's payload type (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct OpusParams {
    /// `maxplaybackrate`: the highest rate the side plays, in Hz.
    pub max_playback_rate: Option<u32>,
    /// `maxaveragebitrate`: the highest average bitrate it takes, in bits a second.
    pub max_average_bitrate: Option<u32>,
    /// `stereo=1`: it prefers stereo.
    pub stereo: bool,
    /// `cbr=1`: it wants constant bitrate.
    pub cbr: bool,
    /// `useinbandfec=1`: its decoder uses in-band FEC.
    pub use_inband_fec: bool,
    /// `usedtx=1`: it prefers discontinuous transmission.
    pub use_dtx: bool,
}

impl OpusParams {
    /// Reads an fmtp's parameters (`maxplaybackrate=16000;useinbandfec=1`), leniently.
    pub fn parse(fmtp: &str) -> Self {
        let mut params = Self::default();
        for pair in fmtp.split(';') {
            let Some((name, value)) = pair.split_once('=') else { continue };
            let value = value.trim();
            let flag = value == "1";
            match name.trim().to_ascii_lowercase().as_str() {
                "maxplaybackrate" => params.max_playback_rate = value.parse().ok().filter(|r| *r > 0),
                "maxaveragebitrate" => params.max_average_bitrate = value.parse().ok().filter(|r| *r > 0),
                "stereo" => params.stereo = flag,
                "cbr" => params.cbr = flag,
                "useinbandfec" => params.use_inband_fec = flag,
                "usedtx" => params.use_dtx = flag,
                _ => {}
            }
        }
        params
    }

    /// The parameters of `payload_type` in `media` (the defaults when it has no fmtp).
    pub fn of(media: &Media, payload_type: u8) -> Self {
        media.fmtps.iter().find(|(pt, _)| *pt == payload_type).map(|(_, fmtp)| Self::parse(fmtp)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phones_parameters_read_and_what_does_not_read_is_ignored() {
        let params = OpusParams::parse("maxplaybackrate=8000; stereo=0;sprop-stereo=1;useinbandfec=1;usedtx=1;cbr=1");
        assert_eq!(
            params,
            OpusParams {
                max_playback_rate: Some(8000),
                max_average_bitrate: None,
                stereo: false,
                cbr: true,
                use_inband_fec: true,
                use_dtx: true
            }
        );
        let odd =
            OpusParams::parse("maxplaybackrate=fast;maxaveragebitrate=0;useinbandfec;;=1;MAXAVERAGEBITRATE=20000");
        assert_eq!(odd, OpusParams { max_average_bitrate: Some(20_000), ..OpusParams::default() });
        assert_eq!(OpusParams::parse(""), OpusParams::default());
        assert_eq!(OpusParams::parse(LOCAL_FMTP).max_playback_rate, Some(16_000));
        assert!(OpusParams::parse(LOCAL_FMTP).use_inband_fec);
    }
}
