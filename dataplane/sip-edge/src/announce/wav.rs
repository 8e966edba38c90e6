//! Reading a recording: a RIFF/WAVE file of 16-bit signed PCM, mono, at 8 or 16 kHz, no
//! longer than [`MAX_SECONDS`]; 16 kHz is filtered and halved to the phone's 8 kHz
//! ([`to_8k`]). Anything else is refused with what is wrong and how to fix it ([`WavError`]).

/// The longest announcement, in seconds: a hold announcement repeats, and a ConfigMap holds
/// at most 1 MiB (about 65 s of 8 kHz 16-bit audio).
pub const MAX_SECONDS: u32 = 60;

/// The largest file read: [`MAX_SECONDS`] at 16 kHz, and room for the headers.
pub const MAX_BYTES: u64 = (MAX_SECONDS as u64) * 16_000 * 2 + 64 * 1024;

/// The fewest samples (at 8 kHz) an announcement holds: one 20 ms frame.
const MIN_SAMPLES: usize = 160;

/// Why a file is not a recording the edge plays.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WavError {
    /// No `RIFF`/`WAVE` header.
    #[error("it is not a WAV file (no RIFF/WAVE header)")]
    NotWav,
    /// A chunk it needs is missing.
    #[error("it has no `{0}` chunk")]
    Missing(&'static str),
    /// The `fmt ` chunk is shorter than its fields.
    #[error("its `fmt ` chunk is cut short")]
    ShortFormat,
    /// Not 16-bit integer PCM.
    #[error("its audio is {0}, not 16-bit PCM: save it as 16-bit signed PCM (sox: -e signed-integer -b 16)")]
    Encoding(String),
    /// Not mono.
    #[error("it has {0} channels, not 1: mix it down to mono (sox: -c 1)")]
    Channels(u16),
    /// Not 8 or 16 kHz.
    #[error("its sample rate is {0} Hz, not 8000 or 16000: resample it (sox: -r 8000)")]
    Rate(u32),
    /// Longer than [`MAX_SECONDS`].
    #[error("it is {0:.1} s long, more than the {max} s an announcement may last", max = MAX_SECONDS)]
    TooLong(f64),
    /// Shorter than one 20 ms frame.
    #[error("it holds no audio (less than 20 ms)")]
    Empty,
}

/// The audio of a WAV file, as 8 kHz samples.
pub fn read(bytes: &[u8]) -> Result<Vec<i16>, WavError> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(WavError::NotWav);
    }
    let mut format: Option<&[u8]> = None;
    let mut data: Option<&[u8]> = None;
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
        let start = at + 8;
        // A data chunk whose size runs past the file (a recorder that never wrote it, or
        // 0xFFFFFFFF when streaming): what is there.
        let end = start.saturating_add(size).min(bytes.len());
        match id {
            b"fmt " => format = Some(&bytes[start..end]),
            b"data" => data = Some(&bytes[start..end]),
            _ => {}
        }
        // Chunks are padded to an even size.
        at = start.saturating_add(size).saturating_add(size & 1);
    }
    let format = format.ok_or(WavError::Missing("fmt "))?;
    if format.len() < 16 {
        return Err(WavError::ShortFormat);
    }
    let field = |i: usize| u16::from_le_bytes([format[i], format[i + 1]]);
    let (tag, channels, bits) = (field(0), field(2), field(14));
    let rate = u32::from_le_bytes([format[4], format[5], format[6], format[7]]);
    // WAVE_FORMAT_EXTENSIBLE (0xFFFE) names its real format in its sub-format GUID.
    let pcm = tag == 1 || (tag == 0xFFFE && format.len() >= 26 && field(24) == 1);
    if !pcm || bits != 16 {
        let what = match tag {
            1 | 0xFFFE if pcm => format!("{bits}-bit PCM"),
            3 => "floating point".to_owned(),
            6 => "A-law".to_owned(),
            7 => "μ-law".to_owned(),
            other => format!("format {other:#06x}"),
        };
        return Err(WavError::Encoding(what));
    }
    if channels != 1 {
        return Err(WavError::Channels(channels));
    }
    if rate != 8000 && rate != 16000 {
        return Err(WavError::Rate(rate));
    }
    let data = data.ok_or(WavError::Missing("data"))?;
    let samples: Vec<i16> = data.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
    let seconds = samples.len() as f64 / f64::from(rate);
    if seconds > f64::from(MAX_SECONDS) {
        return Err(WavError::TooLong(seconds));
    }
    let samples = if rate == 16000 { to_8k(&samples) } else { samples };
    if samples.len() < MIN_SAMPLES {
        return Err(WavError::Empty);
    }
    Ok(samples)
}

/// Taps of the low-pass filter before halving 16 kHz to 8 kHz: a windowed sinc with its
/// cut-off at 3.6 kHz, below the new Nyquist frequency (4 kHz), so nothing folds back.
const TAPS: usize = 31;

fn low_pass() -> [f64; TAPS] {
    let cutoff = 3600.0 / 16000.0;
    let middle = (TAPS / 2) as f64;
    let mut taps = [0.0; TAPS];
    for (i, tap) in taps.iter_mut().enumerate() {
        let n = i as f64 - middle;
        let sinc = if n == 0.0 {
            2.0 * cutoff
        } else {
            (2.0 * std::f64::consts::PI * cutoff * n).sin() / (std::f64::consts::PI * n)
        };
        // Hamming window.
        let window = 0.54 - 0.46 * (2.0 * std::f64::consts::PI * i as f64 / (TAPS - 1) as f64).cos();
        *tap = sinc * window;
    }
    let sum: f64 = taps.iter().sum();
    taps.map(|t| t / sum)
}

/// 16 kHz samples to 8 kHz: filtered ([`low_pass`]), then every other one kept.
pub fn to_8k(samples: &[i16]) -> Vec<i16> {
    let taps = low_pass();
    let half = (TAPS / 2) as isize;
    (0..samples.len() / 2)
        .map(|out| {
            let centre = (out * 2) as isize;
            let mut acc = 0.0;
            for (k, tap) in taps.iter().enumerate() {
                let i = centre + k as isize - half;
                if let Some(x) = usize::try_from(i).ok().and_then(|i| samples.get(i)) {
                    acc += tap * f64::from(*x);
                }
            }
            acc.round().clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16
        })
        .collect()
}
