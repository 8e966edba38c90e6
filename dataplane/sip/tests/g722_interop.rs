//! The edge's G.722 (`media::g722`) against two independent implementations, run for real:
//! FFmpeg's libavcodec (through PyAV in the virtualenv `tests/tools/install.sh` makes for
//! aiortc) and spandsp (`libspandsp.so.2`, the library Debian's baresip codes G.722 with).
//! A second of speech-like audio (tones across both sub-bands, a glide, bursts and pauses)
//! is encoded by each: the bytes must be the same as ours, since G.722 is defined bit for
//! bit. Each decodes our bytes and we decode theirs: the samples must match, and the audio
//! must come back near the original (a signal-to-noise floor).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use switchboard_sip::media::g722::{Decoder, Encoder};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interpreter of the aiortc virtualenv (PyAV and its FFmpeg), from the installer.
fn python() -> PathBuf {
    let out = Command::new("bash").arg(repo_root().join("tests/tools/install.sh")).output().expect("install.sh runs");
    assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the bin directory").trim()).join("aiortc-python")
}

/// Runs the reference implementation `implementation` (`ffmpeg`, `spandsp`) on `input`.
fn reference(python: &PathBuf, implementation: &str, op: &str, input: &[u8]) -> Vec<u8> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/g722_reference.py");
    let mut child = Command::new(python)
        .arg(&script)
        .args([implementation, op])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the reference runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("its output");
    writer.join().expect("writer").expect("written");
    assert!(out.status.success(), "{implementation} {op}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// A second of speech-like 16 kHz audio: a voiced burst (200 Hz with harmonics up to
/// 6 kHz), a pause, a glide from 300 Hz to 7 kHz, a loud burst (0.85 of full scale), and noise.
fn speech_like() -> Vec<i16> {
    let mut seed = 0x2545_f491_u32;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        f64::from(seed as i32) / f64::from(i32::MAX)
    };
    let pi2 = 2.0 * std::f64::consts::PI;
    (0..16_000)
        .map(|i| {
            let t = f64::from(i) / 16_000.0;
            let value = match i {
                0..4000 => (1..30).map(|h| (pi2 * 200.0 * f64::from(h) * t).sin() * 2500.0 / f64::from(h)).sum(),
                4000..6000 => 0.0,
                6000..11000 => {
                    let u = (t - 0.375) / 0.3125;
                    9000.0 * (pi2 * (300.0 * u * 0.3125 + 0.5 * 6700.0 * u * u * 0.3125)).sin()
                }
                11000..13000 => 28000.0 * (pi2 * 900.0 * t).sin(),
                _ => 3000.0 * noise(),
            };
            value.clamp(-32768.0, 32767.0) as i16
        })
        .collect()
}

fn to_bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8]) -> Vec<i16> {
    bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect()
}

/// Signal-to-noise ratio in dB of `decoded` against `original` at G.722's delay of 22
/// samples, past the first 50 ms.
fn snr(original: &[i16], decoded: &[i16]) -> f64 {
    let (mut signal, mut noise) = (0.0, 0.0);
    for i in 800..original.len() - 22 {
        let (x, y) = (f64::from(original[i]), f64::from(decoded[i + 22]));
        signal += x * x;
        noise += (x - y) * (x - y);
    }
    10.0 * (signal / noise.max(1.0)).log10()
}

/// How many positions differ, and the first.
fn differences<T: PartialEq + Copy + std::fmt::Debug>(ours: &[T], theirs: &[T]) -> (usize, Option<(usize, T, T)>) {
    let count = ours.iter().zip(theirs).filter(|(a, b)| a != b).count();
    let first = ours.iter().zip(theirs).enumerate().find(|(_, (a, b))| a != b).map(|(i, (a, b))| (i, *a, *b));
    (count, first)
}

#[test]
fn g722_interoperates_bit_for_bit_with_ffmpeg_and_spandsp() {
    let python = python();
    let original = speech_like();
    let mut ours = Vec::new();
    let mut encoder = Encoder::new();
    for frame in original.chunks(320) {
        encoder.encode(frame, &mut ours);
    }
    assert_eq!(ours.len(), 8000, "64 kbit/s: 8000 bytes a second");
    let mut decoded = Vec::new();
    Decoder::new().decode(&ours, &mut decoded);
    let own = snr(&original, &decoded);
    assert!(own > 20.0, "our round trip: {own:.1} dB");
    for implementation in ["spandsp", "ffmpeg"] {
        // Their encoding is ours, byte for byte.
        let theirs = reference(&python, implementation, "encode", &to_bytes(&original));
        assert_eq!(theirs.len(), ours.len(), "{implementation}'s encoding's length");
        let (count, first) = differences(&ours, &theirs);
        assert_eq!(
            count, 0,
            "{implementation} encodes differently: {count} bytes, first (index, ours, theirs) {first:?}"
        );
        // We decode their bytes as they do (the same bytes, decoded again from theirs).
        let mut from_theirs = Vec::new();
        Decoder::new().decode(&theirs, &mut from_theirs);
        assert_eq!(from_theirs, decoded, "our decoding of {implementation}'s encoding");
        // They decode our bytes as we do.
        let heard = from_bytes(&reference(&python, implementation, "decode", &ours));
        assert_eq!(heard.len(), decoded.len(), "{implementation}'s decoding's length");
        let (count, first) = differences(&decoded, &heard);
        assert_eq!(count, 0, "{implementation} decodes differently: {count} samples, first {first:?}");
        let db = snr(&original, &heard);
        assert!(db > 20.0, "{implementation} decoding our G.722: {db:.1} dB");
        eprintln!("{implementation}: the same bytes and samples as ours; {db:.1} dB SNR through it");
    }
}
