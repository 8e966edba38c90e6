//! The session gateway in front of real `switchboard runtime` processes, one (or two) per
//! Example Bank agent, each signing-key protected, against the simulator: the client talks
//! to the gateway only.

mod analysis;
mod app_context;
mod app_context_shared;
mod audio_batch;
mod budget;
mod callers;
mod candidates;
mod capacity;
mod chat;
#[path = "../runtime/common.rs"]
#[allow(dead_code)]
mod client;
mod client_tools;
mod context;
mod crash;
mod display_card;
mod fleet;
mod handoff_greeting;
mod keys_reload;
mod languages;
mod live_state;
mod liveness;
mod long_session;
mod netns;
mod noise;
mod outage;
mod outage_local;
mod outage_shared;
mod outage_text;
mod phone;
#[path = "../support/ports.rs"]
#[allow(dead_code)]
mod ports;
mod postgres;
mod process;
mod record;
mod record_access;
mod record_continue;
mod record_delivery;
mod record_flood;
mod redis;
mod region;
mod region_local;
mod resume;
mod scopes;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;
mod sessions;
mod settings;
mod silence_resume;
mod stuck_runtime;
#[path = "../support/tools.rs"]
mod tools;
mod turn_taking;
mod variants;
mod voice;
#[path = "../voice/common.rs"]
#[allow(dead_code)]
mod voice_common;
mod voice_resume;
