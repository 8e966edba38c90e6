//! An Opus call's media: the phone's 48 kHz Opus decoded to 16 kHz PCM16, a lost packet
//! rebuilt from the next one's FEC when the buffer holds it, a malformed one concealed; the
//! agent's 16 kHz PCM16 sent as 20 ms Opus packets on the 48 kHz RTP clock, as the phone's
//! fmtp asks; digits and RTCP statistics at the right clocks.

use switchboard_opus::{EncoderSettings, VoiceDecoder, VoiceEncoder};

use super::*;
use crate::media::jitter::JitterConfig;
use crate::sdp::{Codec, OpusParams};

fn phone() -> SocketAddr {
    "198.51.100.20:35012".parse().unwrap()
}

fn opus(params: OpusParams) -> Negotiated {
    Negotiated {
        remote: phone(),
        codec: Codec::Opus,
        payload_type: 96,
        telephone_event: Some(101),
        telephone_event_clock: 48_000,
        opus: Some(params),
        remote_ptime: Some(20),
        direction: Direction::SendRecv,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

fn session(params: OpusParams) -> MediaSession {
    let config = MediaConfig { jitter: JitterConfig { depth: 1, ..JitterConfig::default() }, ..MediaConfig::default() };
    MediaSession::new(config, opus(params), 0xABCD, 1000, 0)
}

fn packet(seq: u16, payload: &[u8]) -> Vec<u8> {
    let ts = u32::from(seq) * 960;
    RtpSender::new(0x5555, seq, ts).packet(96, false, ts, payload)
}

/// A phone's second of a `hz` tone as 20 ms Opus packets: encoded at 48 kHz, with FEC.
fn phone_packets(hz: f64) -> Vec<Vec<u8>> {
    let settings = EncoderSettings { expected_loss: 30, ..EncoderSettings::default() };
    let mut encoder = VoiceEncoder::new(48_000, &settings).expect("encoder");
    let tone: Vec<i16> = (0..48_000)
        .map(|i| (10_000.0 * (2.0 * std::f64::consts::PI * hz * f64::from(i) / 48_000.0).sin()) as i16)
        .collect();
    tone.chunks_exact(960).map(|frame| encoder.encode(frame).expect("encodes")).collect()
}

fn pitch(samples: &[i16], rate: f64) -> f64 {
    let crossings = samples.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (samples.len() as f64 / rate)
}

/// What one tick played, as 16 kHz samples, and whether it was concealed.
fn played(s: &mut MediaSession) -> (Vec<i16>, bool) {
    match s.tick().play {
        Playout::Frame(frame) => (Format::Wideband.to_16k(&frame), false),
        Playout::Concealed(frame) => (Format::Wideband.to_16k(&frame), true),
        Playout::Waiting => panic!("waiting"),
    }
}

#[test]
fn the_phones_opus_plays_as_16_khz_pcm_with_its_pitch() {
    let mut s = session(OpusParams::default());
    assert_eq!(s.format(), Format::Wideband);
    let mut heard = Vec::new();
    for (i, payload) in phone_packets(500.0).iter().enumerate() {
        assert_eq!(s.receive(Instant::now(), phone(), &packet(i as u16 + 1, payload)), Received::Audio);
        let (pcm, concealed) = played(&mut s);
        assert!(!concealed && pcm.len() == 320, "20 ms at 16 kHz");
        heard.extend(pcm);
    }
    let hz = pitch(&heard[3_200..], 16_000.0);
    assert!((490.0..510.0).contains(&hz), "pitch {hz}");
    // RTCP's jitter is counted on Opus's 48 kHz clock.
    assert_eq!(s.receiver_stats().map(ReceiverStats::clock_rate), Some(48_000));
}

#[test]
fn a_lost_packet_is_rebuilt_from_the_next_ones_fec_when_it_is_held_and_garbage_is_concealed() {
    let sent = phone_packets(700.0);
    let lost = 30;
    // The reference: every packet arrives.
    let mut all = session(OpusParams::default());
    let mut reference = Vec::new();
    for (i, payload) in sent.iter().enumerate().take(lost + 1) {
        all.receive(Instant::now(), phone(), &packet(i as u16 + 1, payload));
        reference = played(&mut all).0;
    }
    let error = |made: &[i16]| -> f64 {
        made.iter().zip(&reference).map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs()).sum::<f64>() / 320.0
    };
    // Packet 31 lost; 32 is in the buffer when 31's turn comes (FEC), or not yet (PLC).
    let (mut fec, mut plc) = (session(OpusParams::default()), session(OpusParams::default()));
    for (i, payload) in sent.iter().enumerate().take(lost) {
        for s in [&mut fec, &mut plc] {
            s.receive(Instant::now(), phone(), &packet(i as u16 + 1, payload));
            played(s);
        }
    }
    let next = packet(lost as u16 + 2, &sent[lost + 1]);
    fec.receive(Instant::now(), phone(), &next);
    let (from_fec, concealed) = played(&mut fec);
    assert!(concealed && from_fec.len() == 320);
    let (from_plc, concealed) = played(&mut plc);
    assert!(concealed && from_plc.len() == 320);
    assert!(error(&from_fec) < error(&from_plc), "FEC {} against PLC {}", error(&from_fec), error(&from_plc));
    assert!(!played(&mut fec).1, "then the packet itself plays");
    // A payload that is no Opus packet (code 3 with no frames): concealed, 20 ms, and the
    // stream goes on.
    let mut s = session(OpusParams::default());
    s.receive(Instant::now(), phone(), &packet(1, &sent[0]));
    played(&mut s);
    assert_eq!(s.receive(Instant::now(), phone(), &packet(2, &[0x4B, 0x00])), Received::Audio);
    let (pcm, concealed) = played(&mut s);
    assert!(concealed && pcm.len() == 320);
    s.receive(Instant::now(), phone(), &packet(3, &sent[2]));
    assert!(!played(&mut s).1);
}

/// The bandwidth of an Opus packet from its TOC byte (RFC 6716 §3.1), in Hz of audio.
fn audio_bandwidth(packet: &[u8]) -> u32 {
    match packet[0] >> 3 {
        0..=3 | 16..=19 => 4_000,
        4..=7 => 6_000,
        8..=11 | 20..=23 => 8_000,
        12 | 13 | 24..=27 => 12_000,
        _ => 20_000,
    }
}

/// The packets the session sends for `seconds` of a 16 kHz `hz` tone queued at once.
fn sent(s: &mut MediaSession, hz: f64, frames: usize) -> Vec<(u32, Vec<u8>)> {
    let tone: Vec<i16> = (0..320 * frames)
        .map(|i| (10_000.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / 16_000.0).sin()) as i16)
        .collect();
    s.queue_audio(&Format::Wideband.from_16k(&tone));
    (0..frames)
        .map(|_| {
            let (to, bytes) = s.tick().send.expect("a packet");
            assert_eq!(to, phone());
            let p = rtp::parse(&bytes).unwrap();
            assert_eq!(p.payload_type, 96);
            (p.timestamp, p.payload.to_vec())
        })
        .collect()
}

