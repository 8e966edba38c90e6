//! Answering-machine detection on an answered outbound call: before the agent's session
//! opens, the callee's audio (through the call's own [`Relay`], so the jitter buffer and
//! latching are the call's from the start) goes to the sans-I/O detector
//! ([`switchboard_sip::media::amd`]), frame by frame, every 20 ms (the jitter buffer paces
//! here, where the agent's session forwards as it comes); the phone hears
//! silence meanwhile. It decides who answered; for a machine that is to be left a message,
//! it then waits for the beep (or the silence after the greeting, or the beep timeout), so
//! that the agent's session starts with the recording. A frame the jitter buffer has not
//! got counts as silence: a callee who sends nothing is silent.

use std::time::Duration;

use switchboard_core::outbound::{AnsweredBy, AnsweringMachine};
use switchboard_sip::call::{CallEvent, EndReason};
use switchboard_sip::media::amd::{AmdConfig, BeepWaiter, Detector, MessageStart, Verdict};
use switchboard_sip::media::format::Format;
use switchboard_sip::media::{FRAME_MS, FRAME_SAMPLES, rtcp};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::call::Relay;
use crate::ports::PortPair;

/// The detector's thresholds for an Agent's settings (the rest at their defaults).
pub(crate) fn config(settings: &AnsweringMachine) -> AmdConfig {
    let millis = |value: Option<u32>, default: Duration| value.map_or(default, |v| Duration::from_millis(v.into()));
    let defaults = AmdConfig::default();
    AmdConfig {
        greeting_max: millis(settings.greeting_max_millis, defaults.greeting_max),
        silence_after_greeting: millis(settings.silence_after_greeting_millis, defaults.silence_after_greeting),
        decision_timeout: millis(settings.decision_timeout_millis, defaults.decision_timeout),
        beep_timeout: settings.beep_timeout_seconds.map_or(defaults.beep_timeout, |s| Duration::from_secs(s.into())),
        ..defaults
    }
}

/// Who answered, in the gateway's words.
pub(crate) fn answered_by(verdict: Verdict) -> AnsweredBy {
    match verdict {
        Verdict::Human => AnsweredBy::Human,
        Verdict::Machine => AnsweredBy::Machine,
        Verdict::Unknown => AnsweredBy::Unknown,
    }
}

/// How the listening ended.
#[derive(Debug)]
pub(crate) enum Listened {
    /// Who answered, decided this long after the answer; for a machine to be left a
    /// message, when the message may start and how long after the answer that was.
    Decided { verdict: Verdict, after: Duration, message: Option<(MessageStart, Duration)> },
    /// The callee hung up meanwhile.
    Ended(EndReason),
    /// No RTP from the callee for the media timeout.
    MediaTimeout,
    /// The edge is shutting down.
    Shutdown,
}

/// What the listening task needs of the call.
pub(crate) struct Listening<'a> {
    pub relay: &'a mut Relay,
    pub ports: &'a PortPair,
    pub events: &'a mut mpsc::Receiver<CallEvent>,
    pub session_format: Format,
    pub shutdown: &'a CancellationToken,
}

/// Stage one of detection: who answered.
enum Stage {
    Detecting(Detector),
    /// A machine; waiting for the beep since `decided` after the answer.
    Beep(BeepWaiter, Duration),
}

