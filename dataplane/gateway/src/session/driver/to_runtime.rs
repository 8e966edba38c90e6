//! Sends to the runtime, with a deadline: a runtime that stops reading (its pod stuck, its
//! socket's buffers full) must not hold the relay, which would then neither read the client
//! nor ping it. A send that does not complete within [`SLOW_RUNTIME`] gives the runtime up
//! as lost — its connection is dropped mid-frame, never written to again — and the session
//! moves to another pod as after any lost runtime, the unsent message kept for it.
//!
//! The caller's audio goes in larger frames than it came in ([`AudioBatch`]): each frame
//! costs the gateway a system call and the runtime a wake-up of three tasks whatever its
//! size, and the runtime gathers the audio into larger events for the voice model anyway.

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_core::audio::gather::Gather;
use switchboard_core::audio::negotiate;
use switchboard_core::protocol::AudioSettings;
use tokio_tungstenite::tungstenite::Message;

use super::{Event, Gateway, Machine, RuntimeFrame, State, Upstream, feed};

/// How long a runtime may take to accept one message (the clients' deadline too).
const SLOW_RUNTIME: Duration = switchboard_serve::ws::SLOW_PEER;

/// How a send to the runtime went.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sent {
    Done,
    /// The connection failed (the read side sees it too).
    Failed,
    /// Not accepted within [`SLOW_RUNTIME`].
    Stuck,
}

/// Sends `message` on `up` within [`SLOW_RUNTIME`].
pub(super) async fn send(up: &mut Upstream, message: Message) -> Sent {
    match switchboard_serve::ws::within(SLOW_RUNTIME, up.ws.send(message)).await {
        Ok(Ok(())) => Sent::Done,
        Ok(Err(_)) => Sent::Failed,
        Err(_) => Sent::Stuck,
    }
}

/// The runtime took nothing for [`SLOW_RUNTIME`]: its connection is dropped and the
/// machine told it is lost (it moves the session to another pod).
pub(super) fn given_up(gateway: &Gateway, machine: &mut Machine, state: &mut State) {
    state.upstream = None;
    tracing::warn!(
        session_id = %machine.id(),
        agent = %machine.target().key(),
        "the runtime took no message for {} s: given up, the session moves to another pod",
        SLOW_RUNTIME.as_secs()
    );
    feed(gateway, machine, Event::Runtime(RuntimeFrame::Lost));
}

/// The caller's audio gathered for the runtime ([`crate::GatewayConfig::audio_batch`]): a
/// batch is sent once it holds that much audio of the session's input format, once its
/// first frame has waited that long (frames that stop coming are not held), and before any
/// other message to the runtime, so the order of what the client sent is kept. With
/// real-time 20 ms frames and 60 ms batches, a frame reaches the runtime at most 40 ms
/// later than alone — where the runtime, told of the batches in the grant, no longer holds
/// it for its own events, so the caller's audio reaches the voice model when it did. A
/// frame the runtime would refuse (empty, not whole samples) or one as large as a batch
/// goes on its own, after what is pending: the runtime judges each as it always has.
#[derive(Debug)]
pub(super) struct AudioBatch {
    /// The batch under way (a target of 0: each frame as it comes).
    gather: Gather<Instant>,
    /// The longest a frame waits.
    hold: Duration,
    /// Bytes of one sample of the input format.
    sample: usize,
}

impl AudioBatch {
    /// Batches of `hold` of the session's input audio (`settings`: its
    /// `session_start.audio`, the default format without); zero: none.
    pub(super) fn new(hold: Duration, settings: Option<&AudioSettings>) -> Self {
        let input = negotiate(settings).0.input;
        let per_second = input.bytes_per_second() as u128;
        let bytes = usize::try_from(hold.as_millis() * per_second / 1000).unwrap_or(usize::MAX);
        Self { gather: Gather::new(bytes, hold), hold, sample: input.encoding.sample_bytes() }
    }

    /// The hold the runtime is told of, in milliseconds; none when frames go as they come.
    pub(super) fn hold_ms(&self) -> Option<u32> {
        (self.gather.target() > 0).then(|| u32::try_from(self.hold.as_millis()).unwrap_or(u32::MAX))
    }

