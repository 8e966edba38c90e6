//! Precise waits for the simulator's scripted timing.
//!
//! tokio's timer wheel ticks every millisecond and rounds each deadline up to a tick, so a
//! delta planned at 103.5 ms left at 104–105 ms, and even a zero wait took up to a tick.
//! That lateness is the simulator's, yet a client measuring its time to first token saw it
//! as its own. Here one thread sleeps until the nearest deadline with the operating
//! system's high-resolution timers (tens of microseconds late) and completes the waiting
//! futures; a deadline already past completes at once, without a wait.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use tokio::sync::oneshot;

struct Waiting {
    at: Instant,
    seq: u64,
    done: oneshot::Sender<()>,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Waiting>>,
    seq: u64,
}

struct Pacer {
    queue: Mutex<Queue>,
    changed: Condvar,
}

fn pacer() -> Option<&'static Pacer> {
    static PACER: OnceLock<Option<&'static Pacer>> = OnceLock::new();
    *PACER.get_or_init(|| {
        let pacer: &'static Pacer =
            Box::leak(Box::new(Pacer { queue: Mutex::new(Queue::default()), changed: Condvar::new() }));
        std::thread::Builder::new()
            .name("sim-pacer".into())
            .spawn(move || pacer.run())
            .map_err(|e| tracing::warn!("cannot start the simulator's pacing thread ({e}); using tokio's timer"))
            .ok()
            .map(|_| pacer)
    })
}

impl Pacer {
    fn run(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = Instant::now();
            while queue.heap.peek().is_some_and(|Reverse(w)| w.at <= now) {
                if let Some(Reverse(waiting)) = queue.heap.pop() {
                    // The waiter may have gone (its request was cancelled): nothing to do.
                    let _ = waiting.done.send(());
                }
            }
            queue = match queue.heap.peek().map(|Reverse(w)| w.at) {
                Some(at) => self.changed.wait_timeout(queue, at - now).unwrap_or_else(PoisonError::into_inner).0,
                None => self.changed.wait(queue).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    fn add(&self, at: Instant) -> oneshot::Receiver<()> {
        let (done, receiver) = oneshot::channel();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.seq += 1;
        let seq = queue.seq;
        let earliest = queue.heap.peek().is_none_or(|Reverse(w)| at < w.at);
        queue.heap.push(Reverse(Waiting { at, seq, done }));
        drop(queue);
        if earliest {
            self.changed.notify_one();
        }
        receiver
    }
}

/// Waits until `deadline`, to within the operating system's timer precision.
pub async fn sleep_until(deadline: tokio::time::Instant) {
    let deadline = deadline.into_std();
    if deadline <= Instant::now() {
        return;
    }
    match pacer() {
        Some(pacer) => {
            let _ = pacer.add(deadline).await;
        }
        None => tokio::time::sleep_until(deadline.into()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waits_end_on_time_in_deadline_order() {
        let start = tokio::time::Instant::now();
        let late = tokio::spawn(async move {
            sleep_until(start + Duration::from_millis(30)).await;
            start.elapsed()
        });
        sleep_until(start + Duration::from_micros(10_500)).await;
        let early = start.elapsed();
        assert!(early >= Duration::from_micros(10_500), "{early:?}");
        let late = late.await.expect("joins");
        assert!(late >= Duration::from_millis(30), "{late:?}");
        // A past deadline does not wait.
        let before = Instant::now();
        sleep_until(start).await;
        assert!(before.elapsed() < Duration::from_millis(1));
    }
}
