//! The caller's audio: Opus packets in, PCM16 at the runtime's input rate out.
//!
//! libopus decodes straight to the runtime's rate (it decodes at 8, 12, 16, 24 or 48 kHz):
//! a caller's voice comes as SILK at 16 kHz or less, which a decoder at 48 kHz would
//! resample up only for the edge to resample it down again. The RTP clock stays 48 kHz;
//! sample counts in [`InboundStats`] are 48 kHz samples.
//!
//! Packets arrive in order (str0m holds a few back to reorder them) but may be missing. By
//! RTP sequence number and timestamp a gap is either loss (sequence numbers skipped) or a
//! DTX pause (consecutive numbers, the timestamp jumped: the sender stopped during
//! silence). Loss is concealed: the 20 ms just before the packet that ends the gap are
//! rebuilt from that packet's in-band FEC, the rest by libopus's packet loss concealment.
//! A DTX pause is filled by the decoder's concealment, which after a DTX frame is comfort
//! noise. Gaps longer than [`MAX_FILL`] (a muted microphone, a stalled network) are not
//! filled: the stream picks up where the next packet is. A packet older than one already
//! played, or a repeat, is dropped — but only within [`LATE_PACKETS`]: a packet whose number
//! is further behind, or whose RTP time went back while its number went on, is a sender that
//! started its stream again (a new SSRC after renegotiation, a restarted encoder) and the
//! stream picks up from it; dropping it, and all that follows, left the caller unheard for
//! the rest of the call.
//!
//! **Stale audio is dropped undecoded.** A packet reaches the decoder some time after its
//! place in the stream: the network's delay plus whatever it waited in queues on the way (the
//! edge's socket, the call's queue). Against the fastest of the stream's recent packets
//! ([`Lateness`]), a packet more than [`MAX_LATENESS`] behind is dropped, counted `stale`, and
//! the stream goes on from the next one (no gap filled for it). A gateway starved of CPU
//! otherwise let its socket's queue grow to seconds of every caller's audio: the agent
//! heard each phrase seconds late, then nothing it could answer, while the client's ICE
//! consent checks waited behind the same queue. Dropping what is too late to answer costs
//! less than decoding it, so the queue drains and the call's delay comes back down.
//!
//! The interarrival jitter (RFC 3550 §6.4.1) is kept, and the time spent decoding.

use std::time::{Duration, Instant};

use super::{AudioError, FRAME_SAMPLES, OPUS_RATE, RUNTIME_RATES};

/// How far behind the stream's fastest recent packet one may reach the decoder and still be
/// decoded: two seconds. A network's burst or a pause of a busy node shorter than that
/// delays the caller's words but loses none (the voice model takes audio faster than real
/// time, so the delay does not last); past it the gateway is not keeping up, and what waited
/// that long is too late to answer (libwebrtc's jitter buffer flushes past about four).
pub const MAX_LATENESS: Duration = Duration::from_secs(2);
/// How long the fastest packet stays the reference: the reference is the fastest of the last
/// one to two windows, so a path that became slower for good (a new route) is followed after
/// at most two.
const LATENESS_WINDOW: Duration = Duration::from_secs(5);

/// The longest gap filled, in 48 kHz samples (one second).
pub const MAX_FILL: u64 = OPUS_RATE as u64;
/// How far behind the next expected packet one may be and still be taken as late (reordered
/// or repeated: dropped) rather than as a stream started again (~2 s of 20 ms packets).
pub const LATE_PACKETS: u64 = 100;
/// The most samples one Opus packet decodes to (120 ms at 48 kHz).
const MAX_PACKET_SAMPLES: usize = 5760;

