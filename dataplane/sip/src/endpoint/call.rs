//! The calls an endpoint holds: those it answers and those it places, behind one face so
//! that routing by Call-ID, timers and effects treat them alike.

use std::net::SocketAddr;
use std::time::Instant;

use crate::call::{Effect, InboundCall, OutboundCall};
use crate::sip::{Request, Response};

/// A call in an [`Endpoint`](super::Endpoint).
#[derive(Debug)]
pub enum Call {
    /// A call the edge answers.
    Inbound(InboundCall),
    /// A call the edge places.
    Outbound(OutboundCall),
}

impl Call {
    /// The call the edge answers, if it is one.
    pub fn as_inbound(&self) -> Option<&InboundCall> {
        match self {
            Self::Inbound(call) => Some(call),
            Self::Outbound(_) => None,
        }
    }

    /// The call the edge places, if it is one.
    pub fn as_outbound(&self) -> Option<&OutboundCall> {
        match self {
            Self::Outbound(call) => Some(call),
            Self::Inbound(_) => None,
        }
    }

    pub(super) fn poll(&mut self) -> Option<Effect> {
        match self {
            Self::Inbound(call) => call.poll(),
            Self::Outbound(call) => call.poll(),
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Inbound(call) => call.poll_timeout(),
            Self::Outbound(call) => call.poll_timeout(),
        }
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        match self {
            Self::Inbound(call) => call.handle_timeout(now),
            Self::Outbound(call) => call.handle_timeout(now),
        }
    }

    pub(super) fn handle_request(&mut self, now: Instant, source: SocketAddr, request: &Request) {
        match self {
            Self::Inbound(call) => call.handle_request(now, source, request),
            Self::Outbound(call) => call.handle_request(now, source, request),
        }
    }

    pub(super) fn handle_response(&mut self, now: Instant, response: &Response) {
        match self {
            Self::Inbound(call) => call.handle_response(now, response),
            Self::Outbound(call) => call.handle_response(now, response),
        }
    }

    pub(super) fn hang_up(&mut self, now: Instant) {
        match self {
            Self::Inbound(call) => call.hang_up(now),
            Self::Outbound(call) => call.hang_up(now),
        }
    }

    pub(super) fn is_terminated(&self) -> bool {
        match self {
            Self::Inbound(call) => call.is_terminated(),
            Self::Outbound(call) => call.is_terminated(),
        }
    }
}
