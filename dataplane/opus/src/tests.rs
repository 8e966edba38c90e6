//! The wrapper's rules against real libopus: a tone keeps its pitch at 16 and 48 kHz, a lost
//! packet comes back from the next one's FEC (closer to what was lost than concealment), a
//! malformed packet is concealed and counted, the peer's limits reach the encoder.

use super::*;

fn tone(hz: f64, rate: u32, samples: usize) -> Vec<i16> {
    (0..samples)
        .map(|i| ((2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin() * 12_000.0) as i16)
        .collect()
}

fn pitch(samples: &[i16], rate: u32) -> f64 {
    let crossings = samples.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (samples.len() as f64 / f64::from(rate))
}

fn rms(samples: &[i16]) -> f64 {
    (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len().max(1) as f64).sqrt()
}

/// A second of `hz` at `rate` as 20 ms packets.
fn packets(encoder: &mut VoiceEncoder, hz: f64) -> Vec<Vec<u8>> {
    let rate = encoder.rate();
    let frame = rate as usize / 50;
    tone(hz, rate, rate as usize).chunks_exact(frame).map(|f| encoder.encode(f).expect("encodes")).collect()
}

#[test]
fn a_tone_keeps_its_pitch_at_16_and_48_khz() {
    for rate in [16_000, 48_000] {
        let mut encoder = VoiceEncoder::new(rate, &EncoderSettings::default()).expect("encoder");
        let mut decoder = VoiceDecoder::new(rate).expect("decoder");
        let mut pcm = Vec::new();
        for packet in packets(&mut encoder, 500.0) {
            let decoded = decoder.decode(&packet, 20);
            assert!(!decoded.concealed);
            pcm.extend_from_slice(decoded.pcm);
        }
        assert_eq!(pcm.len(), rate as usize, "a second in, a second out at {rate}");
        let steady = &pcm[rate as usize / 5..];
        let hz = pitch(steady, rate);
        assert!((490.0..510.0).contains(&hz), "{rate} Hz: pitch {hz}");
        assert!(rms(steady) > 5_000.0, "{rate} Hz: loud enough: {}", rms(steady));
        assert_eq!(decoder.stats(), DecoderStats { packets: 50, ..DecoderStats::default() });
    }
}

#[test]
fn a_lost_packet_comes_back_from_the_next_ones_fec_closer_than_concealment() {
    let settings = EncoderSettings { expected_loss: 30, ..EncoderSettings::default() };
    let mut encoder = VoiceEncoder::new(16_000, &settings).expect("encoder");
    let sent = packets(&mut encoder, 700.0);
    let lost = 30;
    // What the lost frame was, decoded with nothing lost.
    let mut clean = VoiceDecoder::new(16_000).expect("decoder");
    let mut reference = Vec::new();
    for packet in &sent[..=lost] {
        reference = clean.decode(packet, 20).pcm.to_vec();
    }
    let error = |made: &[i16]| -> f64 {
        made.iter().zip(&reference).map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs()).sum::<f64>() / 320.0
    };
    let mut with_fec = VoiceDecoder::new(16_000).expect("decoder");
    let mut with_plc = VoiceDecoder::new(16_000).expect("decoder");
    for packet in &sent[..lost] {
        with_fec.decode(packet, 20);
        with_plc.decode(packet, 20);
    }
    let fec = with_fec.recover(Some(&sent[lost + 1]), 320);
    assert!(!fec.concealed && fec.pcm.len() == 320, "rebuilt from FEC: {}", fec.pcm.len());
    let fec_error = error(fec.pcm);
    let plc = with_plc.recover(None, 320);
    assert!(plc.concealed && plc.pcm.len() == 320);
    let plc_error = error(plc.pcm);
    assert!(fec_error < plc_error, "FEC {fec_error} against concealment {plc_error}");
    assert_eq!((with_fec.stats().fec_samples, with_plc.stats().concealed_samples), (320, 320));
    // The stream goes on from the packet whose FEC was used.
    assert!(!with_fec.decode(&sent[lost + 1], 20).concealed);
}

#[test]
fn malformed_and_empty_packets_are_concealed_and_counted_never_an_error() {
    let mut encoder = VoiceEncoder::new(16_000, &EncoderSettings::default()).expect("encoder");
    let sent = packets(&mut encoder, 500.0);
    let mut decoder = VoiceDecoder::new(16_000).expect("decoder");
    decoder.decode(&sent[0], 20);
    // Code 3 (arbitrary frames) with a frame count of zero: invalid (RFC 6716 §3.2.5).
    for bad in [&[0x4B, 0x00][..], &[], &[0xFF; 3][..]] {
        let decoded = decoder.decode(bad, 20);
        assert!(decoded.concealed && decoded.pcm.len() == 320, "{bad:?}: {}", decoded.pcm.len());
    }
    assert_eq!(decoder.stats().malformed, 3);
    assert!(!decoder.decode(&sent[1], 20).concealed, "the stream goes on");
    // A 60 ms packet decodes whole (there is room for 120 ms); concealment is cut to whole
    // 2.5 ms steps and at most 120 ms.
    let mut long = VoiceEncoder::new(16_000, &EncoderSettings::default()).expect("encoder");
    let packet = long.encode(&tone(500.0, 16_000, 960)).expect("a 60 ms packet");
    assert_eq!(decoder.decode(&packet, 20).pcm.len(), 960);
    assert_eq!(decoder.conceal(333).len(), 320);
    assert_eq!(decoder.conceal(100_000).len(), 1920);
}

#[test]
fn the_peers_playback_rate_caps_the_bandwidth_and_bad_rates_are_refused() {
    let narrow = EncoderSettings { max_playback_rate: Some(8_000), ..EncoderSettings::default() };
    let mut encoder = VoiceEncoder::new(16_000, &narrow).expect("encoder");
    // A 5 kHz tone: wideband content, which a peer that plays 8 kHz cannot hear.
    let sent = packets(&mut encoder, 5_000.0);
    let bandwidth = opus::packet::get_bandwidth(&sent[10]).expect("a TOC");
    assert_eq!(bandwidth, Bandwidth::Narrowband);
    let wideband = EncoderSettings { bitrate: Some(32_000), ..EncoderSettings::default() };
    let mut wide = VoiceEncoder::new(16_000, &wideband).expect("encoder");
    assert_eq!(opus::packet::get_bandwidth(&packets(&mut wide, 5_000.0)[40]).expect("a TOC"), Bandwidth::Wideband);
    assert_eq!(bandwidth_for(48_000), Bandwidth::Fullband);
    assert!(matches!(VoiceDecoder::new(44_100), Err(OpusError::Rate { rate: 44_100 })));
    assert!(matches!(VoiceEncoder::new(22_050, &EncoderSettings::default()), Err(OpusError::Rate { .. })));
    // A bitrate cap and constant bitrate: small packets of one size.
    let cbr = EncoderSettings { bitrate: Some(12_000), cbr: true, fec: false, ..EncoderSettings::default() };
    let mut encoder = VoiceEncoder::new(16_000, &cbr).expect("encoder");
    let sizes: Vec<usize> = packets(&mut encoder, 500.0).iter().map(Vec::len).skip(5).collect();
    assert!(sizes.iter().all(|s| *s == sizes[0] && *s <= 31), "12 kbit/s CBR is 30 bytes a frame: {sizes:?}");
}

#[test]
fn both_are_send_and_sync_for_async_owners() {
    fn held_across_awaits<T: Send + Sync>() {}
    held_across_awaits::<VoiceEncoder>();
    held_across_awaits::<VoiceDecoder>();
}
