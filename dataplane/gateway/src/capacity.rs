//! Capacity: the model provider's quota of live streams, shared fairly across the gateways
//! and the tenants of a cluster — its own crate, `switchboard-capacity` (the pools, the
//! fair-share policy, the queue, leases, region fallback, the store and the metrics),
//! under the path it always had. What the gateway adds is the socket side ([`admit`]): a
//! new session's admission performed on its client's socket.

mod wait;

pub use switchboard_capacity::{
    Admission, Capacity, CapacityConfig, CapacityError, Placed, Slot, Ticket, Waiting, hold_message, metrics, policy,
    store,
};
pub use wait::admit;
