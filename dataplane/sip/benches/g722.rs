//! `g722`: what G.722 costs the SIP edge per call: the CPU to decode one 20 ms frame from
//! the phone (160 bytes to 320 samples at 16 kHz) and to encode one to it (320 samples to 160
//! bytes), on a second of speech-like audio coded over and over, on one thread. A G.722 call
//! does both every 20 ms, on top of what a G.711 call costs (`sip_relay`, whose G.711 is
//! passed through); the figure printed as "% of a core per call" is the two together over
//! 20 ms.
//!
//! `BENCH_FRAMES=100000` (default) frames each way. Run:
//! `cargo bench -p switchboard-sip --bench g722`.

use std::hint::black_box;
use std::time::Instant;

use switchboard_sip::media::g722::{Decoder, Encoder};

/// A second of speech-like 16 kHz audio: a 180 Hz voice with harmonics to 6 kHz, whose
/// loudness rises and falls four times a second.
fn speech() -> Vec<i16> {
    let pi2 = 2.0 * std::f64::consts::PI;
    (0..16_000)
        .map(|i| {
            let t = f64::from(i) / 16_000.0;
            let envelope = 0.5 + 0.5 * (pi2 * 4.0 * t).sin();
            let voice: f64 = (1..33).map(|h| (pi2 * 180.0 * f64::from(h) * t).sin() / f64::from(h)).sum();
            (voice * 3000.0 * envelope) as i16
        })
        .collect()
}

fn main() {
    let frames: usize = std::env::var("BENCH_FRAMES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let audio = speech();
    let pcm: Vec<&[i16]> = audio.chunks_exact(320).collect();
    let mut encoder = Encoder::new();
    let mut codes: Vec<Vec<u8>> = Vec::with_capacity(pcm.len());
    for frame in &pcm {
        let mut out = Vec::new();
        encoder.encode(frame, &mut out);
        codes.push(out);
    }

    let mut out = Vec::with_capacity(160);
    let started = Instant::now();
    for i in 0..frames {
        out.clear();
        encoder.encode(black_box(pcm[i % pcm.len()]), &mut out);
        black_box(&out);
    }
    let encode = started.elapsed().as_secs_f64() * 1e6 / frames as f64;

    let mut decoder = Decoder::new();
    let mut samples = Vec::with_capacity(320);
    let started = Instant::now();
    for i in 0..frames {
        samples.clear();
        decoder.decode(black_box(&codes[i % codes.len()]), &mut samples);
        black_box(&samples);
    }
    let decode = started.elapsed().as_secs_f64() * 1e6 / frames as f64;

    let per_call = (encode + decode) / 20_000.0 * 100.0;
    println!("g722: {frames} frames of 20 ms each way, one thread");
    println!("  encode {encode:.2} µs per frame, decode {decode:.2} µs per frame");
    println!("  both ways every 20 ms: {per_call:.3} % of a core per call");
}
