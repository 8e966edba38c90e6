//! Switchboard's data plane: the I/O-free agent core ([`core`]), the session protocol
//! ([`protocol`]), streaming model clients ([`model`]), tool executors ([`tools`]), the
//! runtime server and local mode ([`runtime`], [`local`]) and the local Bedrock Runtime
//! simulator ([`sim`]).

pub mod core;
pub mod local;
pub mod model;
pub mod net;
pub mod protocol;
pub mod runtime;
pub mod sim;
pub mod sonic;
pub mod tools;
