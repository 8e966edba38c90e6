//! ITU-T G.711 companding: μ-law (North America, Japan) and A-law (elsewhere), the 8-bit
//! codes of telephony audio at 8 kHz, to and from 16-bit linear PCM.
//!
//! The segment tables are those of the Recommendation (and of the widely used reference
//! implementation `g711.c`): μ-law works on 14-bit magnitudes with a bias of 33, A-law on
//! 13-bit magnitudes; decoded values are left-aligned in 16 bits (a μ-law code decodes to
//! at most ±32124, an A-law code to at most ±32256). Every code is inverted on the wire as
//! the Recommendation says (μ-law: all bits; A-law: the even bits, `0x55`).

/// μ-law segment end points (14-bit magnitude plus the bias).
const ULAW_SEGMENT_END: [i32; 8] = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF];
/// A-law segment end points (13-bit magnitude).
const ALAW_SEGMENT_END: [i32; 8] = [0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF];
/// Largest μ-law magnitude (14 bits) before the bias.
const ULAW_CLIP: i32 = 8159;
/// The μ-law bias (16-bit scale).
const ULAW_BIAS: i32 = 0x84;

fn segment(value: i32, ends: &[i32; 8]) -> usize {
    ends.iter().position(|&end| value <= end).unwrap_or(8)
}

/// The μ-law code of a 16-bit linear sample.
pub fn linear_to_ulaw(sample: i16) -> u8 {
    let mut value = i32::from(sample) >> 2;
    let mask: u8 = if value < 0 {
        value = -value;
        0x7F
    } else {
        0xFF
    };
    value = value.min(ULAW_CLIP) + (ULAW_BIAS >> 2);
    let seg = segment(value, &ULAW_SEGMENT_END);
    if seg >= 8 {
        return 0x7F ^ mask;
    }
    // seg < 8 and the mantissa is 4 bits: the code fits in 7 bits.
    let code = ((seg as i32) << 4) | ((value >> (seg + 1)) & 0x0F);
    (code as u8) ^ mask
}

/// The 16-bit linear value of a μ-law code.
pub fn ulaw_to_linear(code: u8) -> i16 {
    let code = !code;
    let mut t = (i32::from(code & 0x0F) << 3) + ULAW_BIAS;
    t <<= (code & 0x70) >> 4;
    let value = if code & 0x80 != 0 { ULAW_BIAS - t } else { t - ULAW_BIAS };
    // At most 32124 in magnitude.
    value as i16
}

/// The A-law code of a 16-bit linear sample.
pub fn linear_to_alaw(sample: i16) -> u8 {
    let mut value = i32::from(sample) >> 3;
    let mask: u8 = if value >= 0 {
        0xD5
    } else {
        value = -value - 1;
        0x55
    };
    let seg = segment(value, &ALAW_SEGMENT_END);
    if seg >= 8 {
        return 0x7F ^ mask;
    }
    let mantissa = if seg < 2 { (value >> 1) & 0x0F } else { (value >> seg) & 0x0F };
    (((seg as i32) << 4 | mantissa) as u8) ^ mask
}

