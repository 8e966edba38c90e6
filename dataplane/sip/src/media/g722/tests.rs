use super::*;
use proptest::prelude::*;

/// `n` samples of a tone at `hz` (16 kHz sampling) and amplitude `amplitude`.
fn tone(hz: f64, amplitude: f64, n: usize) -> Vec<i16> {
    (0..n).map(|i| (amplitude * (2.0 * std::f64::consts::PI * hz * i as f64 / 16_000.0).sin()) as i16).collect()
}

fn round_trip(samples: &[i16]) -> Vec<i16> {
    let (mut encoder, mut decoder) = (Encoder::new(), Decoder::new());
    let mut codes = Vec::new();
    let mut out = Vec::new();
    for frame in samples.chunks(320) {
        codes.clear();
        encoder.encode(frame, &mut codes);
        assert_eq!(codes.len(), frame.len() / 2, "a byte per two samples");
        decoder.decode(&codes, &mut out);
    }
    out
}

/// The signal-to-noise ratio of `decoded` against `original`, in dB, at the codec's delay
/// (the two QMFs' 22 samples; the best lag in 0..48 is taken, so a wrong delay shows).
fn snr(original: &[i16], decoded: &[i16]) -> (f64, usize) {
    let skip = 800; // the adaptation's first 50 ms
    (0..48)
        .map(|lag| {
            let (mut signal, mut noise) = (0.0, 0.0);
            for i in skip..original.len() - 48 {
                let (x, y) = (f64::from(original[i]), f64::from(decoded[i + lag]));
                signal += x * x;
                noise += (x - y) * (x - y);
            }
            (10.0 * (signal / noise.max(1.0)).log10(), lag)
        })
        .fold((f64::MIN, 0), |best, next| if next.0 > best.0 { next } else { best })
}

#[test]
fn tones_across_both_bands_come_back_with_the_codecs_quality() {
    // Speech-band tones (lower band) and one in the higher band (4-7 kHz).
    for (hz, floor) in [(440.0, 30.0), (1000.0, 30.0), (3000.0, 25.0), (5500.0, 12.0)] {
        let original = tone(hz, 8000.0, 16_000);
        let (db, lag) = snr(&original, &round_trip(&original));
        assert!(db > floor, "{hz} Hz: {db:.1} dB at lag {lag}");
        if hz == 440.0 {
            // Its period (36.4 samples) is not a divisor of 16000: the best lag is the delay.
            assert_eq!(lag, 22, "the QMF pair delays 22 samples");
        }
    }
}

#[test]
fn loud_and_quiet_signals_both_adapt() {
    for amplitude in [200.0, 2000.0, 30000.0] {
        let original = tone(700.0, amplitude, 16_000);
        let (db, _) = snr(&original, &round_trip(&original));
        assert!(db > 25.0, "amplitude {amplitude}: {db:.1} dB");
    }
}

#[test]
fn silence_stays_silent() {
    let decoded = round_trip(&[0; 3200]);
    assert!(decoded.iter().all(|s| s.abs() <= 4), "{:?}", &decoded[..40]);
}

#[test]
fn state_carries_from_one_frame_to_the_next() {
    // Encoding in frames of 320 and all at once give the same bytes.
    let original = tone(1200.0, 6000.0, 3200);
    let mut whole = Vec::new();
    Encoder::new().encode(&original, &mut whole);
    let mut framed = Vec::new();
    let mut encoder = Encoder::new();
    for frame in original.chunks(320) {
        encoder.encode(frame, &mut framed);
    }
    assert_eq!(whole, framed);
}

#[test]
fn the_step_size_table_is_two_to_the_i_over_32() {
    for (i, value) in ILB.iter().enumerate() {
        let exact = 2048.0 * 2f64.powf(i as f64 / 32.0);
        assert!((f64::from(*value) - exact).abs() <= 1.0, "ILB[{i}] = {value}, 2^(i/32) * 2048 = {exact:.1}");
    }
}

#[test]
fn the_six_bit_levels_lie_inside_their_decision_intervals() {
    // QM6 holds eight times a level between Q6's decision levels, for the code each
    // interval encodes to.
    for i in 1..30 {
        let (low, high) = (Q6[i - 1] * 8, Q6[i] * 8);
        let (positive, negative) = (QM6[usize::from(ILP[i])], QM6[usize::from(ILN[i])]);
        assert!(positive >= low && positive <= high, "interval {i}: {positive} not in {low}..{high}");
        assert_eq!(negative, -positive, "interval {i}");
    }
}

proptest! {
    /// Any bytes decode (G.722 has no invalid code), to bounded samples, two per byte.
    #[test]
    fn any_bytes_decode(codes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut out = Vec::new();
        Decoder::new().decode(&codes, &mut out);
        prop_assert_eq!(out.len(), codes.len() * 2);
    }

    /// Any samples encode, even full-scale noise, and decode back to something near.
    #[test]
    fn any_samples_encode(samples in proptest::collection::vec(any::<i16>(), 0..640)) {
        let mut codes = Vec::new();
        Encoder::new().encode(&samples, &mut codes);
        prop_assert_eq!(codes.len(), samples.len() / 2);
    }
}
