//! Precise waits for the simulator's scripted timing.
//!
//! tokio's timer wheel ticks every millisecond and rounds each deadline up to a tick, and
//! the reactor's `epoll_wait` timeout is whole milliseconds too: a wait ended about 1 ms
//! late (median, measured on the benchmark machine). That lateness is the simulator's, yet
//! a client measuring its time to first token saw it as its own.
//!
//! On Linux a [`Pacer`] arms a `timerfd` (nanoseconds, no timer slack) registered with
//! tokio's reactor, so the waiting task's own worker wakes straight from the timer: 37 us
//! late (median) against 117 us for a thread that sleeps until the nearest deadline and
//! hands each one to the waiting task (measured side by side; that thread is still the
//! fallback where there is no `timerfd`). A deadline already past completes at once,
//! without a wait.

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

struct PacingThread {
    queue: Mutex<Queue>,
    changed: Condvar,
}

fn pacing_thread() -> Option<&'static PacingThread> {
    static PACER: OnceLock<Option<&'static PacingThread>> = OnceLock::new();
    *PACER.get_or_init(|| {
        let pacer: &'static PacingThread =
            Box::leak(Box::new(PacingThread { queue: Mutex::new(Queue::default()), changed: Condvar::new() }));
        std::thread::Builder::new()
            .name("sim-pacer".into())
            .spawn(move || pacer.run())
            .map_err(|e| tracing::warn!("cannot start the simulator's pacing thread ({e}); using tokio's timer"))
            .ok()
            .map(|_| pacer)
    })
}

impl PacingThread {
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

/// Waits until `deadline`, to within the operating system's timer precision. Makes a timer
/// for this one wait; a stream of waits keeps one [`Pacer`] instead.
pub async fn sleep_until(deadline: tokio::time::Instant) {
    Pacer::new().sleep_until(deadline).await;
}

/// Successive precise waits of one paced stream; its timer (a file descriptor on Linux) is
/// made at the first wait and re-armed for each one after.
#[derive(Debug, Default)]
pub struct Pacer {
    clock: Clock,
}

#[derive(Debug, Default)]
enum Clock {
    /// No wait yet.
    #[default]
    Unmade,
    #[cfg(target_os = "linux")]
    Timerfd(timerfd::Timer),
    /// No timerfd here, or making or waiting on one failed (said once per pacer).
    Thread,
}

impl Pacer {
    /// A pacer whose timer is made at its first wait.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until `deadline`, to within the operating system's timer precision. Safe to
    /// cancel: a later wait re-arms the timer and ignores an expiry it did not ask for.
    pub async fn sleep_until(&mut self, deadline: tokio::time::Instant) {
        let deadline = deadline.into_std();
        let now = Instant::now();
        if deadline <= now {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            if matches!(self.clock, Clock::Unmade) {
                self.clock = match timerfd::Timer::new() {
                    Ok(timer) => Clock::Timerfd(timer),
                    Err(e) => {
                        tracing::warn!("cannot make a timerfd ({e}); pacing this stream with a thread instead");
                        Clock::Thread
                    }
                };
            }
            if let Clock::Timerfd(timer) = &self.clock {
                match timer.wait(deadline - now).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!("the timerfd failed ({e}); pacing this stream with a thread instead");
                        self.clock = Clock::Thread;
                    }
                }
            }
        }
        self.clock = Clock::Thread;
        match pacing_thread() {
            Some(pacer) => {
                let _ = pacer.add(deadline).await;
            }
            None => tokio::time::sleep_until(deadline.into()).await,
        }
    }
}

#[cfg(target_os = "linux")]
mod timerfd {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::time::Duration;

    use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A non-blocking `CLOCK_MONOTONIC` timerfd in tokio's reactor.
    #[derive(Debug)]
    pub(super) struct Timer(AsyncFd<OwnedFd>);

    impl Timer {
        pub(super) fn new() -> io::Result<Self> {
            let fd = rustix::time::timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?;
            // tokio deprecates the safe constructor because a type's `as_raw_fd` may change
            // or close the descriptor under the reactor; an `OwnedFd` owns one descriptor
            // for its whole life, which is what the (unsafe) replacement asks for.
            #[expect(deprecated, reason = "sound for an OwnedFd; unsafe code is forbidden here")]
            let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
            Ok(Self(fd))
        }

        /// Arms the timer to expire `after` from now and waits for the expiry.
        pub(super) async fn wait(&self, after: Duration) -> io::Result<()> {
            // A zero value would disarm the timer instead.
            let after = after.max(Duration::from_nanos(1));
            let value = Timespec {
                tv_sec: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(after.subsec_nanos()),
            };
            let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
            // Re-arming also clears an expiry a cancelled wait left unread.
            rustix::time::timerfd_settime(
                self.0.get_ref(),
                TimerfdTimerFlags::empty(),
                &Itimerspec { it_interval: zero, it_value: value },
            )?;
            loop {
                let mut ready = self.0.readable().await?;
                let mut expirations = [0u8; 8];
                match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut expirations)?)) {
                    Ok(Ok(_)) => {
                        // Read: the timer is not readable again until it is re-armed.
                        ready.clear_ready();
                        return Ok(());
                    }
                    Ok(Err(e)) => return Err(e),
                    // Readiness left from an expiry before the re-arm: wait on.
                    Err(_would_block) => continue,
                }
            }
        }
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

    #[tokio::test]
    async fn one_pacer_waits_for_each_deadline_even_after_a_cancelled_wait() {
        use futures_util::FutureExt;
        let mut pacer = Pacer::new();
        let start = tokio::time::Instant::now();
        {
            // A wait that arms the timer, sees its expiry reach the reactor, and is dropped
            // unread: the readiness it leaves must not end the next wait.
            // The deadline leaves room for a descheduled test thread on a busy machine
            // (1 ms once failed in CI): only the order of events matters here.
            let mut wait = std::pin::pin!(pacer.sleep_until(start + Duration::from_millis(100)));
            assert!((&mut wait).now_or_never().is_none(), "ended before its deadline");
            std::thread::sleep(Duration::from_millis(110));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        #[cfg(target_os = "linux")]
        assert!(matches!(pacer.clock, Clock::Timerfd(_)), "paced with the fallback thread instead of a timerfd");
        for ms in [200, 201, 215] {
            let deadline = Duration::from_millis(ms);
            pacer.sleep_until(start + deadline).await;
            assert!(start.elapsed() >= deadline, "{ms} ms: woke at {:?}", start.elapsed());
        }
    }
}
