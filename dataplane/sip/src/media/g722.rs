//! ITU-T G.722 at 64 kbit/s (mode 1), sans I/O: 16 kHz PCM in, one byte per two samples
//! out, and back. Written from the Recommendation's block diagram (§3 the encoder, §4 the
//! decoder, §6 the QMF coefficients and the quantiser tables), in its 16-bit fixed-point
//! arithmetic, so that it interworks with every other implementation (spandsp, which
//! Debian's baresip uses, and FFmpeg's are checked against it in
//! `tests/tests/g722_interop.rs`).
//!
//! The signal is split by a 24-tap quadrature mirror filter (QMF) into a lower band
//! (0–4 kHz) and a higher band (4–8 kHz), each sampled at 8 kHz. The lower band is coded
//! with 6-bit adaptive differential PCM (ADPCM), the higher with 2 bits; each band has an
//! adaptive predictor (two poles, six zeros) and a logarithmic step size, both updated
//! from the 4-bit (lower) or 2-bit (higher) code only, so that encoder and decoder keep the
//! same state. A code byte is the higher band's two bits over the lower band's six.
//!
//! Per RFC 3551 §4.5.2, G.722 on RTP is payload type 9 with an RTP clock of 8000 although
//! it samples at 16 kHz: 20 ms is 320 samples, 160 bytes and 160 ticks of the clock.

/// Samples a second of G.722's audio.
pub const SAMPLE_RATE: u32 = 16_000;

/// The QMF's coefficients, h0..h11 (h23..h12 are the same, mirrored): Table 11/G.722
/// scaled by 2^13.
const QMF: [i32; 12] = [3, -11, 12, 32, -210, 951, 3876, -805, 362, -156, 53, -11];

/// The lower band's decision levels (Table 6/G.722, times 2^3 of the step size's scale).
const Q6: [i32; 30] = [
    0, 35, 72, 110, 150, 190, 233, 276, 323, 370, 422, 473, 530, 587, 650, 714, 786, 858, 940, 1023, 1121, 1219, 1339,
    1458, 1612, 1765, 1980, 2195, 2557, 2919,
];
/// The 6-bit code of a negative / positive difference in decision interval `i - 1`.
const ILN: [u8; 31] = [
    0, 63, 62, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
];
const ILP: [u8; 31] = [
    0, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34,
    33, 32,
];
/// The 6-bit inverse quantiser's levels (Table 7/G.722), the decoder's output.
const QM6: [i32; 64] = [
    -136, -136, -136, -136, -24808, -21904, -19008, -16704, -14984, -13512, -12280, -11192, -10232, -9360, -8576,
    -7856, -7192, -6576, -6000, -5456, -4944, -4464, -4008, -3576, -3168, -2776, -2400, -2032, -1688, -1360, -1040,
    -728, 24808, 21904, 19008, 16704, 14984, 13512, 12280, 11192, 10232, 9360, 8576, 7856, 7192, 6576, 6000, 5456,
    4944, 4464, 4008, 3576, 3168, 2776, 2400, 2032, 1688, 1360, 1040, 728, 432, 136, -432, -136,
];
/// The 4-bit inverse quantiser's levels (Table 8/G.722): what the predictor adapts on.
const QM4: [i32; 16] =
    [0, -20456, -12896, -8968, -6288, -4240, -2584, -1200, 20456, 12896, 8968, 6288, 4240, 2584, 1200, 0];
/// The 4-bit code's magnitude class, and the lower band's log step size multipliers.
const RL42: [usize; 16] = [0, 7, 6, 5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 0];
const WL: [i32; 8] = [-60, -30, 58, 172, 334, 538, 1198, 3042];
/// 2^(i/32) times 2^11: the step size from its logarithm's fraction (Table 15/G.722).
const ILB: [i32; 32] = [
    2048, 2093, 2139, 2186, 2233, 2282, 2332, 2383, 2435, 2489, 2543, 2599, 2656, 2714, 2774, 2834, 2896, 2960, 3025,
    3091, 3158, 3228, 3298, 3371, 3444, 3520, 3597, 3676, 3756, 3838, 3922, 4008,
];
/// The higher band: its 2-bit inverse quantiser, codes, magnitude classes and multipliers.
const QM2: [i32; 4] = [-7408, -1616, 7408, 1616];
const IHN: [u8; 3] = [0, 1, 0];
const IHP: [u8; 3] = [0, 3, 2];
const RH2: [usize; 4] = [2, 1, 2, 1];
const WH: [i32; 3] = [0, -214, 798];

