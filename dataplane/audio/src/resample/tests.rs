use super::*;

fn sine(frequency: f64, rate: u32, seconds: f64, amplitude: f64) -> Vec<i16> {
    let count = (f64::from(rate) * seconds) as usize;
    (0..count)
        .map(|n| (amplitude * (2.0 * std::f64::consts::PI * frequency * n as f64 / f64::from(rate)).sin()) as i16)
        .collect()
}

/// The amplitude of the `frequency` component of `samples` (a single DFT bin over a
/// whole number of its periods, after the filter's start-up).
fn amplitude(samples: &[i16], rate: u32, frequency: f64) -> f64 {
    let skip = rate as usize / 20;
    let period = f64::from(rate) / frequency;
    let periods = ((samples.len() - 2 * skip) as f64 / period).floor();
    let count = (periods * period).round() as usize;
    let (mut re, mut im) = (0.0, 0.0);
    for (n, &s) in samples[skip..skip + count].iter().enumerate() {
        let phase = 2.0 * std::f64::consts::PI * frequency * n as f64 / f64::from(rate);
        re += f64::from(s) * phase.cos();
        im += f64::from(s) * phase.sin();
    }
    2.0 * (re * re + im * im).sqrt() / count as f64
}

fn convert(from: u32, to: u32, input: &[i16]) -> Vec<i16> {
    let mut resampler = Resampler::new(from, to).expect("a supported ratio");
    let mut out = Vec::new();
    resampler.process(input, &mut out);
    out
}

const RATES: [(u32, u32); 6] =
    [(8000, 16000), (16000, 8000), (16000, 24000), (24000, 16000), (8000, 24000), (24000, 8000)];

#[test]
fn speech_frequencies_pass_at_unit_gain() {
    for (from, to) in RATES {
        for frequency in [300.0, 1000.0, 3000.0] {
            let input = sine(frequency, from, 0.5, 10_000.0);
            let out = convert(from, to, &input);
            let expected = input.len() * to as usize / from as usize;
            assert!(out.len().abs_diff(expected) <= 1, "{from}->{to}: {} samples, expected {expected}", out.len());
            let gain = amplitude(&out, to, frequency) / 10_000.0;
            let db = 20.0 * gain.log10();
            assert!(db.abs() < 0.1, "{from}->{to} at {frequency} Hz: {db:.3} dB");
        }
    }
}

#[test]
fn frequencies_above_the_new_nyquist_do_not_fold_back() {
    // (from, to, input tone, where it would alias to)
    for (from, to, tone, alias) in
        [(24000, 8000, 6000.0, 2000.0), (16000, 8000, 5000.0, 3000.0), (24000, 16000, 10_000.0, 6000.0)]
    {
        let out = convert(from, to, &sine(tone, from, 0.5, 20_000.0));
        let rejection = 20.0 * (amplitude(&out, to, alias) / 20_000.0).log10();
        assert!(rejection < -70.0, "{from}->{to}: a {tone} Hz tone folds to {alias} Hz at {rejection:.1} dB");
    }
}

#[test]
fn upsampling_leaves_no_images() {
    // 1 kHz has images at the input rate ± 1 kHz once zeros are stuffed between samples
    // (16 -> 24 kHz: 15 and 17 kHz at 48 kHz, folding to 9 and 7 kHz).
    for (from, to, image) in [(8000, 16000, 7000.0), (8000, 24000, 9000.0), (16000, 24000, 7000.0)] {
        let out = convert(from, to, &sine(1000.0, from, 0.5, 20_000.0));
        let level = 20.0 * (amplitude(&out, to, image) / 20_000.0).log10();
        assert!(level < -70.0, "{from}->{to}: image at {image} Hz at {level:.1} dB");
    }
}

#[test]
fn frame_by_frame_is_the_same_as_all_at_once() {
    for (from, to) in RATES {
        let input = sine(440.0, from, 0.3, 12_000.0);
        let whole = convert(from, to, &input);
        let mut resampler = Resampler::new(from, to).expect("supported");
        let mut framed = Vec::new();
        for frame in input.chunks(from as usize / 50 + 3) {
            resampler.process(frame, &mut framed);
        }
        assert_eq!(framed, whole, "{from}->{to}");
    }
}

#[test]
fn the_same_rate_passes_unchanged_and_odd_ratios_are_refused() {
    let mut same = Resampler::new(16000, 16000).expect("identity");
    let mut out = Vec::new();
    same.process(&[1, -2, 3], &mut out);
    assert_eq!(out, vec![1, -2, 3]);
    assert!(Resampler::new(44100, 16000).is_none());
    assert!(Resampler::new(0, 16000).is_none());
    // Full-scale input does not wrap around.
    let loud = convert(8000, 16000, &[i16::MAX, i16::MIN].repeat(100));
    assert!(loud.len() == 400);
}

// The vectorised path against a straightforward reference: the same prototype filter in
// `f64`, applied in direct form to the zero-stuffed input, `y[m] = Σ_j h[j] · u[m·down − j]`
// (`u[i] = x[i / up]` where `up` divides `i`, else 0), one output at a time.

