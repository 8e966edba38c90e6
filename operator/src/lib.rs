//! The Switchboard operator as a library: the pure build of an Agent's children (shared by
//! `render` and the controller), the controller itself, and the pieces it runs with
//! (leader election, routing-table publisher, the gateway key's follower, metrics and
//! health server). `main.rs` only parses arguments; tests run the controller in-process
//! through [`run::run`].

pub mod build;
pub mod cli;
pub mod client;
pub mod controller;
pub mod gateway_key;
pub mod guard;
pub mod http;
pub mod leader;
pub mod lean;
pub mod malloc;
pub mod metrics;
pub mod own_writes;
pub mod render;
pub mod routes;
pub mod run;
pub mod settings;
pub mod traces;
pub mod triggers;
pub mod watch;
pub mod wiring;
