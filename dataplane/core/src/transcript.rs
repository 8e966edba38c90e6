//! Transcript entries and who said a thing: the types live in the session protocol crate
//! ([`switchboard_protocol::transcript`]); the core produces them, an adapter writes them.

pub use switchboard_protocol::transcript::*;
