//! The dialogue of a call (RFC 3261 §12): its identifiers, the parties as the INVITE
//! named them, the remote target and route set, and both CSeq counters; and the
//! requests the edge sends inside it (BYE), which swap From and To, go to the remote
//! target through the route set (loose routing), and each open a new branch.

use std::net::SocketAddr;

use super::{CallConfig, Callee, Transport};
use crate::sip::{HeaderError, Headers, Method, NameAddr, Request};

/// The dialogue state of one call.
#[derive(Clone, Debug)]
pub(super) struct Dialog {
    pub(super) call_id: String,
    pub(super) local_tag: String,
    pub(super) remote_tag: Option<String>,
    /// The INVITE's From value (the remote party, with its tag).
    remote_party: String,
    /// The INVITE's To value with the edge's tag.
    local_party: String,
    /// Where requests inside the dialogue go (the remote Contact's URI).
    remote_target: String,
    /// Record-Route values, in order (the UAS's route set, §12.1.1).
    route_set: Vec<String>,
    pub(super) local_cseq: u32,
    pub(super) remote_cseq: u32,
    pub(super) peer: SocketAddr,
    pub(super) transport: Transport,
    local: SocketAddr,
    branches: u32,
}

impl Dialog {
    /// The dialogue an INVITE opens (its head was checked by the parser).
    pub(super) fn from_invite(
        invite: &Request,
        local: SocketAddr,
        local_tag: &str,
        peer: SocketAddr,
        transport: Transport,
    ) -> Result<Self, HeaderError> {
        let from = invite.from()?;
        let remote_target = match invite.headers.get("Contact").map(NameAddr::parse) {
            Some(Ok(contact)) => contact.uri.to_owned(),
            _ => from.uri.to_owned(),
        };
        let to = invite.headers.get("To").ok_or(HeaderError::Missing("To"))?;
        Ok(Self {
            call_id: invite.call_id()?.to_owned(),
            local_tag: local_tag.to_owned(),
            remote_tag: from.tag().map(str::to_owned),
            remote_party: invite.headers.get("From").unwrap_or_default().to_owned(),
            local_party: format!("{to};tag={local_tag}"),
            remote_target,
            route_set: invite.headers.all("Record-Route").map(str::to_owned).collect(),
            local_cseq: invite.cseq()?.seq.wrapping_add(1000) & 0x7FFF_FFFF,
            remote_cseq: invite.cseq()?.seq,
            peer,
            transport,
            local,
            branches: 0,
        })
    }

    /// The dialogue of a call the edge places: From is the edge's number with its tag,
    /// To the callee's, requests go to the callee's URI at its peer address. The remote tag, target
    /// and route set come with the 2xx ([`Dialog::confirm`]).
    pub(super) fn outgoing(config: &CallConfig, callee: &Callee) -> Self {
        let tag = &config.local_tag;
        Self {
            call_id: callee.call_id.clone(),
            local_tag: tag.clone(),
            remote_tag: None,
            remote_party: format!("<{}>", callee.uri),
            local_party: format!("<{}>;tag={tag}", callee.from),
            remote_target: callee.uri.clone(),
            route_set: Vec::new(),
            local_cseq: 0,
            remote_cseq: 0,
            peer: callee.peer,
            transport: callee.transport,
            local: config.local,
            branches: 0,
        }
    }

    /// Takes what a 2xx to the edge's INVITE settles: the remote tag (its To), the remote
    /// target (its Contact) and the route set (its Record-Route, reversed: §12.1.2).
    pub(super) fn confirm(&mut self, response: &crate::sip::Response) {
        if let Some(to) = response.headers.get("To") {
            to.clone_into(&mut self.remote_party);
        }
        self.remote_tag = response.to().ok().and_then(|to| to.tag()).map(str::to_owned);
        if let Some(Ok(contact)) = response.headers.get("Contact").map(NameAddr::parse) {
            contact.uri.clone_into(&mut self.remote_target);
        }
        self.route_set = response.headers.all("Record-Route").map(str::to_owned).collect();
        self.route_set.reverse();
    }

    /// The ACK to a 2xx: a new branch, the INVITE's CSeq number (§13.2.2.4).
    pub(super) fn ack(&mut self, invite_cseq: u32) -> Request {
        let saved = self.local_cseq;
        self.local_cseq = invite_cseq.wrapping_sub(1);
        let ack = self.request(Method::Ack);
        self.local_cseq = saved;
        ack
    }

    /// The edge's Contact header value.
    pub(super) fn contact(&self) -> String {
        let transport = self.transport.as_str().to_ascii_lowercase();
        format!("<sip:switchboard@{};transport={transport}>", self.local)
    }

    /// Whether a request belongs to this dialogue: the same Call-ID and tags.
    pub(super) fn matches(&self, request: &Request) -> bool {
        let to_tag = request.to().ok().and_then(|to| to.tag());
        let from_tag = request.from().ok().and_then(|from| from.tag());
        request.call_id().is_ok_and(|id| id == self.call_id)
            && to_tag == Some(self.local_tag.as_str())
            && from_tag == self.remote_tag.as_deref()
    }

    /// A new request inside the dialogue.
    pub(super) fn request(&mut self, method: Method) -> Request {
        self.local_cseq = self.local_cseq.wrapping_add(1) & 0x7FFF_FFFF;
        self.branches += 1;
        let mut headers = Headers::new();
        let via = format!(
            "SIP/2.0/{} {};branch=z9hG4bK{}.{};rport",
            self.transport.as_str(),
            self.local,
            self.local_tag,
            self.branches
        );
        headers.push("Via", via);
        headers.push("Max-Forwards", "70");
        for route in &self.route_set {
            headers.push("Route", route.as_str());
        }
        headers.push("From", self.local_party.as_str());
        headers.push("To", self.remote_party.as_str());
        headers.push("Call-ID", self.call_id.as_str());
        headers.push("CSeq", format!("{} {method}", self.local_cseq));
        Request { method, uri: self.remote_target.clone(), headers, body: Vec::new() }
    }
}