impl Listening<'_> {
    /// Listens until detection decides (and, for a machine with `leave_message`, until the
    /// message may start); see the module docs.
    pub(crate) async fn run(self, config: AmdConfig, leave_message: bool) -> Listened {
        let Listening { relay, ports, events, session_format, shutdown } = self;
        // Detection reads the callee's audio as a timeline, one frame a tick.
        relay.pace(true);
        let mut stage = Stage::Detecting(Detector::new(config.clone()));
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut rtp_buf = vec![0u8; 2048];
        let mut rtcp_buf = vec![0u8; rtcp::MAX_PACKET];
        let silence = vec![0i16; FRAME_SAMPLES];
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(CallEvent::Established(media) | CallEvent::MediaChanged(media)) => relay.media(media),
                    Some(CallEvent::Ended(reason)) => return Listened::Ended(reason),
                    None => return Listened::Ended(EndReason::LocalHangUp),
                    Some(_) => {}
                },
                received = ports.rtp.recv_from(&mut rtp_buf) => {
                    if let Ok((n, from)) = received {
                        relay.rtp(from, &rtp_buf[..n], false);
                    }
                }
                received = ports.rtcp.recv_from(&mut rtcp_buf) => {
                    if let Ok((n, from)) = received {
                        relay.rtp(from, &rtcp_buf[..n], true);
                    }
                }
                _ = tick.tick(), if relay.is_settled() => {
                    let (play, send) = relay.tick();
                    if let Some((to, packet)) = send {
                        let _ = ports.rtp.send_to(&packet, to).await;
                    }
                    let frame: Vec<i16> = match play.into_iter().next() {
                        Some(audio) => session_format.to_8k(&audio),
                        None => silence.clone(),
                    };
                    match &mut stage {
                        Stage::Detecting(detector) => match detector.push(&frame) {
                            Some(Verdict::Machine) if leave_message => {
                                stage = Stage::Beep(BeepWaiter::new(config.clone()), detector.elapsed());
                            }
                            Some(verdict) => {
                                return Listened::Decided { verdict, after: detector.elapsed(), message: None };
                            }
                            None => {}
                        },
                        Stage::Beep(waiter, decided) => {
                            if let Some(start) = waiter.push(&frame) {
                                let after = *decided + waiter.elapsed();
                                return Listened::Decided {
                                    verdict: Verdict::Machine,
                                    after: *decided,
                                    message: Some((start, after)),
                                };
                            }
                        }
                    }
                    if relay.timed_out() {
                        return Listened::MediaTimeout;
                    }
                }
                () = shutdown.cancelled() => return Listened::Shutdown,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::outbound::OnMachine;
    use switchboard_sip::media::g711::Law;

    #[test]
    fn an_agents_settings_become_the_detectors_thresholds() {
        let settings = AnsweringMachine {
            on_machine: OnMachine::HangUp,
            message: None,
            greeting_max_millis: Some(3000),
            silence_after_greeting_millis: None,
            decision_timeout_millis: Some(6000),
            beep_timeout_seconds: Some(10),
        };
        let config = config(&settings);
        assert_eq!(config.greeting_max, Duration::from_millis(3000));
        assert_eq!(config.silence_after_greeting, AmdConfig::default().silence_after_greeting);
        assert_eq!(config.decision_timeout, Duration::from_secs(6));
        assert_eq!(config.beep_timeout, Duration::from_secs(10));
        assert_eq!(config.check(), Ok(()));
        assert_eq!(answered_by(Verdict::Machine), AnsweredBy::Machine);
    }

    use std::sync::Arc;

    use switchboard_sip::media::rtp::RtpSender;
    use switchboard_sip::sdp::{Codec, Direction, Negotiated};

    use crate::call::MediaSettings;
    use crate::ports::Ports;

    fn sine(hz: f64, millis: usize) -> Vec<i16> {
        (0..millis * 8)
            .map(|i| (12000.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / 8000.0).sin()) as i16)
            .collect()
    }

    fn noise(millis: usize) -> Vec<i16> {
        let mut state = 7u64;
        (0..millis * 8)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 49) as i16).wrapping_sub(16384) / 2
            })
            .collect()
    }

    /// Plays `audio` (then silence) as a phone would, μ-law RTP every 20 ms, to the call's
    /// RTP port over real UDP; and listens on the call's side until it decides.
    async fn listen_to(audio: Vec<i16>, leave_message: bool) -> Listened {
        let ports = Ports::new("127.0.0.1".parse().expect("ip"), 41000..=41999).expect("ports");
        let pair = ports.take().expect("a port pair");
        let edge = pair.rtp.local_addr().expect("addr");
        let phone = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("a phone socket");
        let media = Negotiated {
            remote: phone.local_addr().expect("addr"),
            codec: Codec::Pcmu,
            payload_type: 0,
            telephone_event: None,
            telephone_event_clock: 8000,
            opus: None,
            remote_ptime: None,
            direction: Direction::SendRecv,
            rtcp_mux: false,
            srtp: None,
            proto: "RTP/AVP".to_owned(),
        };
        let playing = tokio::spawn(async move {
            let mut sender = RtpSender::new(9, 1, 1);
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let frames = audio.chunks(160).map(<[i16]>::to_vec).chain(std::iter::repeat(vec![0i16; 160]));
            for (i, frame) in frames.take(600).enumerate() {
                tick.tick().await;
                let codes: Vec<u8> = frame.iter().map(|s| Law::Ulaw.encode(*s)).collect();
                let packet = sender.media(0, i == 0, &codes, 160);
                let _ = phone.send_to(&packet, edge).await;
            }
        });
        let mut relay =
            Relay::new(Arc::new(MediaSettings::default()), Format::G711(Law::Ulaw), "127.0.0.1".parse().expect("ip"));
        relay.media(media);
        let (_events_tx, mut events) = mpsc::channel(4);
        let shutdown = CancellationToken::new();
        let listening = Listening {
            relay: &mut relay,
            ports: &pair,
            events: &mut events,
            session_format: Format::G711(Law::Ulaw),
            shutdown: &shutdown,
        };
        let listened = listening.run(AmdConfig::default(), leave_message).await;
        playing.abort();
        listened
    }

    #[tokio::test]
    async fn a_short_greeting_over_rtp_is_a_person() {
        let audio = [vec![0; 300 * 8], sine(500.0, 800)].concat();
        match listen_to(audio, true).await {
            Listened::Decided { verdict: Verdict::Human, after, message: None } => {
                assert!((1800..=2300).contains(&after.as_millis()), "{after:?}");
            }
            other => panic!("expected a person, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_monologue_and_a_beep_over_rtp_is_a_machine_left_a_message_after_the_beep() {
        let audio = [vec![0; 300 * 8], noise(3200), vec![0; 200 * 8], sine(1000.0, 400)].concat();
        match listen_to(audio, true).await {
            Listened::Decided { verdict: Verdict::Machine, after, message: Some((start, at)) } => {
                assert!((2700..=3100).contains(&after.as_millis()), "decided at {after:?}");
                assert!(matches!(start, MessageStart::AfterBeep { .. }), "{start:?}");
                assert!((4050..=4500).contains(&at.as_millis()), "the message starts as the beep ends: {at:?}");
            }
            other => panic!("expected a machine and its beep, got {other:?}"),
        }
    }
}
