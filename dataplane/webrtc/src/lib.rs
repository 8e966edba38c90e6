//! Switchboard's WebRTC edge, without I/O (issue 47): a browser calls an agent with one Opus
//! audio track each way and the session protocol's JSON on a data channel — one protocol,
//! two transports. The gateway's HTTP handlers and UDP socket task will be thin adapters
//! around this crate. This first step sets up its dependencies: str0m (sans-I/O WebRTC, with
//! its aws-lc-rs crypto backend) and libopus through the `opus` binding.
