//! Local mode's SIP edge: phone calls to the agents of a folder, with no trunk and no
//! credential, over this gateway on loopback ([`Servers::serve_sip`]); and the calls the
//! agents place (`POST /v1/calls`, `switchboard call`): to a SIP URI at its own host (a
//! softphone on the laptop) with no trunk, or through the trunks named ([`LocalSip::outbound`]).

use std::net::SocketAddr;

use super::Servers;
use crate::{LocalError, start_error};

/// Local mode's SIP edge ([`Servers::serve_sip`]).
#[derive(Clone, Debug)]
pub struct LocalSip {
    /// Where to listen for SIP over UDP and TCP (port 0: any free one). Not an unspecified
    /// address (0.0.0.0): it is also the address written in SDP, which phones send RTP to.
    pub listen: SocketAddr,
    /// The RTP ports: one even port and the next per call, bound on the listen address.
    pub rtp_ports: std::ops::RangeInclusive<u16>,
    /// Where outbound calls go: the outbound trunks, each by name, the default first (built
    /// from `--sip-outbound-trunk [NAME=]URI` as `switchboard sip`'s from its flags; numbers
    /// and URIs through them), or `None`: a SIP URI is called at its own host, a number is
    /// refused.
    pub outbound: Option<switchboard_sip_edge::Outbound>,
    /// The number (E.164) or SIP user outbound calls with no trunk come from (the From's
    /// user).
    pub caller_id: String,
    /// How a caller is put through to a person (`transfer_to_person`): REFER, dialling the
    /// person and bridging where the phone refuses it; or always dial and bridge (as
    /// `switchboard sip --transfer-method`).
    pub transfer: switchboard_sip_edge::TransferMethod,
    /// The recordings callers hear (`switchboard sip --announcements`; none: silence).
    pub announcements: switchboard_sip_edge::Announcements,
    /// SIP over TLS too, on its own address (`--sip-tls-listen`); `None`: no TLS.
    pub tls: Option<switchboard_sip_edge::TlsConfig>,
    /// SRTP on calls over TLS (`--sip-srtp`, as `switchboard sip --srtp`).
    pub srtp: switchboard_sip_edge::SrtpPolicy,
}

impl LocalSip {
    /// Local mode's default SIP address (`switchboard local` without `--sip-listen`).
    pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5060);
    /// The caller-id of outbound calls with no trunk (the From's user).
    pub const DEFAULT_CALLER_ID: &str = "switchboard";
    /// How long an outbound call rings before it is `no_answer`.
    pub const RING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

    /// How the edge places calls: through the trunks, or with none straight to a URI's host.
    fn outbound(&self) -> Result<switchboard_sip_edge::Outbound, LocalError> {
        use switchboard_sip_edge::trunk::outbound::OutboundTrunk;
        if let Some(outbound) = &self.outbound {
            return Ok(outbound.clone());
        }
        // With no trunk, one that is never dialled (`direct`): only its caller-id is used.
        let trunk = OutboundTrunk::new("sip:127.0.0.1", &self.caller_id, None).map_err(start_error)?;
        let mut outbound = switchboard_sip_edge::Outbound::new(trunk, None, Self::RING_TIMEOUT).map_err(start_error)?;
        outbound.direct = true;
        Ok(outbound)
    }
}

impl Servers {
    /// Answers phone calls too: binds the SIP edge on `sip.listen`, a client of this
    /// gateway's `/v1/session` (on loopback, with no credential: local mode asks for
    /// none), taking calls from any address with no trunk, and placing the calls this
    /// gateway takes (`POST /v1/calls`, over its `/v1/calls/edge` on loopback). Served by
    /// [`Servers::run`] with the rest, and stopped with it (calls are hung up); its metrics
    /// are served on the gateway's `/metrics`. Returns the bound SIP address.
    pub async fn serve_sip(&mut self, sip: &LocalSip) -> Result<SocketAddr, LocalError> {
        use switchboard_sip_edge::{EdgeConfig, GatewayConfig, MediaSettings, RateConfig, trunk::Trunks};
        if sip.listen.ip().is_unspecified() {
            return Err(LocalError::Start(format!(
                "cannot listen for SIP on {}: name the address phones reach (it is written in SDP), e.g. 127.0.0.1:5060 or this machine's LAN address",
                sip.listen
            )));
        }
        let gateway = self.local_addr()?;
        let host = if gateway.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), gateway.port())
        } else {
            gateway
        };
        let trunks = Trunks::new(Vec::new(), "switchboard".to_owned(), switchboard_sip_edge::nonce_secret())
            .map_err(start_error)?;
        let config = EdgeConfig {
            listen: sip.listen,
            tcp: true,
            tls: sip.tls.clone(),
            advertise: sip.listen.ip(),
            rtp_ports: sip.rtp_ports.clone(),
            gateway: GatewayConfig {
                url: format!("ws://{host}{}", switchboard_crds::contract::SESSION_PATH),
                api_key: None,
                open_timeout: std::time::Duration::from_secs(10),
                resume_for: switchboard_sip_edge::gateway::RESUME_FOR,
            },
            max_calls: 100,
            rate: RateConfig::default(),
            media: MediaSettings { announcements: sip.announcements.clone(), ..MediaSettings::default() },
            trunks,
            outbound: Some(sip.outbound()?),
            transfer: sip.transfer,
            srtp: sip.srtp,
        };
        let edge = switchboard_sip_edge::Edge::bind(config).await.map_err(start_error)?;
        let addr = edge.local_addr();
        // Served on this gateway's `/metrics`, after the runtime's (one edge a process).
        let _ = self.sip_metrics.set(edge.metrics());
        self.sip = Some(edge);
        Ok(addr)
    }

    /// The SIP edge's TLS address, when it listens for TLS ([`LocalSip::tls`]).
    pub fn sip_tls_addr(&self) -> Option<SocketAddr> {
        self.sip.as_ref().and_then(switchboard_sip_edge::Edge::tls_addr)
    }
}
