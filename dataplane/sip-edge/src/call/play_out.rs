//! The agent's last words before the edge's BYE: a session that ends (the agent's
//! `endSession` tool, after its goodbye) may leave reply audio queued for the phone — a reply
//! that reached the edge faster than real time — and the edge plays it out on the media clock
//! before it hangs up, so the caller hears the goodbye whole.

use std::time::Duration;

use switchboard_sip::call::CallEvent;

use super::{Call, Relay};

/// The longest the agent's last words queued for the phone play after its session ended,
/// before the edge hangs up (the reply queue holds at most 10 s).
const PLAY_OUT_LIMIT: Duration = Duration::from_secs(12);

impl Call {
    /// The session ended: plays the agent's audio still queued for the phone, on the media
    /// clock, for at most [`PLAY_OUT_LIMIT`], or until the phone hangs up or the edge shuts
    /// down meanwhile. Logs how much there was and what was left.
    pub(super) async fn play_out(&mut self, relay: &mut Relay) {
        let started = std::time::Instant::now();
        let queued_ms = relay.queued() / 8;
        let until = tokio::time::Instant::now() + PLAY_OUT_LIMIT;
        while relay.is_settled() && relay.queued() > 0 {
            let at = relay.next_send().map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std);
            tokio::select! {
                () = tokio::time::sleep_until(at.min(until)) => {
                    if tokio::time::Instant::now() >= until {
                        break;
                    }
                    for (to, packet) in relay.send_due(std::time::Instant::now()) {
                        let _ = self.ports.rtp.send_to(&packet, to).await;
                    }
                }
                event = self.events.recv() => if matches!(event, Some(CallEvent::Ended(_)) | None) {
                    break;
                },
                () = self.shutdown.cancelled() => break,
            }
        }
        if queued_ms > 0 {
            let ms = started.elapsed().as_millis();
            tracing::info!(
                call = %self.call_id, queued_ms, ms, left_ms = relay.queued() / 8,
                "played the agent's last words out before hanging up"
            );
        }
    }
}
