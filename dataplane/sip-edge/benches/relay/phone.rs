//! The phones: each calls the edge with a real INVITE and SDP offer (retransmitted per RFC
//! 3261 Timer A), ACKs, sends one marked PCMU RTP packet every 20 ms and notes the echoes
//! that come back, then says BYE.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use crate::timing::{Path, Timings};

/// One phone: calls the edge, then sends a frame every 20 ms until `stop`, then BYE.
pub async fn phone(
    i: usize,
    edge: SocketAddr,
    received: Arc<AtomicU64>,
    timings: Arc<Timings>,
    stop: Instant,
) -> Result<(), String> {
    let sip = UdpSocket::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let rtp = UdpSocket::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let (sip_port, rtp_port) =
        (sip.local_addr().map_err(|e| e.to_string())?.port(), rtp.local_addr().map_err(|e| e.to_string())?.port());
    let sdp = format!(
        "v=0\r\no=- {i} 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {rtp_port} RTP/AVP 0 101\r\n\
         a=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=ptime:20\r\na=sendrecv\r\n"
    );
    let head = |method: &str, cseq: u32, to_tag: &str, branch: &str| {
        format!(
            "{method} sip:triage@{edge} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{sip_port};branch=z9hG4bK{branch}\r\n\
             Contact: <sip:caller@127.0.0.1:{sip_port}>\r\nMax-Forwards: 70\r\nTo: <sip:triage@{edge}>{to_tag}\r\n\
             From: <sip:caller{i}@127.0.0.1>;tag=f{i}\r\nCall-ID: bench-{i}\r\nCSeq: {cseq} {method}\r\n"
        )
    };
    let invite = format!(
        "{}Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        head("INVITE", 1, "", &format!("i{i}")),
        sdp.len()
    );
    // Calls arrive spread over time (5 ms apart), as they do.
    tokio::time::sleep(Duration::from_millis(5 * i as u64)).await;
    sip.send_to(invite.as_bytes(), edge).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let given_up = Instant::now() + Duration::from_secs(20);
    let mut resend = Duration::from_millis(500);
    let (tag, media) = loop {
        // RFC 3261 Timer A: the INVITE again, at doubling intervals, until an answer.
        let Ok(read) = tokio::time::timeout(resend, sip.recv_from(&mut buf)).await else {
            if Instant::now() > given_up {
                return Err(format!("call {i}: no answer"));
            }
            sip.send_to(invite.as_bytes(), edge).await.map_err(|e| e.to_string())?;
            resend = (resend * 2).min(Duration::from_secs(4));
            continue;
        };
        let (n, _) = read.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !text.starts_with("SIP/2.0 ") {
            // Another call's RTCP (sent to its RTP port + 1, which may be this socket).
            continue;
        }
        if text.starts_with("SIP/2.0 200") {
            let tag = text
                .lines()
                .find(|l| l.starts_with("To:"))
                .and_then(|l| l.split(";tag=").nth(1))
                .unwrap_or("")
                .trim()
                .to_owned();
            let port: u16 = text
                .lines()
                .find_map(|l| l.strip_prefix("m=audio "))
                .and_then(|r| r.split(' ').next()?.parse().ok())
                .ok_or("no m= line")?;
            break (tag, SocketAddr::from(([127, 0, 0, 1], port)));
        }
        if !text.starts_with("SIP/2.0 1") {
            return Err(format!("call {i}: {}", text.lines().next().unwrap_or_default()));
        }
    };
    let to_tag = format!(";tag={tag}");
    let ack = format!("{}Content-Length: 0\r\n\r\n", head("ACK", 1, &to_tag, &format!("a{i}")));
    sip.send_to(ack.as_bytes(), edge).await.map_err(|e| e.to_string())?;
    let mut sender = switchboard_sip::media::rtp::RtpSender::new(i as u32, 0, 0);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut rtp_buf = vec![0u8; 2048];
    while Instant::now() < stop {
        tokio::select! {
            _ = tick.tick() => {
                // A quiet 400 Hz-ish pattern (not silence, so nothing is special-cased) with
                // the frame's marker.
                let frame = timings.next_frame();
                let _ = rtp.send_to(&sender.media(0, false, &frame, 160), media).await;
            }
            got = rtp.recv_from(&mut rtp_buf) => {
                if let Ok((n, _)) = got {
                    received.fetch_add(1, Ordering::Relaxed);
                    // The RTP header is 12 bytes (no CSRCs or extensions from the edge).
                    timings.echoed(Path::Edge, rtp_buf.get(12..n).unwrap_or_default());
                }
            }
        }
    }
    let bye = format!("{}Content-Length: 0\r\n\r\n", head("BYE", 2, &to_tag, &format!("b{i}")));
    let _ = sip.send_to(bye.as_bytes(), edge).await;
    Ok(())
}
