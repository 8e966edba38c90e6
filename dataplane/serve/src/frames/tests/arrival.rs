//! When a message could have arrived: after the read that found the socket empty, or with
//! what was already waiting.

use std::time::Instant;

use tokio::io::AsyncWriteExt;

use super::{KEY, frame, next, server};
use crate::bucket::Arrival;
use crate::frames::Message;

#[tokio::test]
async fn a_message_waited_for_arrived_after_the_empty_read_and_one_read_behind_was_queued() {
    let (mut conn, mut peer) = server();
    // Three frames waiting before the first read: the reader is behind on all of them.
    for n in 0..3u8 {
        peer.write_all(&frame(0x82, &[n], Some(KEY))).await.expect("written");
    }
    for n in 0..3u8 {
        assert!(matches!(next(&mut conn).await, Some(Ok(Message::Binary(b))) if b[..] == [n]));
        assert_eq!(conn.arrival(), Arrival::Queued, "frame {n} was already there");
    }
    // Now the socket is empty: the next read waits, and the frame comes after that instant.
    let before = Instant::now();
    let reading = tokio::spawn(async move {
        let message = next(&mut conn).await;
        (message, conn.arrival())
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let written = Instant::now();
    peer.write_all(&frame(0x82, &[9], Some(KEY))).await.expect("written");
    let (message, arrival) = reading.await.expect("read");
    assert!(matches!(message, Some(Ok(Message::Binary(b))) if b[..] == [9]));
    let Arrival::After(at) = arrival else { panic!("waited for: {arrival:?}") };
    assert!(before <= at && at <= written, "the empty read came before the frame was sent");
}