/// By output: the reference's value before rounding and `Σ_j |h[j] · u[m·down − j]|`.
fn reference(from: u32, to: u32, input: &[i16]) -> Vec<(f64, f64)> {
    let divisor = gcd(from, to);
    let (up, down) = ((to / divisor) as usize, (from / divisor) as usize);
    let filter = prototype(up, down);
    let stuffed = |i: isize| match usize::try_from(i) {
        Ok(i) if i % up == 0 && i / up < input.len() => f64::from(input[i / up]),
        _ => 0.0,
    };
    (0..(input.len() * up).div_ceil(down))
        .map(|m| {
            let terms = filter.iter().enumerate().map(|(j, h)| h * stuffed((m * down) as isize - j as isize));
            terms.fold((0.0, 0.0), |(sum, magnitude), term| (sum + term, magnitude + term.abs()))
        })
        .collect()
}

/// The resampler's outputs before rounding.
fn unrounded(from: u32, to: u32, input: &[i16]) -> Vec<f32> {
    let mut resampler = Resampler::new(from, to).expect("a supported ratio");
    let mut out = Vec::new();
    resampler.convert_each(input, |value| out.push(value));
    out
}

/// A bound on the `f32` path's error against the exact sum: each product's rounding and its
/// coefficient's, `taps / LANES` additions in a lane and `log2(LANES)` to combine the lanes,
/// each at most one unit roundoff (2^-24) of the magnitudes summed (Higham's γ_n bound).
fn error_bound(from: u32, to: u32, magnitude: f64) -> f64 {
    let taps = Resampler::new(from, to).expect("supported").taps;
    let steps = (taps / LANES + LANES.ilog2() as usize + 2) as f64;
    let unit = f64::from(f32::EPSILON) / 2.0;
    1.01 * steps * unit * magnitude
}

fn matches_reference(from: u32, to: u32, input: &[i16]) -> Result<(), String> {
    let expected = reference(from, to, input);
    let values = unrounded(from, to, input);
    let samples = convert(from, to, input);
    if values.len() != expected.len() || samples.len() != expected.len() {
        return Err(format!(
            "{from}->{to}: {} / {} outputs, the reference {}",
            values.len(),
            samples.len(),
            expected.len()
        ));
    }
    for (m, ((&(exact, magnitude), &value), &sample)) in expected.iter().zip(&values).zip(&samples).enumerate() {
        let (error, bound) = ((f64::from(value) - exact).abs(), error_bound(from, to, magnitude));
        if error > bound {
            return Err(format!(
                "{from}->{to} output {m}: {value} against {exact} (off {error:.2e}, bound {bound:.2e})"
            ));
        }
        // Rounded, the two may straddle a half: at most one step apart, and only there.
        let rounded = exact.round().clamp(f64::from(i16::MIN), f64::from(i16::MAX));
        let straddles = (exact.abs().fract() - 0.5).abs() <= bound;
        if f64::from(sample) != rounded && !(straddles && (f64::from(sample) - rounded).abs() == 1.0) {
            return Err(format!("{from}->{to} output {m}: {sample}, the reference rounds {exact} to {rounded}"));
        }
    }
    Ok(())
}

#[test]
fn full_scale_and_clipping_input_matches_the_reference() {
    // Alternating full scale overshoots the filter's output past i16 (it clamps); a sweep
    // and silence around it exercise every phase.
    let mut input: Vec<i16> = [i16::MAX, i16::MIN].repeat(200);
    input.extend(sine(3000.0, 8000, 0.05, 32_000.0));
    input.extend(std::iter::repeat_n(0, 100));
    for (from, to) in RATES {
        matches_reference(from, to, &input).unwrap();
    }
}

#[test]
fn rounding_is_half_away_from_zero_and_saturates() {
    for (value, expected) in [
        (0.0, 0),
        (0.49999997, 0),
        (0.5, 1),
        (-0.5, -1),
        (2.5, 3),
        (-2.4999998, -2),
        (32_766.5, 32_767),
        (32_767.49, 32_767),
        (32_767.5, 32_767),
        (-32_768.5, -32_768),
        (1e9, i16::MAX),
        (-1e9, i16::MIN),
    ] {
        assert_eq!(to_sample(value), expected, "{value}");
        assert_eq!(value.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16, expected, "{value}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    #[test]
    fn random_input_matches_the_reference(input in proptest::collection::vec(proptest::prelude::any::<i16>(), 0..1200)) {
        for (from, to) in RATES {
            proptest::prop_assert!(matches_reference(from, to, &input).is_ok(), "{}", matches_reference(from, to, &input).unwrap_err());
        }
    }

    #[test]
    fn any_chunking_gives_the_same_output(
        input in proptest::collection::vec(proptest::prelude::any::<i16>(), 0..1500),
        sizes in proptest::collection::vec(0usize..400, 1..24),
    ) {
        for (from, to) in RATES {
            let whole = convert(from, to, &input);
            let mut resampler = Resampler::new(from, to).expect("supported");
            let (mut chunked, mut rest) = (Vec::new(), input.as_slice());
            // Chunks of the sizes in turn (empty ones too), for three rounds; the rest at once.
            for &size in sizes.iter().cycle().take(3 * sizes.len()) {
                let (chunk, after) = rest.split_at(size.min(rest.len()));
                resampler.process(chunk, &mut chunked);
                rest = after;
            }
            resampler.process(rest, &mut chunked);
            proptest::prop_assert_eq!(&chunked, &whole, "{}->{}", from, to);
        }
    }
}
