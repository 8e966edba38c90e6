//! What str0m reports after an input, turned into the call's outputs: datagrams queued,
//! the next timeout kept, and its events — ICE state, the data channel, caller audio — as
//! [`CallEvent`]s, with the data channel's rules applied ([`crate::channel`]).

use std::time::Instant;

use str0m::channel::ChannelData;
use str0m::media::{Frequency, MediaData};
use str0m::{Event, IceConnectionState, Output};

use super::{Call, CallEvent, CloseReason, Datagram};

/// The most caller audio in one [`CallEvent::Audio`], in milliseconds (clients of the
/// session protocol send frames of 20-100 ms; the runtime takes at most a second in one).
pub const MOST_AUDIO_MS: u32 = 100;
use crate::channel::check_incoming;

impl Call {
    /// Polls str0m until it waits for time, then checks the disconnect grace.
    pub(super) fn drive(&mut self, now: Instant) {
        while !self.closed {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(at)) => {
                    self.rtc_timeout = Some(at);
                    break;
                }
                Ok(Output::Transmit(t)) => {
                    if let Some(path) = self.paths.sent(t.proto, t.destination, &t.contents) {
                        self.events.push_back(CallEvent::Path(path));
                    }
                    self.transmits.push_back(Datagram {
                        proto: t.proto,
                        source: t.source,
                        destination: t.destination,
                        contents: t.contents.into(),
                    });
                }
                Ok(Output::Event(event)) => self.event(now, event),
                Err(error) => {
                    self.finish(CloseReason::Failed(error));
                    return;
                }
            }
        }
        let expired = self.disconnected_since.is_some_and(|since| now >= since + self.config.disconnect_grace);
        if expired && !self.closed {
            self.rtc.disconnect();
            self.finish(CloseReason::IceFailed);
        }
    }

    fn event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Connected => {
                self.connected = true;
                self.events.push_back(CallEvent::Connected);
            }
            Event::IceConnectionStateChange(state) => self.ice_state(now, state),
            // The first channel the client opens carries the session; others are ignored.
            Event::ChannelOpen(id, _label) if self.channel.is_none() => {
                self.channel = Some(id);
                self.events.push_back(CallEvent::ChannelOpen);
            }
            Event::ChannelData(data) => self.channel_data(data),
            Event::ChannelClose(id) if Some(id) == self.channel => self.finish(CloseReason::Remote),
            Event::MediaData(data) => self.media(now, data),
            Event::Closed => self.finish(CloseReason::Remote),
            _ => {}
        }
    }

    fn ice_state(&mut self, now: Instant, state: IceConnectionState) {
        match state {
            IceConnectionState::Disconnected => {
                if self.disconnected_since.is_none() {
                    self.disconnected_since = Some(now);
                    self.events.push_back(CallEvent::Disconnected);
                }
            }
            IceConnectionState::Connected | IceConnectionState::Completed => {
                if self.disconnected_since.take().is_some() {
                    self.events.push_back(CallEvent::Reconnected);
                }
            }
            IceConnectionState::New | IceConnectionState::Checking => {}
        }
    }

    fn channel_data(&mut self, data: ChannelData) {
        if Some(data.id) != self.channel {
            return;
        }
        match check_incoming(data.binary, data.data, self.config.max_message_bytes) {
            Ok(text) => self.events.push_back(CallEvent::Text(text)),
            Err(error) => {
                let reply = error.reply().to_json();
                if let Some(mut channel) = self.rtc.channel(data.id) {
                    // Best effort: a client that does not read misses the explanation.
                    let _ = channel.write(false, reply.as_bytes());
                }
                if error.ends_call() {
                    // The reply leaves before DTLS closes.
                    self.drain_transmits();
                    self.rtc.disconnect();
                    self.drain_transmits();
                    self.finish(CloseReason::TooLarge(error));
                } else {
                    self.events.push_back(CallEvent::Refused(error));
                }
            }
        }
    }

    /// Queues what str0m has to send now, ignoring its events (the call is ending).
    pub(super) fn drain_transmits(&mut self) {
        while let Ok(output) = self.rtc.poll_output() {
            match output {
                Output::Transmit(t) => self.transmits.push_back(Datagram {
                    proto: t.proto,
                    source: t.source,
                    destination: t.destination,
                    contents: t.contents.into(),
                }),
                Output::Timeout(_) => return,
                Output::Event(_) => {}
            }
        }
    }

    fn media(&mut self, now: Instant, data: MediaData) {
        if data.mid != self.audio_mid || data.pt != self.opus_pt {
            return;
        }
        let seq = **data.seq_range.start();
        let time = data.time.rebase(Frequency::FORTY_EIGHT_KHZ).numer();
        self.inbound.packet(data.network_time, seq, time, &data.data);
        let pcm = self.inbound.take();
        tracing::trace!(
            target: super::LATENCY_TARGET,
            seq,
            samples = pcm.len(),
            rms = rms(&pcm),
            waited_us = now.saturating_duration_since(data.network_time).as_micros() as u64,
            "caller audio decoded"
        );
        // A gap filled comes with the packet after it, up to a second and a frame at once:
        // more than the runtime takes in one frame (a second). In pieces, as clients send.
        let most = (self.config.input_rate / 1000 * MOST_AUDIO_MS) as usize;
        if pcm.len() <= most {
            if !pcm.is_empty() {
                self.events.push_back(CallEvent::Audio(pcm));
            }
            return;
        }
        for piece in pcm.chunks(most.max(1)) {
            self.events.push_back(CallEvent::Audio(piece.to_vec()));
        }
    }
}

/// The root mean square of `pcm` (for the latency trace).
fn rms(pcm: &[i16]) -> u32 {
    let sum: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    (sum / pcm.len().max(1) as f64).sqrt() as u32
}