fn saturate(value: i32) -> i32 {
    value.clamp(i32::from(i16::MIN), i32::from(i16::MAX))
}

/// One band's adaptive state: the log step size (`nb`) and step (`det`), and the
/// pole-zero predictor (Block 4 of the Recommendation).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Band {
    nb: i32,
    det: i32,
    /// The predicted signal, and the zero section's part of it.
    s: i32,
    sz: i32,
    /// The previous reconstructed signal, and the last two partially reconstructed ones.
    r1: i32,
    p1: i32,
    p2: i32,
    /// The pole coefficients a1, a2 and the zero coefficients b1..b6.
    a1: i32,
    a2: i32,
    b: [i32; 6],
    /// The quantised differences, newest first: `d[0]` this sample's, `d[1..7]` the six before.
    d: [i32; 7],
}

impl Band {
    fn new(det: i32) -> Self {
        Self { nb: 0, det, s: 0, sz: 0, r1: 0, p1: 0, p2: 0, a1: 0, a2: 0, b: [0; 6], d: [0; 7] }
    }

    /// LOGSCL/LOGSCH and SCALEL/SCALEH: the new step size from the code's multiplier.
    fn scale(&mut self, multiplier: i32, max_nb: i32, shift: i32) {
        self.nb = (((self.nb * 127) >> 7) + multiplier).clamp(0, max_nb);
        let fraction = ILB[((self.nb >> 6) & 31) as usize];
        let exponent = shift - (self.nb >> 11);
        let step = if exponent < 0 { fraction << -exponent } else { fraction >> exponent };
        self.det = step << 2;
    }

    /// Block 4: the predictor adapted on the quantised difference `dx`.
    fn adapt(&mut self, dx: i32) {
        let r = saturate(self.s + dx); // RECONS
        let p = saturate(self.sz + dx); // PARREC
        let differs = |a: i32, b: i32| (a ^ b) & 0x8000 != 0;
        // UPPOL2: the second pole, limited to ±0.75.
        let f = saturate(self.a1 << 2);
        let wd = if differs(p, self.p1) { f } else { -f }.min(32767);
        let a2 =
            (if differs(p, self.p2) { -128 } else { 128 } + (wd >> 7) + ((self.a2 * 32512) >> 15)).clamp(-12288, 12288);
        // UPPOL1: the first pole, limited to ±(1 - 2^-4 - a2).
        let a1 = if differs(p, self.p1) { -192 } else { 192 } + ((self.a1 * 32640) >> 15);
        let limit = saturate(15360 - a2);
        let a1 = a1.clamp(-limit, limit);
        // FILTEP: the pole section's prediction.
        let sp = saturate(((a1 * saturate(r + r)) >> 15) + ((a2 * saturate(self.r1 + self.r1)) >> 15));
        self.r1 = r;
        self.a1 = a1;
        self.a2 = a2;
        self.p2 = self.p1;
        self.p1 = p;
        // UPZERO, DELAYA, FILTEZ: the zero section adapted and its prediction.
        let step = if dx == 0 { 0 } else { 128 };
        self.d[0] = dx;
        let mut sz = 0;
        for i in (0..6).rev() {
            let sign = if differs(self.d[i + 1], dx) { -step } else { step };
            self.b[i] = saturate(sign + ((self.b[i] * 32640) >> 15));
            sz += (self.b[i] * saturate(self.d[i] + self.d[i])) >> 15;
            self.d[i + 1] = self.d[i];
        }
        self.sz = saturate(sz);
        self.s = saturate(sp + self.sz); // PREDIC
    }

    /// The lower band's adaptation on its 6-bit code (its top four bits), after the
    /// difference was quantised (INVQAL, LOGSCL, SCALEL, Block 4).
    fn adapt_low(&mut self, code: u8) {
        let four = usize::from(code >> 2);
        let dx = (self.det * QM4[four]) >> 15;
        self.scale(WL[RL42[four]], 18432, 8);
        self.adapt(dx);
    }

    /// The higher band's (INVQAH, LOGSCH, SCALEH, Block 4); returns the difference.
    fn adapt_high(&mut self, code: u8) -> i32 {
        let dx = (self.det * QM2[usize::from(code)]) >> 15;
        self.scale(WH[RH2[usize::from(code)]], 22528, 10);
        self.adapt(dx);
        dx
    }
}

