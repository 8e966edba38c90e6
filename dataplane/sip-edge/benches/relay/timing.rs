//! The latency the edge adds, measured on the frames themselves: every caller frame (a
//! phone's RTP payload, or a plain WebSocket client's binary frame) carries a marker with an
//! id in its first bytes; the stand-in gateway notes when each marked frame arrives and when
//! it sends it back, and the caller when the echo arrives. All in this process, on one
//! monotonic clock: the edge's own time is what its path takes beyond the WebSocket path's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

/// The marker's first and last byte (μ-law codes the frames' pattern never uses).
const OPEN: u8 = 0xA5;
const CLOSE: u8 = 0x5A;
/// The marker's length: `OPEN`, a big-endian u32 id, `CLOSE`.
const MARKER: usize = 6;

/// Which path a frame took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// RTP from a phone through the edge, frames over its WebSocket session.
    Edge,
    /// A plain WebSocket client straight to the stand-in.
    WebSocket,
}

/// One-way times in ms, per path and direction.
#[derive(Default)]
struct Samples {
    edge_in: Vec<f64>,
    edge_out: Vec<f64>,
    ws_in: Vec<f64>,
    ws_out: Vec<f64>,
}

/// What the phones, the WebSocket clients and the stand-in note about marked frames.
#[derive(Default)]
pub struct Timings {
    measuring: AtomicBool,
    next: AtomicU32,
    sent: Mutex<HashMap<u32, Instant>>,
    echoed: Mutex<HashMap<u32, Instant>>,
    samples: Mutex<Samples>,
}

/// A 20 ms μ-law frame (160 bytes): a quiet 400 Hz-ish pattern, so nothing is treated as
/// silence, with the marker of `id` at its start.
pub fn frame(id: u32) -> Vec<u8> {
    let mut frame: Vec<u8> = (0..160).map(|n| if n % 20 < 10 { 0x70 } else { 0xF0 }).collect();
    frame[0] = OPEN;
    frame[1..5].copy_from_slice(&id.to_be_bytes());
    frame[5] = CLOSE;
    frame
}

/// The id of the first marker in `audio`, wherever it is.
pub fn marked(audio: &[u8]) -> Option<u32> {
    audio.windows(MARKER).find(|w| w[0] == OPEN && w[MARKER - 1] == CLOSE).map(|w| {
        let mut id = [0u8; 4];
        id.copy_from_slice(&w[1..5]);
        u32::from_be_bytes(id)
    })
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

impl Timings {
    /// Starts or stops noting (only the steady window counts).
    pub fn measure(&self, on: bool) {
        self.measuring.store(on, Ordering::Relaxed);
    }

    /// A caller's next frame, its send time noted.
    pub fn next_frame(&self) -> Vec<u8> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if self.measuring.load(Ordering::Relaxed) {
            self.sent.lock().expect("lock").insert(id, Instant::now());
        }
        frame(id)
    }

    /// The stand-in took `audio` from `path`: the inbound time, and the echo's send time
    /// noted (call just before sending it back).
    pub fn arrived(&self, path: Path, audio: &[u8]) {
        let Some(id) = marked(audio) else { return };
        let Some(sent) = self.sent.lock().expect("lock").remove(&id) else { return };
        let ms = millis(sent);
        let mut samples = self.samples.lock().expect("lock");
        match path {
            Path::Edge => samples.edge_in.push(ms),
            Path::WebSocket => samples.ws_in.push(ms),
        }
        drop(samples);
        self.echoed.lock().expect("lock").insert(id, Instant::now());
    }

    /// A caller took the echo `audio` by `path`: the outbound time.
    pub fn echoed(&self, path: Path, audio: &[u8]) {
        let Some(id) = marked(audio) else { return };
        let Some(echoed) = self.echoed.lock().expect("lock").remove(&id) else { return };
        let ms = millis(echoed);
        let mut samples = self.samples.lock().expect("lock");
        match path {
            Path::Edge => samples.edge_out.push(ms),
            Path::WebSocket => samples.ws_out.push(ms),
        }
    }

    /// The report: each one-way time's median and p99, and what the edge adds.
    pub fn report(&self) -> String {
        let mut guard = self.samples.lock().expect("lock");
        let s = &mut *guard;
        let mut line = String::new();
        let mut medians = [0.0f64; 4];
        for (i, (name, v)) in [
            ("edge_in", &mut s.edge_in),
            ("edge_out", &mut s.edge_out),
            ("ws_in", &mut s.ws_in),
            ("ws_out", &mut s.ws_out),
        ]
        .into_iter()
        .enumerate()
        {
            v.sort_by(f64::total_cmp);
            let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
            medians[i] = at(0.5);
            line.push_str(&format!("{name}(n={}) p50={:.2}ms p99={:.2}ms  ", v.len(), at(0.5), at(0.99)));
        }
        let (added_in, added_out) = (medians[0] - medians[2], medians[1] - medians[3]);
        format!(
            "{line}\n  added by the edge (median, beyond the WebSocket path): RTP in -> frame out {added_in:.2} ms, \
             frame in -> RTP out {added_out:.2} ms, both {:.2} ms",
            added_in + added_out
        )
    }
}
