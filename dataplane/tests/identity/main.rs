//! The verified caller reaches tool servers as the gateway's signed identity assertion
//! (header `X-Switchboard-Identity`, issue 23), black-box: local mode (the gateway's own
//! code in front of the runtime) with a teller Agent whose HTTP tools are a real server that
//! records what it receives, and the Example Bank's demo tool server checking the assertion
//! as a bank's would.

#[path = "../runtime/common.rs"]
#[allow(dead_code)]
mod client;
mod demo;
mod forwarding;
mod teller;
