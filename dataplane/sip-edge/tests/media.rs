//! A call's media through the real edge on real sockets: a phone (UDP sockets sending a
//! real INVITE and 20 ms PCMU RTP) whose network loses, reorders and repeats packets, and a
//! stand-in gateway (a WebSocket server that answers `session_start` and notes each frame).
//! The caller's audio reaches the gateway in order, each frame once, a lost one concealed
//! in its place, without a playout delay; a reply that comes in one burst reaches the phone
//! paced at the media clock.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_sip::media::rtp::{self, RtpSender};
use switchboard_sip_edge::{Edge, GatewayConfig};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// A stand-in gateway on `listener`: answers one session's `session_start`, sends `reply`
/// at once as binary frames, and hands each frame the edge sends on, with when it came.
async fn gateway(listener: TcpListener, reply: Vec<Vec<u8>>, heard: mpsc::UnboundedSender<(Instant, Vec<u8>)>) {
    let Ok((stream, _)) = listener.accept().await else { return };
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
    let Some(Ok(Message::Text(_))) = ws.next().await else { return };
    let start = r#"{"type":"bidi_connection_start","session_id":"s1","agent":"triage","mode":"voice","model":"sim"}"#;
    if ws.send(Message::text(start)).await.is_err() {
        return;
    }
    for frame in reply {
        let _ = ws.feed(Message::Binary(frame.into())).await;
    }
    let _ = ws.flush().await;
    while let Some(Ok(message)) = ws.next().await {
        if let Message::Binary(audio) = message {
            let _ = heard.send((Instant::now(), audio.to_vec()));
        }
    }
}

/// Calls the edge at `edge` from `sip`, offering PCMU on `rtp`'s port; returns where the edge
/// takes RTP.
async fn call(sip: &UdpSocket, rtp: &UdpSocket, edge: SocketAddr) -> SocketAddr {
    let (sip_port, rtp_port) = (sip.local_addr().expect("addr").port(), rtp.local_addr().expect("addr").port());
    let sdp = format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {rtp_port} RTP/AVP 0\r\n\
         a=rtpmap:0 PCMU/8000\r\na=ptime:20\r\na=sendrecv\r\n"
    );
    let head = |method: &str, to_tag: &str, branch: &str| {
        format!(
            "{method} sip:triage@{edge} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{sip_port};branch=z9hG4bK{branch}\r\n\
             Contact: <sip:caller@127.0.0.1:{sip_port}>\r\nMax-Forwards: 70\r\nTo: <sip:triage@{edge}>{to_tag}\r\n\
             From: <sip:caller@127.0.0.1>;tag=f1\r\nCall-ID: media-test\r\nCSeq: 1 {method}\r\n"
        )
    };
    let invite = format!(
        "{}Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        head("INVITE", "", "i1"),
        sdp.len()
    );
    sip.send_to(invite.as_bytes(), edge).await.expect("INVITE");
    let mut buf = vec![0u8; 4096];
    let answer = loop {
        let (n, _) = tokio::time::timeout(Duration::from_secs(10), sip.recv_from(&mut buf))
            .await
            .expect("an answer in time")
            .expect("read");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if text.starts_with("SIP/2.0 200") {
            break text;
        }
        assert!(text.starts_with("SIP/2.0 1"), "the call is answered: {text}");
    };
    let tag = answer.lines().find(|l| l.starts_with("To:")).and_then(|l| l.split(";tag=").nth(1)).expect("a tag");
    let port: u16 = answer
        .lines()
        .find_map(|l| l.strip_prefix("m=audio "))
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .expect("the answer's m= line");
    let ack = format!("{}Content-Length: 0\r\n\r\n", head("ACK", &format!(";tag={}", tag.trim()), "a1"));
    sip.send_to(ack.as_bytes(), edge).await.expect("ACK");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Frame `n` of the caller's audio: a quiet pattern with `n` in its first bytes.