/// What happened to the caller's audio so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InboundStats {
    /// Packets decoded.
    pub packets: u64,
    /// Packets missing from the sequence.
    pub lost: u64,
    /// 48 kHz samples rebuilt from in-band FEC.
    pub fec_samples: u64,
    /// 48 kHz samples made up by loss concealment (loss and DTX pauses).
    pub concealed_samples: u64,
    /// Packets dropped: late, repeated, or that would not decode.
    pub dropped: u64,
    /// Times the sender started its stream again (its sequence number far behind, or its RTP
    /// time gone back): the stream picked up from there.
    pub restarts: u64,
    /// Packets dropped undecoded for reaching the decoder more than [`MAX_LATENESS`] behind
    /// the stream.
    pub stale: u64,
    /// The interarrival jitter (RFC 3550 §6.4.1), in 48 kHz samples.
    pub jitter: u64,
    /// Time spent decoding and concealing.
    pub transcoding: Duration,
}

/// How late packets reach the decoder, against the stream's fastest recent one: each
/// packet's transit (its arrival minus its RTP time, on one scale) less the smallest transit of
/// the current and the previous [`LATENESS_WINDOW`].
#[derive(Debug, Default)]
struct Lateness {
    /// The first packet's arrival: the zero of the transit's scale.
    epoch: Option<Instant>,
    /// The smallest transit of the window under way, and of the one before (nanoseconds).
    current: Option<i128>,
    previous: Option<i128>,
    window_ends: Option<Instant>,
    /// The last packet's transit, for the jitter and to see the sender's clock jump.
    last: Option<i128>,
    /// RFC 3550's jitter estimate, in nanoseconds (scaled by 16, as its integer form).
    jitter16: i128,
}

impl Lateness {
    /// How far behind the reference the packet of RTP `time` (48 kHz) arriving at `arrived`
    /// is (zero for the fastest); updates the reference and the jitter.
    fn packet(&mut self, arrived: Instant, time: u64) -> Duration {
        let epoch = *self.epoch.get_or_insert(arrived);
        let since = arrived.saturating_duration_since(epoch).as_nanos() as i128;
        let transit = since - (time as i128) * 1_000_000_000 / i128::from(OPUS_RATE);
        // A sender's clock that jumps ahead (a DTX pause, packets lost) only makes packets
        // early, which the reference takes; one that goes back is a stream started again
        // ([`Lateness::restart`]).
        if let Some(last) = self.last {
            self.jitter16 += (transit - last).abs() - self.jitter16 / 16;
        }
        self.last = Some(transit);
        let window_ends = *self.window_ends.get_or_insert(arrived + LATENESS_WINDOW);
        if arrived >= window_ends {
            self.previous = self.current.take();
            self.window_ends = Some(arrived + LATENESS_WINDOW);
        }
        self.current = Some(self.current.map_or(transit, |c| c.min(transit)));
        let reference = self.previous.map_or(transit, |p| p.min(transit)).min(self.current.unwrap_or(transit));
        Duration::from_nanos((transit - reference).max(0) as u64)
    }

    /// The jitter, in 48 kHz samples.
    fn jitter(&self) -> u64 {
        (self.jitter16 / 16 * i128::from(OPUS_RATE) / 1_000_000_000) as u64
    }

    /// The sender started its stream again: its clock is a new one.
    fn restart(&mut self) {
        (self.current, self.previous, self.last) = (None, None, None);
    }
}

/// Decoder and concealment of one caller's audio.
#[derive(Debug)]
pub struct Inbound {
    /// Decodes at the runtime's rate.
    decoder: opus::Decoder,
    /// 48 kHz samples per sample at the runtime's rate (2, 3 or 6).
    ratio: u64,
    /// The next packet's sequence number and RTP time (48 kHz), once one came.
    next: Option<(u64, u64)>,
    /// Scratch for one packet's PCM, at the runtime's rate.
    decoded: Vec<i16>,
    out: Vec<i16>,
    stats: InboundStats,
    lateness: Lateness,
}

impl Inbound {
    /// A decoder whose PCM comes out at `rate` Hz (8, 16 or 24 kHz).
    pub fn new(rate: u32) -> Result<Self, AudioError> {
        if !RUNTIME_RATES.contains(&rate) {
            return Err(AudioError::Rate { rate });
        }
        let decoder = opus::Decoder::new(rate, opus::Channels::Mono).map_err(AudioError::opus("decoder"))?;
        Ok(Self {
            decoder,
            ratio: u64::from(OPUS_RATE / rate),
            next: None,
            decoded: vec![0; MAX_PACKET_SAMPLES],
            out: Vec::new(),
            stats: InboundStats::default(),
            lateness: Lateness::default(),
        })
    }

