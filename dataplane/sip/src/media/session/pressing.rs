//! The keys the agent presses on a call ([`MediaSession::press`], see
//! [`crate::media::digits`]): the sequence under way takes the stream's frames — its
//! telephone events, and silence between keys — while the agent's audio waits in its queue.

use std::net::SocketAddr;

use super::MediaSession;
use crate::media::digits::{PressRefused, Pressed, Pressing, Sequence, Slot, Step};

impl MediaSession {
    /// Starts pressing `steps` (see [`crate::media::digits`]): from the next frame on, the stream
    /// carries their telephone events and the silence between them, and the agent's audio
    /// waits in its queue until they are over. Returns how long they take, in milliseconds;
    /// [`MediaSession::take_pressed`] says when they are over and how it went.
    pub fn press(&mut self, steps: Vec<Step>) -> Result<u32, PressRefused> {
        if self.pressing.is_some() {
            return Err(PressRefused::Busy);
        }
        let payload_type = self.media.telephone_event.ok_or(PressRefused::NoTelephoneEvents)?;
        if !self.may_send() {
            return Err(PressRefused::NotSending);
        }
        let sequence = Sequence::new(steps, self.media.telephone_event_clock);
        let ms = sequence.duration_ms();
        self.pressing = Some(Pressing { sequence, payload_type, timestamp: self.sender.timestamp() });
        self.pressed = None;
        Ok(ms)
    }

    /// Whether keys are being pressed.
    pub fn is_pressing(&self) -> bool {
        self.pressing.is_some()
    }

    /// How the last sequence of keys ended, once it has (once).
    pub fn take_pressed(&mut self) -> Option<Pressed> {
        self.pressed.take()
    }

    pub(super) fn stop_pressing(&mut self, interrupted: Option<&'static str>) {
        if let Some(pressing) = self.pressing.take() {
            self.pressed = Some(pressing.end(interrupted));
        }
    }

    /// This frame's packet of the keys being pressed: `None` when none are (or they just
    /// ended: the frame is the audio's), `Some(None)` when it is not sent.
    pub(super) fn press_slot(&mut self, samples: u32) -> Option<Option<(SocketAddr, Vec<u8>)>> {
        self.pressing.as_ref()?;
        if !self.may_send() {
            self.stop_pressing(Some("the call was put on hold"));
            return None;
        }
        let pressing = self.pressing.as_mut()?;
        let Some(slot) = pressing.sequence.next_slot() else {
            self.stop_pressing(None);
            return None;
        };
        let packet = match slot {
            Slot::Event { start, payload } => {
                if start {
                    pressing.timestamp = self.sender.timestamp();
                }
                let packet = self.sender.packet(pressing.payload_type, start, pressing.timestamp, &payload.to_bytes());
                self.sender.skip(samples);
                packet
            }
            Slot::Silence => {
                let format = self.coder.format();
                let payload = self.coder.payload(vec![format.silence_byte(); format.frame_bytes()]);
                self.sender.media(self.media.payload_type, false, &payload, samples)
            }
        };
        self.talking = true;
        self.replying = false;
        Some(self.protect(packet, false).map(|packet| (self.media.remote, packet)))
    }
}
