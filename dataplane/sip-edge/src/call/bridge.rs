//! Dial and bridge: the edge puts a caller through to a person itself where the caller's
//! side takes no REFER (it refused one with 405, 501, 403, ...: see
//! [`switchboard_sip::call::bridge::refer_refused`]), or at once when the edge is told so
//! ([`TransferMethod::Dial`](crate::TransferMethod::Dial), `--transfer-method dial`). The rules are the sans-I/O
//! [`switchboard_sip::call::bridge::Transfer`]; this module moves the bytes:
//!
//! - [`Call::dial`]: the call's task works out where the person is — a SIP URI is called at its
//!   host directly; an E.164 number through the outbound trunk when the edge has one
//!   (`--outbound-trunk`, its caller-id and credentials; not local mode's stand-in with no
//!   trunk, [`Outbound::direct`](crate::Outbound)), else through the caller's side as
//!   `sip:<number>@<the caller's address>;user=phone` — and asks the SIP task
//!   ([`Command::Dial`]) for a new outbound leg: an RTP port pair and an INVITE
//!   ([`switchboard_sip::call::OutboundCall`], the outbound-call code), whose events come
//!   back to the caller's task.
//! - [`Call::bridged`]: once the person answered, the agent was told `transferred` and its
//!   session ended, the caller's task relays media between the two legs
//!   ([`MediaBridge`]: each leg's jitter buffer, μ-law/A-law/G.722 transcoded where the
//!   legs differ, keys relayed) until either side hangs up; then BYE to the other. RTP that
//!   stops on either leg for the media timeout ends both.
//!
//! A warm transfer takes the same path, with the agent's brief between the person's answer
//! and the bridge ([`super::warm`]).
//!
//! A person's leg that cannot be placed ends the transfer like a REFER that fails: a host
//! that does not resolve is `unreachable` (404), no RTP port free or the edge at its call
//! limit is `unreachable` (503).

use std::time::{Duration, Instant, SystemTime};

use switchboard_sip::call::bridge::{Leg, Step};
use switchboard_sip::call::refer::TransferEnd;
use switchboard_sip::call::{CallEvent, ClientAuth, Transport};
use switchboard_sip::media::FRAME_MS;
use switchboard_sip::media::bridge::MediaBridge;
use switchboard_sip::media::session::MediaSession;
use switchboard_sip::sdp::Negotiated;
use switchboard_sip::trunk::outbound::Destination;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use super::Call;
use crate::command::{Command, DialRequest, PersonLeg, next_event};
use crate::end::End;
use crate::transfer::{Transfers, target_uri};

/// How long a person's host may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

impl Call {
    /// Performs a transfer's signalling steps (those that follow from them too); returns the
    /// media steps, for the call's task: [`Step::Bridge`] (the person's media, when the legs
    /// are to be bridged), and a warm transfer's [`Step::Hold`], [`Step::Brief`] and
    /// [`Step::Unhold`] (see [`super::warm`]).
    pub(super) async fn perform(
        &self,
        transfers: &mut Transfers,
        steps: Vec<Step>,
        to_gateway: &mpsc::Sender<Message>,
    ) -> Vec<Step> {
        let call = self;
        let mut queue: std::collections::VecDeque<Step> = steps.into();
        let mut media = Vec::new();
        while let Some(step) = queue.pop_front() {
            match step {
                Step::Refer => {
                    let Some(current) = transfers.current() else { continue };
                    let target = target_uri(&current.address, call.incoming.source);
                    let refer = Command::Transfer { call_id: call.call_id.clone(), target, timeout: current.timeout };
                    let _ = call.commands.send(refer).await;
                }
                Step::Dial => {
                    let Some(current) = transfers.current() else { continue };
                    let (address, timeout) = (current.address.clone(), current.timeout);
                    match self.dial(&address, timeout).await {
                        Ok(leg) => {
                            if let Some(current) = transfers.current() {
                                current.leg = Some(leg);
                            }
                        }
                        Err(end) => queue.extend(transfers.dial_failed(end)),
                    }
                }
                Step::Report(end) => {
                    if let Some(result) = transfers.report(&call.call_id, &end) {
                        let _ = to_gateway.send(Message::text(result)).await;
                    }
                }
                Step::HangUp(Leg::Person) => {
                    if let Some(call_id) = transfers.leg_id() {
                        let _ = call.commands.send(Command::HangUp { call_id }).await;
                    }
                }
                Step::HangUp(Leg::Caller) => {
                    let _ = call.commands.send(Command::HangUp { call_id: call.call_id.clone() }).await;
                }
                step @ (Step::Bridge(_) | Step::Hold | Step::Brief(_) | Step::Unhold) => media.push(step),
            }
        }
        // A transfer that is over is forgotten (its person's leg, if any, let go).
        drop(transfers.settle());
        media
    }

