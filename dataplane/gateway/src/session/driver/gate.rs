//! A socket polled only when it has something: the relay waits on both of a session's
//! sockets (and its timers and signals) at once, and a `select!` polls every branch at
//! every wake-up. Polling a WebSocket that has nothing is not free — a read is tried, and
//! the socket registers the waker again — and in a voice call one socket has a frame at
//! each wake-up while the other has none. A [`Gate`]
//! gives the stream a waker of its own and polls it again only once that waker was woken
//! (or its last poll gave an item: more may be buffered), as `FuturesUnordered` does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use futures_util::{Stream, StreamExt};

/// Whether a stream's last `Pending` was woken, and the relay task to wake then.
#[derive(Default)]
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Polls one stream (every poll of it must go through the same gate).
pub(super) struct Gate {
    flag: Arc<Flag>,
    waker: Waker,
}

impl Gate {
    /// A gate for a stream not polled yet.
    pub(super) fn new() -> Self {
        let flag = Arc::new(Flag { woken: AtomicBool::new(true), task: AtomicWaker::new() });
        Self { waker: Waker::from(flag.clone()), flag }
    }

    /// The stream's next item, polling it only when it may have one.
    pub(super) async fn next<S: Stream + Unpin>(&self, stream: &mut S) -> Option<S::Item> {
        std::future::poll_fn(|cx| self.poll_next(stream, cx)).await
    }

    fn poll_next<S: Stream + Unpin>(&self, stream: &mut S, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.flag.task.register(cx.waker());
        if !self.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        match stream.poll_next_unpin(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(item) => {
                // More may wait in the stream's buffer, with no wake-up to tell.
                self.flag.woken.store(true, Ordering::Release);
                Poll::Ready(item)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use futures_util::stream;
    use tokio::sync::mpsc;

    use super::*;

    /// The channel's messages as a stream.
    fn stream_of<T>(mut rx: mpsc::UnboundedReceiver<T>) -> impl Stream<Item = T> + Unpin {
        stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    /// A stream that counts its polls.
    struct Counted<S> {
        inner: S,
        polls: Arc<AtomicUsize>,
    }

    impl<S: Stream + Unpin> Stream for Counted<S> {
        type Item = S::Item;
        fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.inner.poll_next_unpin(cx)
        }
    }

    #[tokio::test]
    async fn buffered_items_come_without_a_wake_up_and_an_idle_stream_is_not_polled_again() {
        let polls = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::unbounded_channel();
        for i in 0..3 {
            tx.send(i).expect("open");
        }
        let mut stream = Counted { inner: stream_of(rx), polls: polls.clone() };
        let gate = Gate::new();
        for i in 0..3 {
            assert_eq!(gate.next(&mut stream).await, Some(i));
        }
        // Nothing left: one poll to learn it, then none until the stream wakes the gate.
        let mut idle = std::pin::pin!(gate.next(&mut stream));
        for _ in 0..5 {
            assert!(futures_util::poll!(idle.as_mut()).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 4);
        tx.send(7).expect("open");
        let item = tokio::time::timeout(Duration::from_secs(5), idle).await.expect("woken");
        assert_eq!(item, Some(7));
        assert_eq!(polls.load(Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn a_task_waiting_on_the_gate_is_woken_by_the_stream_and_sees_its_end() {
        let (tx, rx) = mpsc::unbounded_channel::<u32>();
        let waiter = tokio::spawn(async move {
            let mut stream = stream_of(rx);
            let gate = Gate::new();
            let mut seen = Vec::new();
            while let Some(item) = gate.next(&mut stream).await {
                seen.push(item);
            }
            seen
        });
        for i in 0..100 {
            tx.send(i).expect("open");
            if i % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        drop(tx);
        let seen = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("ends").expect("no panic");
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn an_ended_stream_reads_as_ended() {
        let gate = Gate::new();
        let mut empty = stream::empty::<u8>();
        assert_eq!(gate.next(&mut empty).await, None);
    }
}
