//! ITU-T G.711 μ-law and A-law, by table: the edge passes G.711 through to the gateway as
//! it is, and decodes only to conceal a lost frame (fading the last one) or to mix; the
//! tables make that a lookup per sample. Decoding is a 256-entry table per law; encoding
//! a table indexed by the top 14 (μ-law) or 13 (A-law) bits of the 16-bit sample. All
//! tables are computed at compile time from the Recommendation's segment rules (the same
//! rules as the reference `g711.c` and as `switchboard-core`'s `audio::g711`).

/// μ-law's code for silence (+0).
pub const ULAW_SILENCE: u8 = 0xFF;
/// A-law's code for silence (the smallest positive step).
pub const ALAW_SILENCE: u8 = 0xD5;

const ULAW_BIAS: i32 = 0x84;
const ULAW_CLIP: i32 = 8159;

const fn ulaw_encode_14(value14: i32) -> u8 {
    let (mut value, mask) = if value14 < 0 { (-value14, 0x7Fu8) } else { (value14, 0xFFu8) };
    if value > ULAW_CLIP {
        value = ULAW_CLIP;
    }
    value += ULAW_BIAS >> 2;
    let mut seg = 0;
    while seg < 8 && value > (0x40 << seg) - 1 {
        seg += 1;
    }
    if seg >= 8 {
        return 0x7F ^ mask;
    }
    let code = (seg << 4) | ((value >> (seg + 1)) & 0x0F);
    (code as u8) ^ mask
}

const fn ulaw_decode(code: u8) -> i16 {
    let code = !code;
    let mut t = (((code & 0x0F) as i32) << 3) + ULAW_BIAS;
    t <<= (code & 0x70) >> 4;
    (if code & 0x80 != 0 { ULAW_BIAS - t } else { t - ULAW_BIAS }) as i16
}

const fn alaw_encode_13(value13: i32) -> u8 {
    let (value, mask) = if value13 >= 0 { (value13, 0xD5u8) } else { (-value13 - 1, 0x55u8) };
    let mut seg = 0;
    while seg < 8 && value > (0x20 << seg) - 1 {
        seg += 1;
    }
    if seg >= 8 {
        return 0x7F ^ mask;
    }
    let shift = if seg < 2 { 1 } else { seg };
    let code = (seg << 4) | ((value >> shift) & 0x0F);
    (code as u8) ^ mask
}

const fn alaw_decode(code: u8) -> i16 {
    let code = code ^ 0x55;
    let mut t = ((code & 0x0F) as i32) << 4;
    let seg = ((code & 0x70) >> 4) as i32;
    match seg {
        0 => t += 8,
        1 => t += 0x108,
        _ => {
            t += 0x108;
            t <<= seg - 1;
        }
    }
    (if code & 0x80 != 0 { t } else { -t }) as i16
}

static ULAW_TO_LINEAR: [i16; 256] = {
    let mut table = [0i16; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = ulaw_decode(i as u8);
        i += 1;
    }
    table
};

static ALAW_TO_LINEAR: [i16; 256] = {
    let mut table = [0i16; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = alaw_decode(i as u8);
        i += 1;
    }
    table
};

/// Indexed by the sample's top 14 bits as unsigned (`(sample >> 2) + 8192`).
static LINEAR_TO_ULAW: [u8; 16384] = {
    let mut table = [0u8; 16384];
    let mut i = 0;
    while i < 16384 {
        table[i] = ulaw_encode_14(i as i32 - 8192);
        i += 1;
    }
    table
};

/// Indexed by the sample's top 13 bits as unsigned (`(sample >> 3) + 4096`).
static LINEAR_TO_ALAW: [u8; 8192] = {
    let mut table = [0u8; 8192];
    let mut i = 0;
    while i < 8192 {
        table[i] = alaw_encode_13(i as i32 - 4096);
        i += 1;
    }
    table
};

/// The 16-bit sample of a μ-law code.
pub fn ulaw_to_linear(code: u8) -> i16 {
    ULAW_TO_LINEAR[usize::from(code)]
}

/// The μ-law code of a 16-bit sample.
pub fn linear_to_ulaw(sample: i16) -> u8 {
    LINEAR_TO_ULAW[((i32::from(sample) >> 2) + 8192) as usize]
}

