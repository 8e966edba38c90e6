use super::*;

fn wanted(encoding: &str, rate: Option<u32>) -> AudioFormat {
    AudioFormat { encoding: encoding.into(), sample_rate: rate }
}

#[test]
fn telephony_and_pcm_rates_are_offered_and_others_refused_with_what_to_use() {
    let mulaw = resolve(&wanted("mulaw", None), Direction::Input).expect("μ-law");
    assert_eq!(mulaw, Format { encoding: Encoding::Mulaw, rate: 8000 });
    assert_eq!(resolve(&wanted("G711_ALAW", Some(8000)), Direction::Output).map(|f| f.encoding), Ok(Encoding::Alaw));
    for rate in [8000, 16_000, 24_000] {
        assert_eq!(resolve(&wanted("pcm16", Some(rate)), Direction::Input).map(|f| f.rate), Ok(rate));
    }
    assert_eq!(resolve(&wanted("pcm16", None), Direction::Output).map(|f| f.rate), Ok(24_000));
    let opus = resolve(&wanted("opus", None), Direction::Input).expect_err("unknown").to_string();
    assert!(
        opus.contains("\"opus\"") && opus.contains("pcm16, mulaw or alaw") && opus.contains("PCM16 16 kHz"),
        "{opus}"
    );
    let wide = resolve(&wanted("mulaw", Some(16_000)), Direction::Output).expect_err("rate").to_string();
    assert!(wide.contains("8000 Hz only") && wide.contains("output stays PCM16 24 kHz"), "{wide}");
    let cd = resolve(&wanted("pcm16", Some(44_100)), Direction::Input).expect_err("rate").to_string();
    assert!(cd.contains("8000, 16000 and 24000"), "{cd}");
}

#[test]
fn negotiation_keeps_what_it_can_and_reports_the_rest() {
    assert_eq!(negotiate(None), (Negotiated::default(), vec![]));
    let settings =
        AudioSettings { input: Some(wanted("ulaw", None)), output: Some(wanted("flac", None)), binary_output: true };
    let (negotiated, errors) = negotiate(Some(&settings));
    assert_eq!(negotiated.input, Format { encoding: Encoding::Mulaw, rate: 8000 });
    assert_eq!(negotiated.output, Format::MODEL_OUTPUT, "the unsupported output falls back");
    assert!(negotiated.binary_output);
    assert!(matches!(&errors[..], [FormatError::UnknownEncoding { direction: "output", .. }]));
    let json = r#"{"input":{"encoding":"alaw"},"output":{"sample_rate":16000},"binary_output":true}"#;
    let parsed: AudioSettings = serde_json::from_str(json).expect("parses");
    let (negotiated, errors) = negotiate(Some(&parsed));
    assert!(errors.is_empty());
    assert_eq!(negotiated.output, Format { encoding: Encoding::Pcm16, rate: 16_000 }, "pcm16 is the default encoding");
}

/// A tone through the telephone line and back: the caller's 8 kHz μ-law becomes the
/// model's 16 kHz PCM16 with its pitch and level, and the model's 24 kHz reply becomes
/// 8 kHz A-law that decodes to the same tone.
#[test]
fn a_tone_keeps_its_pitch_and_level_through_decoder_and_encoder() {
    let tone = |rate: u32, seconds: f64| -> Vec<i16> {
        (0..(f64::from(rate) * seconds) as usize)
            .map(|n| (8000.0 * (2.0 * std::f64::consts::PI * 700.0 * n as f64 / f64::from(rate)).sin()) as i16)
            .collect()
    };
    // Zero crossings with hysteresis (companding noise near zero does not count).
    let crossings = |samples: &[i16]| {
        let (mut count, mut positive) = (0usize, None);
        for &s in samples {
            let now = if s > 500 {
                Some(true)
            } else if s < -500 {
                Some(false)
            } else {
                positive
            };
            if positive.is_some() && now != positive {
                count += 1;
            }
            positive = now;
        }
        count
    };
    let rms = |samples: &[i16]| {
        (samples.iter().map(|&s| f64::from(s) * f64::from(s)).sum::<f64>() / samples.len() as f64).sqrt()
    };

    let mut decoder = Decoder::new(Format { encoding: Encoding::Mulaw, rate: 8000 });
    let caller = from_samples(&tone(8000, 1.0), Encoding::Mulaw);
    let mut heard = Vec::new();
    for frame in caller.chunks(160) {
        heard.extend(decoder.decode(frame));
    }
    let mut model_input = Vec::new();
    to_samples(&heard, Encoding::Pcm16, &mut model_input);
    assert_eq!(model_input.len(), 16_000, "one second at 16 kHz");
    // 700 Hz: 1400 zero crossings a second (a few fewer: the filter delays the start).
    assert!(crossings(&model_input).abs_diff(1400) <= 8, "{}", crossings(&model_input));
    assert!((rms(&model_input[800..]) / (8000.0 / 2f64.sqrt()) - 1.0).abs() < 0.03);

    let mut encoder = Encoder::new(Format { encoding: Encoding::Alaw, rate: 8000 });
    let reply = from_samples(&tone(24_000, 1.0), Encoding::Pcm16);
    let mut sent = Vec::new();
    for chunk in reply.chunks(1920) {
        sent.extend(encoder.encode(chunk));
    }
    assert_eq!(sent.len(), 8000, "one byte a sample at 8 kHz");
    let mut played = Vec::new();
    to_samples(&sent, Encoding::Alaw, &mut played);
    assert!(crossings(&played).abs_diff(1400) <= 8);
    assert!((rms(&played[400..]) / (8000.0 / 2f64.sqrt()) - 1.0).abs() < 0.03);

    let mut same = Encoder::new(Format::MODEL_OUTPUT);
    assert!(same.is_passthrough());
    assert_eq!(same.encode(&reply[..10]), reply[..10].to_vec());
}