fn frame(n: u8) -> Vec<u8> {
    let mut frame: Vec<u8> = (0..160).map(|i| if i % 20 < 10 { 0x70 } else { 0xF0 }).collect();
    frame[..4].copy_from_slice(&[0xA5, n, n, 0x5A]);
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_audio_goes_through_loss_and_reordering_in_order_at_once_and_a_burst_comes_back_paced() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/v1/session", listener.local_addr().expect("addr"));
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    // The agent's reply: 25 frames (half a second) at once.
    let reply: Vec<Vec<u8>> = (0..25u8).map(|n| vec![0x20 + n; 160]).collect();
    tokio::spawn(gateway(listener, reply, heard_tx));
    let mut config = common::config("127.0.0.1:0".parse().expect("addr"), false, None);
    config.gateway =
        GatewayConfig { url, api_key: None, open_timeout: Duration::from_secs(5), resume_for: Duration::ZERO };
    let edge = Edge::bind(config).await.expect("the edge binds");
    let edge_addr = edge.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(edge.run(async move {
        let _ = stopped.await;
    }));

    let sip = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let phone_rtp = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let media = call(&sip, &phone_rtp, edge_addr).await;

    // The network: 40 frames, 20 ms apart; 7 lost; 12 and 13 swapped (13 first); 20 twice;
    // 30 and 31 lost together.
    let mut order: Vec<u8> = (0..40).filter(|n| ![7, 30, 31].contains(n)).collect();
    let twelve = order.iter().position(|n| *n == 12).expect("12");
    order.swap(twelve, twelve + 1);
    let twenty = order.iter().position(|n| *n == 20).expect("20");
    order.insert(twenty, 20);
    let mut sender = RtpSender::new(0x1234, 1000, 0);
    let packets: Vec<Vec<u8>> = (0..40u8).map(|n| sender.media(0, false, &frame(n), 160)).collect();
    let mut sent_at = [None; 40];
    let mut received: Vec<(Instant, Vec<u8>)> = Vec::new();
    let mut buf = [0u8; 2048];
    // The first packet a little after the ACK, as a phone's media starts.
    let start = Instant::now() + Duration::from_millis(200);
    for (slot, &n) in order.iter().enumerate() {
        let due = start + Duration::from_millis(20 * slot as u64);
        while Instant::now() < due {
            if let Ok(Ok((len, _))) =
                tokio::time::timeout(due.saturating_duration_since(Instant::now()), phone_rtp.recv_from(&mut buf)).await
            {
                received.push((Instant::now(), buf[..len].to_vec()));
            }
        }
        sent_at[n as usize].get_or_insert(Instant::now());
        phone_rtp.send_to(&packets[n as usize], media).await.expect("RTP");
    }
    let until = Instant::now() + Duration::from_millis(300);
    while let Ok(Ok((len, _))) =
        tokio::time::timeout(until.saturating_duration_since(Instant::now()), phone_rtp.recv_from(&mut buf)).await
    {
        received.push((Instant::now(), buf[..len].to_vec()));
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;

    // What the gateway heard: a frame per sequence number from the first to the last (the
    // lost ones concealed in their place), the frames that came in order, each at most twice
    // (a concealed frame repeats the one before it at first), none repeated out of order.
    let mut frames = Vec::new();
    while let Ok(got) = heard.try_recv() {
        frames.push(got);
    }
    assert_eq!(frames.len(), 40, "one frame for each of the 40 sequence numbers");
    let ids: Vec<Option<u8>> = frames.iter().map(|(_, f)| (f[0] == 0xA5 && f[3] == 0x5A).then_some(f[1])).collect();
    let mut delivered: Vec<u8> = ids.iter().flatten().copied().collect();
    delivered.dedup();
    let expected: Vec<u8> = (0..40).filter(|n| ![7, 30, 31].contains(n)).collect();
    assert_eq!(delivered, expected, "in order, 13 after 12 though it came first, 20 once");
    assert_eq!((ids[7], ids[30]), (Some(6), Some(29)), "a loss is concealed by the frame before it, at first");
    // No playout delay: an in-order frame reaches the gateway as it arrives.
    let mut delays: Vec<Duration> = frames
        .iter()
        .zip(&ids)
        .filter_map(|((at, _), id)| Some(at.saturating_duration_since(sent_at[usize::from((*id)?)]?)))
        .collect();
    delays.sort();
    let median = delays[delays.len() / 2];
    assert!(median < Duration::from_millis(30), "the median frame waited {median:?} (a 60 ms playout would show)");

    // The reply: 25 frames that came at once reach the phone as RTP one every 20 ms, after
    // the silence that went before them.
    let reply_at: Vec<Instant> = received
        .iter()
        .filter_map(|(at, packet)| {
            let p = rtp::parse(packet).ok()?;
            ((0x20..0x39).contains(&p.payload[0]) && p.payload.iter().all(|b| *b == p.payload[0])).then_some(*at)
        })
        .collect();
    assert_eq!(reply_at.len(), 25, "the whole reply reached the phone");
    let spread = reply_at[24] - reply_at[0];
    assert!(
        (Duration::from_millis(400)..Duration::from_millis(700)).contains(&spread),
        "25 frames over about 480 ms, not at once: {spread:?}"
    );
}