/// A G.722 encoder at 64 kbit/s: keeps its state from one frame to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoder {
    /// The QMF's last 24 input samples, oldest first.
    x: [i32; 24],
    low: Band,
    high: Band,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An encoder in the Recommendation's initial state.
    pub fn new() -> Self {
        Self { x: [0; 24], low: Band::new(32), high: Band::new(8) }
    }

    /// Encodes 16 kHz samples, two to a byte, appending to `out`; an odd last sample is
    /// dropped (frames are even: 320 samples in 20 ms).
    pub fn encode(&mut self, samples: &[i16], out: &mut Vec<u8>) {
        out.reserve(samples.len() / 2);
        for pair in samples.chunks_exact(2) {
            out.push(self.encode_pair(i32::from(pair[0]), i32::from(pair[1])));
        }
    }

    fn encode_pair(&mut self, first: i32, second: i32) -> u8 {
        // The transmit QMF: the two bands at half the rate.
        self.x.copy_within(2.., 0);
        self.x[22] = first;
        self.x[23] = second;
        let (mut odd, mut even) = (0, 0);
        for i in 0..12 {
            odd += self.x[2 * i] * QMF[i];
            even += self.x[2 * i + 1] * QMF[11 - i];
        }
        let low = (even + odd) >> 14;
        let high = (even - odd) >> 14;
        // The lower band: SUBTRA, QUANTL, then the adaptation.
        let el = saturate(low - self.low.s);
        let magnitude = if el >= 0 { el } else { -(el + 1) };
        let interval = (1..30).find(|&i| magnitude < (Q6[i] * self.low.det) >> 12).unwrap_or(30);
        let ilow = if el < 0 { ILN[interval] } else { ILP[interval] };
        self.low.adapt_low(ilow);
        // The higher band: SUBTRA, QUANTH, then the adaptation.
        let eh = saturate(high - self.high.s);
        let magnitude = if eh >= 0 { eh } else { -(eh + 1) };
        let large = usize::from(magnitude >= (564 * self.high.det) >> 12) + 1;
        let ihigh = if eh < 0 { IHN[large] } else { IHP[large] };
        self.high.adapt_high(ihigh);
        (ihigh << 6) | ilow
    }
}

/// A G.722 decoder at 64 kbit/s: keeps its state from one frame to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoder {
    /// The receive QMF's last 24 inputs (sum and difference of the bands), oldest first.
    x: [i32; 24],
    low: Band,
    high: Band,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder in the Recommendation's initial state.
    pub fn new() -> Self {
        Self { x: [0; 24], low: Band::new(32), high: Band::new(8) }
    }

    /// Decodes code bytes, two 16 kHz samples each, appending to `out`. Every byte is a
    /// valid code: any input decodes (to noise, if it is not G.722).
    pub fn decode(&mut self, codes: &[u8], out: &mut Vec<i16>) {
        out.reserve(codes.len() * 2);
        for &code in codes {
            let (first, second) = self.decode_byte(code);
            out.push(first);
            out.push(second);
        }
    }

    fn decode_byte(&mut self, code: u8) -> (i16, i16) {
        let ilow = code & 0x3F;
        let ihigh = code >> 6;
        // The lower band: INVQBL and RECONS on all six bits, LIMIT; the predictor on four.
        let rlow = (self.low.s + ((self.low.det * QM6[usize::from(ilow)]) >> 15)).clamp(-16384, 16383);
        self.low.adapt_low(ilow);
        // The higher band: INVQAH, RECONS, LIMIT, and its adaptation.
        let s = self.high.s;
        let rhigh = (s + self.high.adapt_high(ihigh)).clamp(-16384, 16383);
        // The receive QMF: two output samples from the bands.
        self.x.copy_within(2.., 0);
        self.x[22] = rlow + rhigh;
        self.x[23] = rlow - rhigh;
        let (mut first, mut second) = (0, 0);
        for i in 0..12 {
            second += self.x[2 * i] * QMF[i];
            first += self.x[2 * i + 1] * QMF[11 - i];
        }
        (saturate(first >> 11) as i16, saturate(second >> 11) as i16)
    }
}

#[cfg(test)]
mod tests;
