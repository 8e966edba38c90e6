//! Voice and hybrid sessions through the runtime, end to end with real parts: local mode
//! on a real socket, a real WebSocket client streaming real-time PCM, the real
//! `aws-sdk-bedrockruntime` Nova Sonic client against the simulator, the demo HTTP tool
//! server. Waits are generous guards against hangs; no latency is asserted.

mod audio_input;
mod banking;
mod common;
mod compaction;
mod filler;
mod formats;
mod heard;
mod lifetime;
mod lines;
mod live;
mod reask;
mod speak_first;
mod update;
