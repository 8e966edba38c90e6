//! Two real WebRTC stacks in one process, no sockets: a browser-like client (a full-ICE
//! `str0m::Rtc` that offers Opus audio and a data channel) and a [`Call`], exchanging
//! datagrams through a simulated network (delay, jitter that reorders, loss) on a simulated
//! clock stepped a millisecond at a time.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::channel::ChannelId;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use switchboard_webrtc::{Call, CallConfig, CallEvent, Offer};

pub const CLIENT: &str = "192.0.2.10:40000";
pub const SERVER: &str = "192.0.2.1:3478";

pub fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// A datagram on its way.
struct InFlight {
    at: Instant,
    to_server: bool,
    source: SocketAddr,
    destination: SocketAddr,
    contents: Vec<u8>,
}

/// The network between the two: a fixed delay, uniform jitter (which reorders), loss.
pub struct Net {
    pub delay: Duration,
    pub jitter: Duration,
    pub loss: f64,
    /// Drops everything, both ways (a network gone).
    pub down: bool,
    /// The next this many RTP packets from the client are lost (a burst of loss).
    pub drop_rtp: usize,
    rng: fastrand::Rng,
    flight: Vec<InFlight>,
}

/// The client side: a full-ICE str0m peer.
pub struct Client {
    pub rtc: Rtc,
    pub mid: Mid,
    pub channel: ChannelId,
    pub events: Vec<(Instant, Event)>,
    timeout: Instant,
    pub addr: SocketAddr,
}

/// Both peers, the network and the clock.
pub struct Harness {
    pub start: Instant,
    pub now: Instant,
    pub client: Client,
    pub call: Call,
    pub call_events: Vec<(Instant, CallEvent)>,
    pub net: Net,
    pub answer: String,
    /// Frames the client has sent: its RTP clock runs on across [`Harness::client_speaks`].
    pub client_frames: u64,
}

/// A client offering Opus audio (sendrecv) and a data channel: its offer and pending state.
pub fn client(
    now: Instant,
    configure: impl FnOnce(str0m::RtcConfig) -> str0m::RtcConfig,
) -> (Rtc, Mid, ChannelId, String, SdpPendingOffer) {
    let mut rtc = configure(Rtc::builder()).build(now);
    rtc.add_local_candidate(Candidate::host(addr(CLIENT), "udp").unwrap());
    let mut change = rtc.sdp_api();
    let mid = change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    let channel = change.add_channel("session".into());
    let (offer, pending) = change.apply().unwrap();
    (rtc, mid, channel, offer.to_sdp_string(), pending)
}

impl Harness {
    /// A call set up from the client's offer with `config` (the server's UDP address added).
    pub fn new(mut config: CallConfig) -> Self {
        Self::with_offer(&mut config, |offer| offer)
    }

    /// As [`Harness::new`], the offer changed by `munge` on its way.
    pub fn with_offer(config: &mut CallConfig, munge: impl FnOnce(String) -> String) -> Self {
        let start = Instant::now();
        let (mut rtc, mid, channel, offer, pending) = client(start, |c| c);
        config.udp = vec![addr(SERVER)];
        let offer = Offer::parse(munge(offer).as_bytes(), config.rules).unwrap();
        let (call, answer) = Call::accept(offer, config.clone(), start).unwrap();
        rtc.sdp_api().accept_answer(pending, SdpAnswer::from_sdp_string(&answer).unwrap()).unwrap();
        let client = Client { rtc, mid, channel, events: Vec::new(), timeout: start, addr: addr(CLIENT) };
        let net = Net {
            delay: Duration::from_millis(10),
            jitter: Duration::ZERO,
            loss: 0.0,
            down: false,
            drop_rtp: 0,
            rng: fastrand::Rng::with_seed(47),
            flight: Vec::new(),
        };
        Self { start, now: start, client, call, call_events: Vec::new(), net, answer, client_frames: 0 }
    }

    /// Runs the clock forward by `duration`, a millisecond at a time.
    pub fn run(&mut self, duration: Duration) {
        let end = self.now + duration;
        while self.now < end {
            self.now += Duration::from_millis(1);
            self.tick();
        }
    }