/// The 16-bit linear value of an A-law code.
pub fn alaw_to_linear(code: u8) -> i16 {
    let code = code ^ 0x55;
    let mut t = i32::from(code & 0x0F) << 4;
    match (code & 0x70) >> 4 {
        0 => t += 8,
        1 => t += 0x108,
        seg => {
            t += 0x108;
            t <<= seg - 1;
        }
    }
    // At most 32256 in magnitude.
    (if code & 0x80 != 0 { t } else { -t }) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values of ITU-T G.711 (Tables 1 and 2, decoder outputs scaled to 16
    /// bits as the reference implementation writes them).
    #[test]
    fn ulaw_matches_the_recommendation() {
        // Zero is 0xFF (all ones on the wire); the positive and negative extremes.
        assert_eq!(linear_to_ulaw(0), 0xFF);
        assert_eq!(ulaw_to_linear(0xFF), 0);
        assert_eq!(ulaw_to_linear(0x7F), 0, "negative zero");
        assert_eq!(ulaw_to_linear(0x80), 32124);
        assert_eq!(ulaw_to_linear(0x00), -32124);
        assert_eq!(linear_to_ulaw(i16::MAX), 0x80);
        assert_eq!(linear_to_ulaw(i16::MIN), 0x00);
        // Segment 0 steps by 8 (2 in 14 bits); segment 7 by 1024.
        assert_eq!(ulaw_to_linear(0xFE), 8);
        assert_eq!(ulaw_to_linear(0xFD), 16);
        assert_eq!(ulaw_to_linear(0x7E), -8);
        assert_eq!(ulaw_to_linear(0x81), 31100);
        // The first step of each segment (codes 0xEF, 0xDF, ... decode to the segment ends).
        let firsts: Vec<i16> = (0..8u8).map(|seg| ulaw_to_linear(!(seg << 4))).collect();
        assert_eq!(firsts, vec![0, 132, 396, 924, 1980, 4092, 8316, 16764]);
        assert_eq!(linear_to_ulaw(1000), 0xCE);
        assert_eq!(linear_to_ulaw(-1000), 0x4E);
    }

    #[test]
    fn alaw_matches_the_recommendation() {
        assert_eq!(linear_to_alaw(0), 0xD5);
        assert_eq!(alaw_to_linear(0xD5), 8);
        assert_eq!(alaw_to_linear(0x55), -8);
        assert_eq!(alaw_to_linear(0xAA), 32256);
        assert_eq!(alaw_to_linear(0x2A), -32256);
        assert_eq!(linear_to_alaw(i16::MAX), 0xAA);
        assert_eq!(linear_to_alaw(i16::MIN), 0x2A);
        assert_eq!(linear_to_alaw(-1), 0x55, "A-law has no negative zero: -1 is the smallest negative step");
        // Segments 0 and 1 step by 16; segment 7 by 1024.
        assert_eq!(alaw_to_linear(0xD4), 24);
        assert_eq!(alaw_to_linear(0xAB), 31232);
        let firsts: Vec<i16> = (0..8u8).map(|seg| alaw_to_linear((seg << 4) ^ 0xD5)).collect();
        assert_eq!(firsts, vec![8, 264, 528, 1056, 2112, 4224, 8448, 16896]);
        assert_eq!(linear_to_alaw(1000), 0xFA);
        assert_eq!(linear_to_alaw(-1000), 0x7A);
    }

    #[test]
    fn every_code_survives_a_round_trip_and_decoding_is_monotonic() {
        for code in 0..=255u8 {
            let again = linear_to_ulaw(ulaw_to_linear(code));
            assert!(again == code || (code == 0x7F && again == 0xFF), "μ-law {code:#04x} -> {again:#04x}");
            assert_eq!(linear_to_alaw(alaw_to_linear(code)), code, "A-law {code:#04x}");
        }
        // Positive codes in order of magnitude decode to increasing values.
        let ulaw: Vec<i16> = (0..128u8).map(|m| ulaw_to_linear(0xFF - m)).collect();
        assert!(ulaw.windows(2).all(|w| w[0] < w[1]));
        let alaw: Vec<i16> = (0..128u8).map(|m| alaw_to_linear(m ^ 0xD5)).collect();
        assert!(alaw.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_error_of_every_sample_is_within_half_its_segment_step() {
        for sample in i16::MIN..=i16::MAX {
            let x = i32::from(sample);
            // Half a step of the sample's segment is about 1/32 of its value (16 near zero).
            let tolerance = (x.abs() / 16).max(16);
            let u = i32::from(ulaw_to_linear(linear_to_ulaw(sample)));
            assert!((u - x).abs() <= tolerance, "μ-law {x} -> {u}");
            let a = i32::from(alaw_to_linear(linear_to_alaw(sample)));
            assert!((a - x).abs() <= tolerance, "A-law {x} -> {a}");
        }
    }
}
