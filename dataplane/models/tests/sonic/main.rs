//! Integration tests of the Nova Sonic client ([`switchboard_models::sonic`]) against
//! the simulator's InvokeModelWithBidirectionalStream, with the real
//! `aws-sdk-bedrockruntime` client over TLS and HTTP/2. Audio is generated here:
//! phrase tones (the simulator's phrase-id convention), silence and faint noise.

mod chunks;
mod common;
mod errors;
mod lifetime;
mod reask;
mod voice;