    /// Dials the person at `address` for this call (see the module docs).
    async fn dial(&self, address: &str, ring_timeout: Duration) -> Result<PersonLeg, TransferEnd> {
        let call = self;
        let destination = Destination::parse(address).map_err(|error| TransferEnd::NotStarted(error.to_string()))?;
        let caller = call.incoming.source;
        let outbound = call.dialling.outbound.as_ref();
        // A trunk routes numbers; local mode's stand-in (`direct`) names only the caller-id.
        let trunk = outbound.filter(|o| !o.direct).map(|o| &o.trunk);
        let mut over = (Transport::Udp, None);
        let (uri, (host, port), caller_id, auth) = match (&destination, trunk) {
            (Destination::Number(_), Some(trunk)) => {
                let auth = trunk.credentials.as_ref().map(|c| ClientAuth {
                    username: c.username.clone(),
                    password: c.password.clone(),
                    cnonce: uuid::Uuid::new_v4().simple().to_string(),
                });
                let uri = trunk.request_uri(&destination);
                over = (trunk.transport, outbound.and_then(|o| o.tls.clone()));
                (uri, (trunk.host.clone(), trunk.port), Some(trunk.caller_id.clone()), auth)
            }
            (Destination::Number(_), None) => {
                let uri = target_uri(address, caller);
                (uri, (caller.ip().to_string(), caller.port()), None, None)
            }
            (Destination::Uri(uri), _) => {
                let Some(target) = destination.host_port() else {
                    return Err(TransferEnd::NotStarted(format!("{uri} names no host to call")));
                };
                (uri.clone(), target, outbound.map(|o| o.trunk.caller_id.clone()), None)
            }
        };
        let unresolved =
            || TransferEnd::Target { status: 404, reason: format!("the person's host {host} does not resolve") };
        let peer = match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host.as_str(), port))).await {
            Ok(Ok(mut addresses)) => addresses.next().ok_or_else(unresolved)?,
            _ => return Err(unresolved()),
        };
        let (reply, answer) = oneshot::channel();
        let call_id = format!("{}@switchboard", uuid::Uuid::new_v4().simple());
        tracing::info!(call = %call.call_id, person_leg = %call_id, %uri, %peer, "dialling the person");
        let (transport, tls) = over;
        let request = DialRequest { call_id, uri, peer, caller_id, auth, ring_timeout, transport, host, tls, reply };
        let unavailable = |reason: String| TransferEnd::Target { status: 503, reason };
        if call.commands.send(Command::Dial(request)).await.is_err() {
            return Err(unavailable("the SIP task is gone".to_owned()));
        }
        match answer.await {
            Ok(Ok(leg)) => Ok(leg),
            Ok(Err(why)) => Err(unavailable(why)),
            Err(_) => Err(unavailable("the SIP task dropped the request".to_owned())),
        }
    }

    /// Relays media between the caller's leg (its media session with the agent, `caller`)
    /// and the person's leg until either side hangs up (see the module docs).
    pub(super) async fn bridged(&mut self, caller: MediaSession, leg: PersonLeg, media: Negotiated) -> End {
        let call = self;
        let PersonLeg { call_id: leg_id, ports: leg_ports, events: mut leg_events, peer } = leg;
        let settings = call.settings.clone();
        let person = MediaSession::new(settings.media, media, fastrand::u32(..), fastrand::u16(..), fastrand::u32(..));
        let mut bridge = MediaBridge::new(Instant::now(), caller, call.incoming.source.ip(), person, peer.ip());
        tracing::info!(call = %call.call_id, person_leg = %leg_id, "the caller and the person are bridged");
        // The media clock keeps to real time: ticks missed on a busy edge fire at once.
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(FRAME_MS)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut report = tokio::time::interval(Duration::from_secs(5));
        let cname = format!("switchboard-sip@{}", call.incoming.source.ip());
        let (mut caller_rtp, mut caller_rtcp) = (vec![0u8; 2048], vec![0u8; 2048]);
        let (mut person_rtp, mut person_rtcp) = (vec![0u8; 2048], vec![0u8; 2048]);
        let ended = loop {
            tokio::select! {
                event = call.events.recv() => match event {
                    Some(CallEvent::Established(m) | CallEvent::MediaChanged(m)) => bridge.update(Leg::Caller, m),
                    Some(CallEvent::Digit(key)) => bridge.press(Leg::Caller, key),
                    Some(CallEvent::Ended(_)) | None => break Some(Leg::Caller),
                    Some(_) => {}
                },
                event = next_event(&mut leg_events) => match event {
                    CallEvent::Established(m) | CallEvent::MediaChanged(m) => bridge.update(Leg::Person, m),
                    CallEvent::Digit(key) => bridge.press(Leg::Person, key),
                    CallEvent::Ended(_) => break Some(Leg::Person),
                    _ => {}
                },
                received = call.ports.rtp.recv_from(&mut caller_rtp) => if let Ok((n, from)) = received {
                    bridge.receive(Instant::now(), Leg::Caller, from, &caller_rtp[..n]);
                },
                received = call.ports.rtcp.recv_from(&mut caller_rtcp) => if let Ok((n, from)) = received {
                    bridge.receive_rtcp(Instant::now(), Leg::Caller, from, &caller_rtcp[..n]);
                },
                received = leg_ports.rtp.recv_from(&mut person_rtp) => if let Ok((n, from)) = received {
                    bridge.receive(Instant::now(), Leg::Person, from, &person_rtp[..n]);
                },
                received = leg_ports.rtcp.recv_from(&mut person_rtcp) => if let Ok((n, from)) = received {
                    bridge.receive_rtcp(Instant::now(), Leg::Person, from, &person_rtcp[..n]);
                },
                _ = tick.tick() => {
                    for (to_leg, to, packet) in bridge.tick() {
                        let socket = if to_leg == Leg::Caller { &call.ports.rtp } else { &leg_ports.rtp };
                        let _ = socket.send_to(&packet, to).await;
                    }
                    if let Some(silent) = bridge.silent(Instant::now(), settings.timeout) {
                        tracing::info!(call = %call.call_id, leg = ?silent, "no RTP on a bridged leg for the media timeout");
                        break None;
                    }
                },
                _ = report.tick() => {
                    for side in [Leg::Caller, Leg::Person] {
                        if let Some(counts) = bridge.take_srtp_counts(side) {
                            call.metrics.srtp(&counts);
                        }
                    }
                    let wall = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                    for (to_leg, socket) in [(Leg::Caller, &call.ports.rtcp), (Leg::Person, &leg_ports.rtcp)] {
                        if let Some((to, packet)) = bridge.report(to_leg, Instant::now(), wall, &cname) {
                            let _ = socket.send_to(&packet, to).await;
                        }
                    }
                },
                () = call.shutdown.cancelled() => break None,
            }
        };
        for side in [Leg::Caller, Leg::Person] {
            if let Some(counts) = bridge.take_srtp_counts(side) {
                call.metrics.srtp(&counts);
            }
        }
        // BYE to whoever is still there.
        let (caller_hangs_up, person_hangs_up) = match ended {
            Some(Leg::Caller) => (false, true),
            Some(Leg::Person) => (true, false),
            None => (true, true),
        };
        if caller_hangs_up {
            let _ = call.commands.send(Command::HangUp { call_id: call.call_id.clone() }).await;
        }
        if person_hangs_up {
            let _ = call.commands.send(Command::HangUp { call_id: leg_id.clone() }).await;
        }
        let (to_person, to_caller) = (bridge.counts(Leg::Caller), bridge.counts(Leg::Person));
        tracing::info!(
            call = %call.call_id,
            person_leg = %leg_id,
            caller_frames = to_person.relayed,
            person_frames = to_caller.relayed,
            keys = to_person.keys + to_caller.keys,
            keys_dropped = to_person.keys_dropped + to_caller.keys_dropped,
            dropped_bytes = to_person.dropped + to_caller.dropped,
            "bridge ended"
        );
        End::Bridged(match ended {
            Some(Leg::Caller) => crate::end::BRIDGE_CALLER_HUNG_UP,
            Some(Leg::Person) => crate::end::BRIDGE_PERSON_HUNG_UP,
            None if call.shutdown.is_cancelled() => "the edge is shutting down",
            None => "no RTP on a leg for the media timeout",
        })
    }
}
