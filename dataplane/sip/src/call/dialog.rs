//! The dialogue of a call (RFC 3261 §12): its identifiers, the parties as the INVITE
//! named them, the remote target and route set, and both CSeq counters; and the
//! requests the edge sends inside it (BYE), which swap From and To, go to the remote
//! target through the route set (loose routing), and each open a new branch. The edge's
//! Contact names the transport the dialogue runs on (RFC 3261 §8.1.1.8): `sips:` where the
//! dialogue's URI was `sips:` (then it is TLS), else `sip:` with `;transport=`.

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
    /// The dialogue is `sips:` (its Request-URI, or the callee's URI, was): the edge's
    /// Contact is `sips:` too (§8.1.1.8).
    secure: bool,
    local: SocketAddr,
    branches: u32,
}

/// Whether `uri` is a `sips:` URI.
fn is_sips(uri: &str) -> bool {
    uri.get(..5).is_some_and(|scheme| scheme.eq_ignore_ascii_case("sips:"))
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
            secure: transport == Transport::Tls && is_sips(&invite.uri),
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
            secure: callee.transport == Transport::Tls && is_sips(&callee.uri),
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

    /// The edge's Contact header value: where the peer sends its requests in this
    /// dialogue, over its transport (a TLS dialogue's `sips:` URI implies TLS).
    pub(super) fn contact(&self) -> String {
        if self.secure {
            return format!("<sips:switchboard@{}>", self.local);
        }
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

#[cfg(test)]
mod tests {
    use super::{Dialog, Transport};
    use crate::sip::{Message, Request};

    fn invite(uri: &str, via: &str) -> Request {
        let text = format!(
            "INVITE {uri} SIP/2.0\r\nVia: SIP/2.0/{via} 192.0.2.7:40000;branch=z9hG4bKt1\r\n\
             From: <sip:caller@192.0.2.7>;tag=c1\r\nTo: <{uri}>\r\nCall-ID: tls-1\r\nCSeq: 1 INVITE\r\n\
             Contact: <sip:caller@192.0.2.7:40001;transport=tls>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
        );
        match crate::sip::parse::parse_datagram(text.as_bytes(), &crate::sip::Limits::default()) {
            Ok(Message::Request(request)) => request,
            other => panic!("an INVITE: {other:?}"),
        }
    }

    #[test]
    fn the_contact_and_via_name_the_dialogues_transport_and_sips_where_the_uri_was_sips() {
        let local = "198.51.100.1:5061".parse().expect("addr");
        let peer = "192.0.2.7:40000".parse().expect("addr");
        let cases = [
            (
                "sip:triage@198.51.100.1:5061;transport=tls",
                Transport::Tls,
                "<sip:switchboard@198.51.100.1:5061;transport=tls>",
            ),
            ("sips:triage@198.51.100.1:5061", Transport::Tls, "<sips:switchboard@198.51.100.1:5061>"),
            ("sip:triage@198.51.100.1:5061", Transport::Tcp, "<sip:switchboard@198.51.100.1:5061;transport=tcp>"),
            // sips: over a transport that is not TLS cannot be kept: the Contact says what it is.
            ("sips:triage@198.51.100.1:5061", Transport::Udp, "<sip:switchboard@198.51.100.1:5061;transport=udp>"),
        ];
        for (uri, transport, contact) in cases {
            let via = transport.as_str();
            let mut dialog =
                Dialog::from_invite(&invite(uri, via), local, "edge1", peer, transport).expect("a dialogue");
            assert_eq!(dialog.contact(), contact, "{uri} over {via}");
            let bye = dialog.request(crate::sip::Method::Bye);
            let sent = bye.headers.get("Via").expect("a Via");
            assert!(sent.starts_with(&format!("SIP/2.0/{via} 198.51.100.1:5061;")), "{sent}");
        }
    }
}