    /// Whether `frame` joins a batch; one that does not goes on its own, after what is
    /// pending ([`AudioBatch::take`]).
    pub(super) fn joins(&self, frame: &[u8]) -> bool {
        let bytes = self.gather.target();
        bytes > 0 && !frame.is_empty() && frame.len() < bytes && frame.len().is_multiple_of(self.sample)
    }

    /// Adds a frame that [`joins`](AudioBatch::joins), come at `now`: the batch, once full.
    pub(super) fn push(&mut self, frame: &[u8], now: Instant) -> Option<Bytes> {
        self.gather.push(frame, now).map(Bytes::from)
    }

    /// When the pending batch is to be sent however much it holds.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.gather.deadline()
    }

    /// The pending batch, if any (it is sent now).
    pub(super) fn take(&mut self) -> Option<Bytes> {
        self.gather.take().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use switchboard_core::protocol::AudioFormat;

    use super::*;

    fn frame(byte: u8, len: usize) -> Vec<u8> {
        vec![byte; len]
    }

    #[test]
    fn off_no_frame_joins() {
        let batch = AudioBatch::new(Duration::ZERO, None);
        assert_eq!(batch.hold_ms(), None);
        assert!(!batch.joins(&frame(1, 640)));
    }

    #[test]
    fn three_real_time_frames_make_one_batch_in_order() {
        // 60 ms of the default input (16 kHz PCM16) is 1,920 bytes: three 20 ms frames.
        let mut batch = AudioBatch::new(Duration::from_millis(60), None);
        assert_eq!(batch.hold_ms(), Some(60));
        let start = Instant::now();
        assert!(batch.joins(&frame(1, 640)));
        assert_eq!(batch.push(&frame(1, 640), start), None);
        assert_eq!(batch.deadline(), Some(start + Duration::from_millis(60)));
        assert_eq!(batch.push(&frame(2, 640), start + Duration::from_millis(20)), None);
        let sent = batch.push(&frame(3, 640), start + Duration::from_millis(40)).expect("a full batch");
        let mut expected = frame(1, 640);
        expected.extend(frame(2, 640));
        expected.extend(frame(3, 640));
        assert_eq!(sent, Bytes::from(expected));
        assert_eq!(batch.deadline(), None, "nothing is pending after a batch");
        assert_eq!(batch.take(), None);
    }

    #[test]
    fn the_size_follows_the_input_format() {
        // G.711 at 8 kHz: one byte a sample, 480 bytes in 60 ms; an odd frame is whole samples.
        let settings = AudioSettings {
            input: Some(AudioFormat { encoding: "mulaw".into(), sample_rate: Some(8000) }),
            ..Default::default()
        };
        let mut batch = AudioBatch::new(Duration::from_millis(60), Some(&settings));
        let now = Instant::now();
        assert!(batch.joins(&frame(7, 161)));
        assert_eq!(batch.push(&frame(7, 160), now), None);
        assert_eq!(batch.push(&frame(7, 160), now), None);
        assert_eq!(batch.push(&frame(7, 160), now).map(|b| b.len()), Some(480));
    }

    #[test]
    fn frames_the_runtime_judges_alone_do_not_join() {
        let mut batch = AudioBatch::new(Duration::from_millis(60), None);
        // Empty, half a PCM16 sample, as large as a batch (a 100 ms frame, or one over the
        // runtime's one-second limit): each goes on its own, refused or taken as before.
        for alone in [frame(0, 0), frame(1, 641), frame(4, 1920), frame(4, 3200), frame(4, 40_000)] {
            assert!(!batch.joins(&alone), "{} bytes", alone.len());
        }
        // What is pending is taken first (the relay sends it before the frame).
        let now = Instant::now();
        assert_eq!(batch.push(&frame(5, 640), now), None);
        assert_eq!(batch.take(), Some(Bytes::from(frame(5, 640))));
        assert_eq!(batch.deadline(), None);
        assert_eq!(batch.take(), None);
    }

    #[test]
    fn larger_frames_that_join_make_a_batch_over_the_size() {
        // 40 ms frames: two make 80 ms, sent at once (never more than twice the size).
        let mut batch = AudioBatch::new(Duration::from_millis(60), None);
        let now = Instant::now();
        assert_eq!(batch.push(&frame(1, 1280), now), None);
        assert_eq!(batch.push(&frame(2, 1280), now).map(|b| b.len()), Some(2560));
    }
}
