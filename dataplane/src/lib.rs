//! Switchboard's data plane: streaming model clients ([`model`]) and the local Bedrock
//! Runtime simulator ([`sim`]). The agent core, runtime server, gateway and local mode
//! are added beside them.

pub mod model;
pub mod sim;