    /// Runs until `done` holds (checked every millisecond), at most `limit`; whether it did.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            self.now += Duration::from_millis(1);
            self.tick();
        }
        done(self)
    }

    /// Connected, with the data channel open on both sides.
    pub fn connect(&mut self) {
        let ok = self.run_until(Duration::from_secs(5), |h| {
            h.call_events.iter().any(|(_, e)| matches!(e, CallEvent::ChannelOpen))
                && h.client.events.iter().any(|(_, e)| matches!(e, Event::ChannelOpen(..)))
        });
        assert!(ok, "connected within 5 s: {:?}", self.call_events);
    }

    fn tick(&mut self) {
        let now = self.now;
        // Deliver what has arrived.
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.net.flight).into_iter().partition(|p| p.at <= now);
        self.net.flight = later;
        for packet in due {
            if packet.to_server {
                self.call.handle_datagram(now, Protocol::Udp, packet.source, packet.destination, &packet.contents);
            } else {
                let input = Input::Receive(
                    now,
                    Receive {
                        proto: Protocol::Udp,
                        source: packet.source,
                        destination: packet.destination,
                        contents: packet.contents.as_slice().try_into().unwrap(),
                    },
                );
                let _ = self.client.rtc.handle_input(input);
            }
        }
        if self.call.poll_timeout().is_some_and(|t| t <= now) {
            self.call.handle_timeout(now);
        }
        if self.client.timeout <= now {
            let _ = self.client.rtc.handle_input(Input::Timeout(now));
        }
        self.drain();
    }

    /// Moves both peers' outputs onto the network and into their event lists.
    pub fn drain(&mut self) {
        let now = self.now;
        loop {
            match self.client.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.client.timeout = t;
                    break;
                }
                Ok(Output::Transmit(t)) => self.net.send(now, true, t.source, t.destination, t.contents.to_vec()),
                Ok(Output::Event(e)) => self.client.events.push((now, e)),
                Err(_) => break,
            }
        }
        while let Some(t) = self.call.poll_transmit() {
            self.net.send(now, false, t.source, t.destination, t.contents);
        }
        while let Some(event) = self.call.poll_event() {
            self.call_events.push((now, event));
        }
    }

    /// The client sends one text message on its data channel.
    pub fn client_sends(&mut self, text: &[u8], binary: bool) -> bool {
        let written = self.client.rtc.channel(self.client.channel).unwrap().write(binary, text).unwrap_or(false);
        self.drain();
        written
    }

    /// The texts the client received on its data channel.
    pub fn client_texts(&self) -> Vec<String> {
        self.client
            .events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::ChannelData(d) => Some(String::from_utf8_lossy(&d.data).into_owned()),
                _ => None,
            })
            .collect()
    }

    /// The texts the call received.
    pub fn call_texts(&self) -> Vec<String> {
        self.call_events
            .iter()
            .filter_map(|(_, e)| match e {
                CallEvent::Text(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    /// All PCM the call produced from the caller, and when each piece came.
    pub fn call_audio(&self) -> Vec<(Instant, Vec<i16>)> {
        self.call_events
            .iter()
            .filter_map(|(at, e)| match e {
                CallEvent::Audio(pcm) => Some((*at, pcm.clone())),
                _ => None,
            })
            .collect()
    }

    /// The Opus packets the client received, with their arrival and RTP time (48 kHz).
    pub fn client_packets(&self) -> Vec<(Instant, u64, Vec<u8>)> {
        self.client
            .events
            .iter()
            .filter_map(|(at, e)| match e {
                Event::MediaData(d) => Some((*at, d.time.rebase(Frequency::FORTY_EIGHT_KHZ).numer(), d.data.to_vec())),
                _ => None,
            })
            .collect()
    }

    /// The client sends `pcm` (48 kHz) as Opus, one 20 ms frame per 20 ms of clock.
    pub fn client_speaks(&mut self, pcm: &[i16]) {
        let mut encoder = opus::Encoder::new(48_000, opus::Channels::Mono, opus::Application::Voip).unwrap();
        encoder.set_inband_fec(true).unwrap();
        encoder.set_packet_loss_perc(10).unwrap();
        let pt = self.client_opus_pt();
        for frame in pcm.chunks_exact(960) {
            let packet = encoder.encode_vec(frame, 1500).unwrap();
            let time = MediaTime::new(self.client_frames * 960, Frequency::FORTY_EIGHT_KHZ);
            self.client_frames += 1;
            let now = self.now;
            self.client.rtc.writer(self.client.mid).unwrap().write(pt, now, time, packet).unwrap();
            self.drain();
            self.run(Duration::from_millis(20));
        }
    }

    fn client_opus_pt(&mut self) -> str0m::media::Pt {
        let writer = self.client.rtc.writer(self.client.mid).unwrap();
        writer.payload_params().find(|p| p.spec().codec == Codec::Opus).unwrap().pt()
    }
}

impl Net {
    fn send(&mut self, now: Instant, to_server: bool, source: SocketAddr, destination: SocketAddr, contents: Vec<u8>) {
        if self.down || (self.loss > 0.0 && self.rng.f64() < self.loss) {
            return;
        }
        // RTP (RFC 7983: 128-191), not RTCP (payload types 200-206 in the second byte).
        let rtp = contents.first().is_some_and(|b| (128..192).contains(b))
            && contents.get(1).is_some_and(|b| !(200..=206).contains(b));
        if to_server && rtp && self.drop_rtp > 0 {
            self.drop_rtp -= 1;
            return;
        }
        let jitter = self.jitter.mul_f64(self.rng.f64());
        self.flight.push(InFlight { at: now + self.delay + jitter, to_server, source, destination, contents });
    }
}

/// `seconds` of a `hz` sine at `rate`.
pub fn tone(hz: f64, rate: u32, seconds: f64) -> Vec<i16> {
    let n = (f64::from(rate) * seconds) as usize;
    (0..n).map(|i| ((2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin() * 16_000.0) as i16).collect()
}

/// The frequency of a tone from its zero crossings.
pub fn pitch(samples: &[i16], rate: u32) -> f64 {
    let crossings = samples.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (samples.len() as f64 / f64::from(rate))
}
