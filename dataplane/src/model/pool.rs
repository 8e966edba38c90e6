//! A round-robin pool of text models: several independent clients of one provider, so
//! many concurrent calls spread over several HTTP/2 connections instead of queueing for
//! the stream limit of one (Bedrock, like most HTTP/2 servers, caps concurrent streams per
//! connection).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{ModelRequest, ModelStream, TextModel};

/// Calls go to the pool's models in turn.
#[derive(Debug)]
pub struct RoundRobin {
    models: Vec<Arc<dyn TextModel>>,
    next: AtomicUsize,
}

impl RoundRobin {
    /// A pool of `models`; `None` when it is empty.
    pub fn new(models: Vec<Arc<dyn TextModel>>) -> Option<Self> {
        (!models.is_empty()).then(|| Self { models, next: AtomicUsize::new(0) })
    }

    /// How many models the pool holds.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Never true: an empty pool cannot be built.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

impl TextModel for RoundRobin {
    fn stream(&self, request: &ModelRequest) -> ModelStream {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.models.len();
        self.models[index].stream(request)
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
    use super::clients_for;

    #[test]
    fn client_counts() {
        assert_eq!(clients_for(1, 100, 16), 1);
        assert_eq!(clients_for(200, 100, 16), 2);
        assert_eq!(clients_for(1000, 100, 16), 10);
        assert_eq!(clients_for(100000, 100, 16), 16);
    }
}