#[test]
fn the_agents_pcm_goes_out_as_20_ms_opus_on_the_48_khz_clock_as_the_phone_asked() {
    let mut s = session(OpusParams::default());
    let packets = sent(&mut s, 600.0, 50);
    let steps: Vec<u32> = packets.windows(2).map(|w| w[1].0.wrapping_sub(w[0].0)).collect();
    assert!(steps.iter().all(|step| *step == 960), "20 ms on a 48 kHz clock: {steps:?}");
    // The phone (a 48 kHz decoder) hears the tone, wideband.
    let mut decoder = VoiceDecoder::new(48_000).expect("decoder");
    let mut heard = Vec::new();
    for (_, payload) in &packets {
        let decoded = decoder.decode(payload, 20);
        assert!(!decoded.concealed && decoded.pcm.len() == 960);
        heard.extend_from_slice(decoded.pcm);
    }
    let hz = pitch(&heard[9_600..], 48_000.0);
    assert!((590.0..610.0).contains(&hz), "the phone hears 600 Hz: {hz}");
    // Silence after: still Opus, every 20 ms (the edge does not leave packets out).
    let (_, bytes) = s.tick().send.expect("silence goes out too");
    assert!(!rtp::parse(&bytes).unwrap().payload.is_empty());
    // A phone that plays at most 8 kHz gets narrowband; a 5 kHz tone is wideband otherwise.
    let wide = sent(&mut session(OpusParams::default()), 5_000.0, 30);
    assert_eq!(audio_bandwidth(&wide[29].1), 8_000);
    let narrow = OpusParams { max_playback_rate: Some(8_000), ..OpusParams::default() };
    let narrow = sent(&mut session(narrow), 5_000.0, 30);
    assert_eq!(audio_bandwidth(&narrow[29].1), 4_000);
    // A bitrate cap and constant bitrate: 12 kbit/s is 30 bytes a frame.
    let capped = OpusParams { max_average_bitrate: Some(12_000), cbr: true, ..OpusParams::default() };
    let capped = sent(&mut session(capped), 600.0, 30);
    assert!(capped[5..].iter().all(|(_, p)| p.len() <= 31 && p.len() == capped[5].1.len()), "{capped:?}");
}