    /// One packet, which reached the call at `arrived`: its extended sequence number, RTP
    /// time (48 kHz) and Opus payload.
    pub fn packet(&mut self, arrived: Instant, seq: u64, time: u64, payload: &[u8]) {
        let (next_seq, next_time) = self.next.unwrap_or((seq, time));
        let late = seq < next_seq && next_seq - seq <= LATE_PACKETS;
        if late {
            self.stats.dropped += 1;
            return;
        }
        let restarted = seq < next_seq || time < next_time;
        if restarted {
            self.lateness.restart();
        }
        let lateness = self.lateness.packet(arrived, time);
        self.stats.jitter = self.lateness.jitter();
        if lateness > MAX_LATENESS {
            // Too late to answer: not decoded, and no gap filled for it after.
            self.stats.stale += 1;
            self.next = Some((seq + 1, time + FRAME_SAMPLES as u64));
            return;
        }
        let began = Instant::now();
        if restarted {
            // Started again: no gap to fill, no loss to count.
            self.stats.restarts += 1;
        } else {
            let lost = seq - next_seq;
            let gap = time - next_time;
            self.stats.lost += lost;
            if gap > 0 && gap <= MAX_FILL {
                self.fill(gap, (lost > 0).then_some(payload));
            }
        }
        let samples = match self.decoder.decode(payload, &mut self.decoded, false) {
            Ok(samples) => samples,
            Err(_) => {
                self.stats.dropped += 1;
                self.conceal(self.frame())
            }
        };
        self.stats.packets += 1;
        self.emit(samples);
        self.next = Some((seq + 1, time + samples as u64 * self.ratio));
        self.stats.transcoding += began.elapsed();
    }

    /// The PCM decoded since the last call, at the runtime's rate.
    pub fn take(&mut self) -> Vec<i16> {
        std::mem::take(&mut self.out)
    }

    /// What happened so far.
    pub fn stats(&self) -> InboundStats {
        self.stats
    }

    /// Samples of one 20 ms frame at the runtime's rate.
    fn frame(&self) -> usize {
        FRAME_SAMPLES / self.ratio as usize
    }

    /// Fills `gap` samples (48 kHz) before a packet: concealment, with the last frame from the
    /// packet's FEC when `fec` holds it (the gap is loss, not DTX).
    fn fill(&mut self, gap: u64, fec: Option<&[u8]>) {
        // Whole 2.5 ms steps (120 samples at 48 kHz), as libopus takes them, at the decoder's
        // rate.
        let gap = (gap / 120 * 120 / self.ratio) as usize;
        let frame = self.frame();
        let from_fec = if fec.is_some() { gap.min(frame) } else { 0 };
        let mut left = gap - from_fec;
        while left > 0 {
            let step = left.min(frame);
            let samples = self.conceal(step);
            self.emit(samples);
            left -= step;
        }
        if let Some(packet) = fec.filter(|_| from_fec > 0) {
            let samples = match self.decoder.decode(packet, &mut self.decoded[..from_fec], true) {
                Ok(samples) => {
                    self.stats.fec_samples += samples as u64 * self.ratio;
                    samples
                }
                Err(_) => self.conceal(from_fec),
            };
            self.emit(samples);
        }
    }

    /// Loss concealment of `samples` (at the runtime's rate) into the scratch buffer; returns
    /// how many.
    fn conceal(&mut self, samples: usize) -> usize {
        let made = self.decoder.decode(&[], &mut self.decoded[..samples], false).unwrap_or_else(|_| {
            self.decoded[..samples].fill(0);
            samples
        });
        self.stats.concealed_samples += made as u64 * self.ratio;
        made
    }

    /// The first `samples` of the scratch buffer onto the output.
    fn emit(&mut self, samples: usize) {
        self.out.extend_from_slice(&self.decoded[..samples]);
    }
}