/// The 16-bit sample of an A-law code.
pub fn alaw_to_linear(code: u8) -> i16 {
    ALAW_TO_LINEAR[usize::from(code)]
}

/// The A-law code of a 16-bit sample.
pub fn linear_to_alaw(sample: i16) -> u8 {
    LINEAR_TO_ALAW[((i32::from(sample) >> 3) + 4096) as usize]
}

/// A G.711 law.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Law {
    /// μ-law (PCMU).
    Ulaw,
    /// A-law (PCMA).
    Alaw,
}

impl Law {
    /// Decodes one code.
    pub fn decode(self, code: u8) -> i16 {
        match self {
            Self::Ulaw => ulaw_to_linear(code),
            Self::Alaw => alaw_to_linear(code),
        }
    }

    /// Encodes one sample.
    pub fn encode(self, sample: i16) -> u8 {
        match self {
            Self::Ulaw => linear_to_ulaw(sample),
            Self::Alaw => linear_to_alaw(sample),
        }
    }

    /// The code of silence.
    pub fn silence(self) -> u8 {
        match self {
            Self::Ulaw => ULAW_SILENCE,
            Self::Alaw => ALAW_SILENCE,
        }
    }

    /// Scales coded audio in place by `gain` (0.0 to 1.0): decode, scale, encode.
    pub fn scale(self, codes: &mut [u8], gain: f32) {
        for code in codes {
            let sample = f32::from(self.decode(*code)) * gain;
            *code = self.encode(sample as i16);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reference_values() {
        assert_eq!((ulaw_to_linear(0x00), ulaw_to_linear(0x80), ulaw_to_linear(0xFF)), (-32124, 32124, 0));
        assert_eq!((alaw_to_linear(0xD5), alaw_to_linear(0x55)), (8, -8));
        assert_eq!((alaw_to_linear(0xAA), alaw_to_linear(0x2A)), (32256, -32256));
        assert_eq!((linear_to_ulaw(0), linear_to_alaw(0)), (ULAW_SILENCE, ALAW_SILENCE));
        assert_eq!((linear_to_ulaw(i16::MAX), linear_to_ulaw(i16::MIN)), (0x80, 0x00));
        assert_eq!((linear_to_alaw(i16::MAX), linear_to_alaw(i16::MIN)), (0xAA, 0x2A));
    }

    #[test]
    fn every_code_survives_decode_then_encode() {
        for code in 0..=255u8 {
            let expected = if code == 0x7F { 0xFF } else { code }; // μ-law's -0 encodes as +0
            assert_eq!(linear_to_ulaw(ulaw_to_linear(code)), expected, "μ-law {code:#04x}");
            assert_eq!(linear_to_alaw(alaw_to_linear(code)), code, "A-law {code:#04x}");
        }
    }

    #[test]
    fn scaling_fades_towards_silence() {
        let mut codes = [linear_to_ulaw(16000); 4];
        Law::Ulaw.scale(&mut codes, 0.5);
        assert!((i32::from(ulaw_to_linear(codes[0])) - 8000).abs() < 300);
        Law::Alaw.scale(&mut codes, 0.0);
        assert!(alaw_to_linear(codes[0]).abs() <= 8);
    }

    proptest! {
        /// The quantisation error stays within half a step of the sample's segment: about
        /// 1/32 of the magnitude, plus the smallest step near zero.
        #[test]
        fn round_trip_error_is_bounded(sample: i16) {
            let x = i32::from(sample);
            let u = i32::from(ulaw_to_linear(linear_to_ulaw(sample)));
            let a = i32::from(alaw_to_linear(linear_to_alaw(sample)));
            prop_assert!((x - u).abs() <= x.abs() / 16 + 16 || x.abs() > 32124 - 1024, "μ-law {} -> {}", x, u);
            prop_assert!((x - a).abs() <= x.abs() / 16 + 16 || x.abs() > 32256 - 1024, "A-law {} -> {}", x, a);
            prop_assert_eq!(u.signum() * x.signum() >= 0, true);
        }

        #[test]
        fn encoding_is_monotonic(a: i16, b: i16) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(ulaw_to_linear(linear_to_ulaw(lo)) <= ulaw_to_linear(linear_to_ulaw(hi)));
            prop_assert!(alaw_to_linear(linear_to_alaw(lo)) <= alaw_to_linear(linear_to_alaw(hi)));
        }
    }
}