#[test]
fn the_encoder_follows_the_phones_fmtp() {
    let settings = coder::encoder_settings(&OpusParams::default());
    assert!(!settings.fec && !settings.dtx && !settings.cbr, "no FEC the phone would not use");
    assert_eq!(settings.bitrate, Some(32_000));
    let asks = OpusParams {
        use_inband_fec: true,
        max_average_bitrate: Some(20_000),
        max_playback_rate: Some(12_000),
        use_dtx: true,
        ..OpusParams::default()
    };
    let settings = coder::encoder_settings(&asks);
    assert!(settings.fec && !settings.dtx, "FEC on; DTX not taken (a packet every 20 ms)");
    assert_eq!((settings.bitrate, settings.max_playback_rate), (Some(20_000), Some(12_000)));
    assert_eq!(
        coder::encoder_settings(&OpusParams { max_average_bitrate: Some(510_000), ..asks }).bitrate,
        Some(32_000)
    );
}

#[test]
fn digits_beside_opus_run_on_the_events_clock_and_a_new_codec_starts_a_new_coder() {
    let mut s = session(OpusParams::default());
    let packets = s.digit(telephone::Event::Digit('7'), 100).expect("telephone events");
    let last = rtp::parse(&packets.last().expect("packets").1).unwrap();
    let payload = telephone::Payload::parse(last.payload).unwrap();
    assert!(payload.end && payload.duration == 4800, "100 ms at 48 kHz: {}", payload.duration);
    let press = RtpSender::new(0x5555, 1, 48_000).packet(101, true, 48_000, &payload.to_bytes());
    assert_eq!(
        s.receive(Instant::now(), phone(), &press),
        Received::Telephone(vec![
            telephone::Telephone::Pressed(telephone::Event::Digit('7')),
            telephone::Telephone::Released { event: telephone::Event::Digit('7'), duration_ms: 100 }
        ])
    );
    // A re-INVITE to G.711: μ-law frames of 160 bytes from then on.
    s.update(Negotiated { codec: Codec::Pcmu, payload_type: 0, opus: None, ..opus(OpusParams::default()) });
    assert_eq!(s.format(), Format::G711(crate::media::g711::Law::Ulaw));
    let (_, bytes) = s.tick().send.expect("a packet");
    assert_eq!(rtp::parse(&bytes).unwrap().payload.len(), 160);
}

proptest::proptest! {
    /// What the `opus_media` fuzz target checks, on random sequences: whatever a phone sends
    /// on an Opus call (real packets, garbage, repeats, gaps), nothing panics, every frame
    /// played is whole 16 kHz samples of at most 120 ms, and what goes out is Opus every
    /// 960 ticks of the clock.
    #[test]
    fn whatever_the_phone_sends_the_session_plays_whole_frames_and_sends_opus(
        steps in proptest::collection::vec(
            (0u16..40, proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..200)), proptest::bool::ANY),
            1..60,
        ),
    ) {
        let real = phone_packets(440.0);
        let mut s = session(OpusParams { use_inband_fec: true, ..OpusParams::default() });
        s.queue_audio(&[1; 6400]);
        let mut last_sent: Option<u32> = None;
        for (seq, garbage, tick) in steps {
            let payload = garbage.unwrap_or_else(|| real[usize::from(seq)].clone());
            let _ = s.receive(Instant::now(), phone(), &packet(seq, &payload));
            if tick {
                let tick = s.tick();
                if let Playout::Frame(frame) | Playout::Concealed(frame) = &tick.play {
                    proptest::prop_assert!(frame.len() % 2 == 0 && frame.len() <= 2 * 1920);
                }
                let (_, bytes) = tick.send.expect("a packet every tick");
                let sent = rtp::parse(&bytes).unwrap();
                proptest::prop_assert_eq!(sent.payload_type, 96);
                if let Some(last) = last_sent {
                    proptest::prop_assert_eq!(sent.timestamp.wrapping_sub(last), 960);
                }
                last_sent = Some(sent.timestamp);
            }
        }
    }
}
