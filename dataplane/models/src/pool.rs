//! A pool of text models: several independent clients of one provider, so many
//! concurrent calls spread over several HTTP/2 connections instead of queueing for the
//! stream limit of one (Bedrock, like most HTTP/2 servers, caps concurrent streams per
//! connection).
//!
//! Calls fill the first client with room (fewer than `streams_per_client` calls in
//! flight) before spilling to the next: at low load every call goes over one warm
//! connection. A round robin over the clients instead sent each call to a client that had
//! been idle for `n - 1` calls, so each of a quiet agent's first `n` calls paid a TCP and
//! TLS handshake (about 3 ms of the first-token latency on this machine).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;

use super::{ModelRequest, ModelStream, TextModel};

/// Calls go to the first model with room; when every one is full, to the least loaded.
#[derive(Debug)]
pub struct ClientPool {
    models: Vec<Arc<dyn TextModel>>,
    in_flight: Arc<[AtomicUsize]>,
    streams_per_client: usize,
}

impl ClientPool {
    /// A pool of `models`, each meant to carry at most `streams_per_client` calls at once;
    /// `None` when `models` is empty.
    pub fn new(models: Vec<Arc<dyn TextModel>>, streams_per_client: usize) -> Option<Self> {
        let in_flight = models.iter().map(|_| AtomicUsize::new(0)).collect();
        (!models.is_empty()).then(|| Self { models, in_flight, streams_per_client: streams_per_client.max(1) })
    }

    /// How many models the pool holds.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Never true: an empty pool cannot be built.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Calls in flight on each model.
    pub fn in_flight(&self) -> Vec<usize> {
        self.in_flight.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    fn pick(&self) -> usize {
        let mut least = (0, usize::MAX);
        for (index, count) in self.in_flight.iter().enumerate() {
            let load = count.load(Ordering::Relaxed);
            if load < self.streams_per_client {
                return index;
            }
            if load < least.1 {
                least = (index, load);
            }
        }
        least.0
    }
}

/// Counts a call in flight on one model until the call's stream is dropped.
struct InFlight {
    counts: Arc<[AtomicUsize]>,
    index: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.counts[self.index].fetch_sub(1, Ordering::Relaxed);
    }
}

impl TextModel for ClientPool {
    fn stream(&self, request: &ModelRequest) -> ModelStream {
        let index = self.pick();
        self.in_flight[index].fetch_add(1, Ordering::Relaxed);
        let guard = InFlight { counts: self.in_flight.clone(), index };
        let inner = self.models[index].stream(request);
        Box::pin(inner.map(move |item| {
            let _counted = &guard;
            item
        }))
    }

    fn provider(&self) -> &'static str {
        self.models[0].provider()
    }
}

/// Clients needed so that `sessions` concurrent calls fit in `streams_per_connection`
/// streams each, at most `max`.
pub fn clients_for(sessions: usize, streams_per_connection: usize, max: usize) -> usize {
    sessions.div_ceil(streams_per_connection.max(1)).clamp(1, max.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ModelEvent, StopReason};

    #[derive(Debug)]
    struct Fixed;

    impl TextModel for Fixed {
        fn stream(&self, _: &ModelRequest) -> ModelStream {
            Box::pin(futures_util::stream::iter([Ok(ModelEvent::Stop(StopReason::EndTurn))]))
        }

        fn provider(&self) -> &'static str {
            "fixed"
        }
    }

    #[test]
    fn client_counts() {
        assert_eq!(clients_for(1, 100, 16), 1);
        assert_eq!(clients_for(200, 100, 16), 2);
        assert_eq!(clients_for(1000, 100, 16), 10);
        assert_eq!(clients_for(100000, 100, 16), 16);
    }

    #[test]
    fn calls_fill_the_first_client_then_spill_then_go_to_the_least_loaded() {
        let models: Vec<Arc<dyn TextModel>> = (0..3).map(|_| Arc::new(Fixed) as Arc<dyn TextModel>).collect();
        let pool = ClientPool::new(models, 2).expect("not empty");
        let request = ModelRequest::new("m", Vec::new());
        // Sequential calls, each finished before the next: all on the first client.
        for _ in 0..5 {
            drop(pool.stream(&request));
        }
        assert_eq!(pool.in_flight(), [0, 0, 0]);
        let held: Vec<_> = (0..7).map(|_| pool.stream(&request)).collect();
        assert_eq!(pool.in_flight(), [3, 2, 2], "two per client, then the least loaded");
        drop(held);
        assert_eq!(pool.in_flight(), [0, 0, 0], "dropping a call's stream ends it");
        assert!(ClientPool::new(Vec::new(), 2).is_none());
    }
}
