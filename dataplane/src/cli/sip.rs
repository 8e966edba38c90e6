//! `switchboard sip`: the SIP edge (switchboard-sip-edge) as its own process. Phones and
//! trunks call `sip:<agent>@<advertised address>`; each call opens one session at the
//! gateway named by --gateway, with the edge's API key, so calls are routed, handed off,
//! resumed and recorded as every other session is.

use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use switchboard_sip_edge::trunk::digest::Algorithm;
use switchboard_sip_edge::trunk::{Cidr, Credentials, Trunk, Trunks};
use switchboard_sip_edge::{Edge, EdgeConfig, GatewayConfig, MediaSettings, RateConfig, TransferMethod};

/// Options of `switchboard sip`.
#[derive(Debug, Args)]
pub struct SipArgs {
    /// Where to listen for SIP over UDP (and TCP, see --tcp; `0` as the port: any free one,
    /// logged at start).
    #[arg(long, env = "SWITCHBOARD_SIP_LISTEN", default_value = "0.0.0.0:5060")]
    listen: SocketAddr,

    /// Listen for SIP over TCP too, on the same address and port (`false`: UDP only).
    #[arg(long, env = "SWITCHBOARD_SIP_TCP", default_value_t = true, action = clap::ArgAction::Set)]
    tcp: bool,

    /// Where to listen for SIP over TLS (phones and trunks call
    /// `sip:<agent>@<address>:<port>;transport=tls` or `sips:`), e.g. `0.0.0.0:5061`, the
    /// custom port. Needs --tls-cert and --tls-key. Default: no TLS.
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_LISTEN", requires_all = ["tls_cert", "tls_key"])]
    tls_listen: Option<SocketAddr>,

    /// The TLS certificate chain, PEM, leaf first (a Kubernetes TLS Secret's `tls.crt`).
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_CERT", requires = "tls_listen")]
    tls_cert: Option<PathBuf>,

    /// The TLS certificate's private key, PEM: PKCS#8, PKCS#1 or SEC1 (a TLS Secret's `tls.key`).
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_KEY", requires = "tls_listen")]
    tls_key: Option<PathBuf>,

    /// Seconds a client has to finish its TLS handshake; past it the connection is closed
    /// (and counted: `switchboard_sip_tls_connections_total{outcome="handshake_timeout"}`).
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=120))]
    tls_handshake_timeout_seconds: u64,

    /// TLS connections one IP address may hold at once (a handshake under way counts); more
    /// are closed as they are accepted. A trunk's proxy that opens many needs more.
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    tls_max_connections_per_address: u32,

    /// SRTP (SDES, RFC 4568) on calls over TLS: `optional` offers and takes it where the
    /// caller offers a usable key (plain RTP otherwise); `required` refuses (488, with the
    /// reason) any call without it, and every call not over TLS; `off` never (an RTP/SAVP
    /// offer gets 488). Keys are never sent or taken over plain UDP or TCP.
    #[arg(long, env = "SWITCHBOARD_SIP_SRTP", default_value = "optional", value_name = "off|optional|required")]
    srtp: switchboard_sip_edge::SrtpPolicy,

    /// The RTP port range, `FIRST-LAST`: each call takes an even port (RTP) and the next
    /// (RTCP), bound on the listen address. Its size bounds the calls at once (a pair per
    /// call); open it in the firewall with the SIP port.
    #[arg(long, env = "SWITCHBOARD_SIP_RTP_PORTS", default_value = "20000-20999", value_parser = port_range)]
    rtp_ports: RangeInclusive<u16>,

    /// The address phones and trunks reach the edge at, written in SDP (`c=`) and the
    /// Contact header. Default: the listen address, which must then not be 0.0.0.0.
    #[arg(long, env = "SWITCHBOARD_SIP_ADVERTISE")]
    advertise: Option<IpAddr>,

    /// The gateway's session endpoint, e.g. `ws://gateway:8080/v1/session` (local mode:
    /// the URL it prints, without `?agent=`).
    #[arg(long, env = "SWITCHBOARD_SIP_GATEWAY")]
    gateway: String,

    /// A file holding the edge's API key for the gateway (sent as `Authorization: Bearer`;
    /// a trailing newline is dropped). Without it the edge sends none (local mode needs
    /// none).
    #[arg(long, env = "SWITCHBOARD_SIP_API_KEY_FILE")]
    api_key_file: Option<PathBuf>,

    /// Calls at once; a new call past it is answered 503.
    #[arg(long, env = "SWITCHBOARD_SIP_MAX_CALLS", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_calls: u32,

    /// Seconds without RTP from a phone (that should be sending) after which its call is
    /// hung up.
    #[arg(long, env = "SWITCHBOARD_SIP_MEDIA_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    media_timeout_seconds: u64,

    /// Seconds the gateway may take to answer a call's session (connecting and answering
    /// `session_start`); past it the call is answered 503. A call the gateway queues for
    /// capacity (182 Queued) waits on past it, as long as the gateway keeps its place.
    #[arg(long, env = "SWITCHBOARD_SIP_GATEWAY_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=120))]
    gateway_timeout_seconds: u64,

    /// Seconds a call whose connection to the gateway dropped (lost, or its gateway replica
    /// going away: close 1001) tries to resume its session through the gateway's URL —
    /// another replica, or the same after a blip — before it hangs up; 0: a call ends with
    /// its connection. The caller hears a gap, not a hang-up.
    #[arg(long, env = "SWITCHBOARD_SIP_GATEWAY_RESUME_SECONDS", default_value_t = switchboard_sip_edge::gateway::RESUME_FOR.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=60))]
    gateway_resume_seconds: u64,

    /// A trunk by its source addresses, `NAME=CIDR[,CIDR...]` (repeatable): INVITEs from
    /// those addresses are taken and trusted (their caller's number is believed). With any
    /// trunk configured, INVITEs from anything else are refused (403); with none, every
    /// source is taken, untrusted.
    #[arg(long = "trunk", env = "SWITCHBOARD_SIP_TRUNKS", value_delimiter = ';', value_name = "NAME=CIDR,...")]
    trunks: Vec<String>,

    /// A trunk's SIP digest credentials, `NAME=DIR` (repeatable): DIR holds the files
    /// `username` and `password` (a Kubernetes Secret mounted as a folder). INVITEs for that
    /// trunk are challenged (401, SHA-256 and MD5) until they prove them. A trunk named only
    /// here may call from any address.
    #[arg(
        long = "trunk-credentials",
        env = "SWITCHBOARD_SIP_TRUNK_CREDENTIALS",
        value_delimiter = ';',
        value_name = "NAME=DIR"
    )]
    trunk_credentials: Vec<String>,

    /// The digest algorithms challenges offer, most preferred first (`SHA-256`, `MD5`): one
    /// challenge each (RFC 8760). A UA that gives up at a first challenge it cannot compute
    /// (older equipment that knows only MD5) needs `MD5` alone.
    #[arg(long, env = "SWITCHBOARD_SIP_DIGEST_ALGORITHMS", value_delimiter = ',', default_value = "SHA-256,MD5",
          value_parser = algorithm)]
    digest_algorithms: Vec<Algorithm>,

    /// The realm named in digest challenges.
    #[arg(long, env = "SWITCHBOARD_SIP_REALM", default_value = "switchboard")]
    realm: String,

    /// Where outbound calls go (`POST /v1/calls` at the gateway, `switchboard call`): a
    /// trunk's SIP URI, `sip:HOST[:PORT]` (UDP), `sip:HOST[:PORT];transport=tcp`,
    /// `sip:HOST[:PORT];transport=tls` or `sips:HOST[:PORT]` (TLS, port 5061 unless given;
    /// the trunk's certificate is verified, see --outbound-ca). Over TCP and TLS the edge
    /// opens a connection to the trunk and keeps it for the next calls. Repeatable as
    /// `NAME=URI` (1-40 lower-case letters, digits, '-'): a call names its trunk (`POST
    /// /v1/calls` `"trunk"`, `switchboard call --trunk`), else goes through the default
    /// (--default-outbound-trunk, else the first); a URI alone is the trunk `default`. In
    /// the variable, trunks are separated by `,` (as the other outbound lists). With
    /// it the edge holds a dispatch connection to the gateway (`/v1/calls/edge`; its API key
    /// needs `calls=edge`) and places the calls it is given; without it the edge places none.
    #[arg(
        long = "outbound-trunk",
        env = "SWITCHBOARD_SIP_OUTBOUND_TRUNK",
        value_delimiter = ',',
        value_name = "[NAME=]SIP URI"
    )]
    outbound_trunks: Vec<String>,

    /// The outbound trunk calls naming none go through (and a person's number in a dialled
    /// transfer): a name of --outbound-trunk. Default: the first.
    #[arg(long, env = "SWITCHBOARD_SIP_DEFAULT_OUTBOUND_TRUNK", value_name = "NAME")]
    default_outbound_trunk: Option<String>,

    /// A TLS outbound trunk's CA, `[NAME=]FILE` (repeatable; without a name: the trunk
    /// `default`'s, or the only trunk's): a PEM file of the CA certificate(s) its certificate
    /// must chain to (a private CA, a PBX's own). Only these are trusted then; without it the
    /// system's root certificates are.
    #[arg(
        long = "outbound-ca",
        env = "SWITCHBOARD_SIP_OUTBOUND_CA",
        value_delimiter = ',',
        value_name = "[NAME=]FILE"
    )]
    outbound_cas: Vec<String>,

    /// An outbound trunk's digest credentials for its 401/407 challenges, `[NAME=]DIR`
    /// (repeatable; without a name: the trunk `default`'s, or the only trunk's): a folder
    /// with the files `username` and `password` (a Kubernetes Secret mounted as a folder).
    #[arg(
        long = "outbound-credentials",
        env = "SWITCHBOARD_SIP_OUTBOUND_CREDENTIALS",
        value_delimiter = ',',
        value_name = "[NAME=]DIR"
    )]
    outbound_credentials: Vec<String>,

    /// The number (E.164) or SIP user outbound calls come from (the From header),
    /// `[NAME=]ID` (repeatable; without a name: every trunk's that has none of its own);
    /// each trunk needs one.
    #[arg(long = "caller-id", env = "SWITCHBOARD_SIP_CALLER_ID", value_delimiter = ',', value_name = "[NAME=]ID")]
    caller_ids: Vec<String>,

    /// Seconds an outbound call may ring before it is cancelled (outcome `no_answer`).
    #[arg(long, env = "SWITCHBOARD_SIP_RING_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    ring_timeout_seconds: u64,

    /// Where to serve the edge's Prometheus metrics, `GET /metrics` over HTTP (METRICS.md,
    /// "SIP edge"; `0` as the port: any free one, logged at start).
    #[arg(long, env = "SWITCHBOARD_SIP_METRICS_LISTEN", default_value = "0.0.0.0:9060")]
    metrics_listen: SocketAddr,
    /// How a caller is put through to a person (`transfer_to_person`): `refer` sends SIP
    /// REFER to the caller's side, and where it refuses the REFER (405, 501, 403, ...) the
    /// edge dials the person itself and bridges the two calls; `dial` always dials and
    /// bridges (a trunk known not to take REFER). A person's number is dialled through
    /// --outbound-trunk when there is one, else through the caller's side; a SIP URI at its
    /// host.
    #[arg(long, env = "SWITCHBOARD_SIP_TRANSFER_METHOD", default_value = "refer", value_name = "refer|dial")]
    transfer_method: TransferMethod,

    /// A folder of recorded announcements the edge plays to callers: `hold.wav` (early
    /// media while a call waits in the capacity queue), `outage.wav` (a call outage mode
    /// turns away or interrupts), and an Agent's own as `<namespace>.<agent>.hold.wav` /
    /// `<namespace>.<agent>.outage.wav`. WAV, 16-bit PCM, mono, 8 or 16 kHz, at most 60 s;
    /// read at start, and a file that is not one stops the edge with its name. Without it
    /// the edge plays none (182 Queued in silence; outage refusals are 503).
    #[arg(long, env = "SWITCHBOARD_SIP_ANNOUNCEMENTS", value_name = "DIR")]
    announcements: Option<PathBuf>,
}

/// The announcements in `dir` (none without one), logged.
pub(super) fn announcements(dir: Option<&std::path::Path>) -> anyhow::Result<switchboard_sip_edge::Announcements> {
    let Some(dir) = dir else { return Ok(switchboard_sip_edge::Announcements::default()) };
    let loaded = switchboard_sip_edge::Announcements::load(dir)?;
    if loaded.is_empty() {
        tracing::warn!(dir = %dir.display(), "the announcements folder holds no recording: callers hear none");
    } else {
        tracing::info!(dir = %dir.display(), files = ?loaded.files(), "announcements loaded");
    }
    Ok(loaded)
}

/// Serves `metrics` on `GET /metrics` at `listen` until `stop`, and `GET /healthz` and
/// `GET /readyz` (200 `ok`) for the chart's probes: served only once the edge is bound and
/// configured, and whether or not SIP over TCP is on (a probe on the SIP TCP port had none
/// to check with `tcp: false`); returns the bound address.
async fn serve_metrics(
    listen: SocketAddr,
    metrics: switchboard_sip_edge::Metrics,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot serve the SIP edge's metrics on {listen}: pick another --metrics-listen"))?;
    let bound = listener.local_addr().context("the metrics listener has no address")?;
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let text = metrics.render();
                async move { ([("content-type", "text/plain; version=0.0.4")], text).into_response() }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route("/readyz", axum::routing::get(|| async { "ok" }));
    let limits = switchboard_serve::Limits { max_connections: 64, ..switchboard_serve::Limits::default() };
    let serve = switchboard_serve::server::serve(listener, app, limits, switchboard_serve::OnRefused::default(), stop);
    Ok((bound, tokio::spawn(serve)))
}

/// The TLS listener the flags describe, its certificate and key read from their files.
fn tls(
    listen: Option<SocketAddr>,
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
    handshake_timeout: Duration,
    max_per_address: u32,
) -> anyhow::Result<Option<switchboard_sip_edge::TlsConfig>> {
    let Some(listen) = listen else { return Ok(None) };
    let (Some(cert), Some(key)) = (cert, key) else {
        bail!("--tls-listen needs --tls-cert and --tls-key: the PEM files of the edge's certificate and its key")
    };
    let mut config = switchboard_sip_edge::TlsConfig::from_pem_files(listen, cert, key)?;
    config.handshake_timeout = handshake_timeout;
    config.max_per_address = max_per_address as usize;
    Ok(Some(config))
}

/// The `username` and `password` files of `dir`, each one line of 1-256 bytes.
pub(super) fn read_credentials(whose: &str, dir: &std::path::Path) -> anyhow::Result<Credentials> {
    let read = |file: &str| -> anyhow::Result<String> {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("{whose}: cannot read {}", path.display()))?;
        let value = text.trim_end_matches(['\n', '\r']).to_owned();
        if value.is_empty() || value.len() > 256 {
            bail!("{whose}: {} is empty or longer than 256 bytes", path.display());
        }
        Ok(value)
    };
    Ok(Credentials { username: read("username")?, password: read("password")? })
}

/// The trunks `--trunk` and `--trunk-credentials` describe, credentials read from their
/// folders.
fn trunks(sources: &[String], credentials: &[String]) -> anyhow::Result<Vec<Trunk>> {
    let mut trunks: Vec<Trunk> = Vec::new();
    let entry = |trunks: &mut Vec<Trunk>, name: &str| -> usize {
        if let Some(i) = trunks.iter().position(|t| t.name == name) {
            return i;
        }
        trunks.push(Trunk { name: name.to_owned(), sources: Vec::new(), credentials: None });
        trunks.len() - 1
    };
    for spec in sources {
        let Some((name, cidrs)) = spec.split_once('=') else { bail!("--trunk {spec:?} is not NAME=CIDR[,CIDR...]") };
        let parsed = cidrs.split(',').map(|c| c.trim().parse::<Cidr>()).collect::<Result<Vec<_>, _>>()?;
        let i = entry(&mut trunks, name.trim());
        trunks[i].sources.extend(parsed);
    }
    for spec in credentials {
        let Some((name, dir)) = spec.split_once('=') else { bail!("--trunk-credentials {spec:?} is not NAME=DIR") };
        let found = read_credentials(&format!("trunk {name}"), std::path::Path::new(dir.trim()))?;
        let i = entry(&mut trunks, name.trim());
        trunks[i].credentials = Some(found);
    }
    Ok(trunks)
}

fn algorithm(text: &str) -> Result<Algorithm, String> {
    Algorithm::parse(text.trim()).ok_or_else(|| format!("{text:?} is not SHA-256 or MD5"))
}

/// `--srtp required` needs SIP over TLS: keys are exchanged only there, so without it
/// every call would be refused.
fn srtp_needs_tls(srtp: switchboard_sip_edge::SrtpPolicy, tls: bool) -> anyhow::Result<()> {
    if srtp == switchboard_sip_edge::SrtpPolicy::Required && !tls {
        bail!(
            "--srtp required needs --tls-listen: SRTP keys are exchanged only over TLS, so every call would be refused"
        );
    }
    Ok(())
}

/// `FIRST-LAST`, both ports, FIRST <= LAST.
pub(super) fn port_range(text: &str) -> Result<RangeInclusive<u16>, String> {
    let (first, last) = text.split_once('-').ok_or_else(|| format!("{text:?} is not FIRST-LAST"))?;
    let port = |p: &str| p.trim().parse::<u16>().map_err(|_| format!("{p:?} is not a port (1-65535)"));
    let (first, last) = (port(first)?, port(last)?);
    if first == 0 || first > last {
        return Err(format!("{text:?}: the first port must be 1 or more and not above the last"));
    }
    Ok(first..=last)
}

/// Serves calls until SIGTERM or Ctrl-C, then hangs every call up.
pub async fn run(args: SipArgs) -> anyhow::Result<()> {
    let SipArgs {
        listen,
        tcp,
        tls_listen,
        tls_cert,
        tls_key,
        tls_handshake_timeout_seconds,
        tls_max_connections_per_address,
        srtp,
        rtp_ports,
        advertise,
        gateway,
        api_key_file,
        max_calls,
        media_timeout_seconds,
        gateway_timeout_seconds,
        gateway_resume_seconds,
        trunks: trunk_sources,
        trunk_credentials,
        realm,
        digest_algorithms,
        outbound_trunks,
        default_outbound_trunk,
        outbound_cas,
        outbound_credentials,
        caller_ids,
        ring_timeout_seconds,
        metrics_listen,
        transfer_method,
        announcements: announcements_dir,
    } = args;
    let announcements = announcements(announcements_dir.as_deref())?;
    let outbound = super::sip_outbound::outbound(&super::sip_outbound::OutboundFlags {
        prefix: "",
        trunks: &outbound_trunks,
        credentials: &outbound_credentials,
        caller_ids: &caller_ids,
        cas: &outbound_cas,
        default: default_outbound_trunk.as_deref(),
        ring_timeout: Duration::from_secs(ring_timeout_seconds),
    })?;
    for route in outbound.iter().flat_map(|o| &o.routes) {
        let trusts = route.tls.as_ref().map(switchboard_sip_edge::TrunkTls::trusts);
        tracing::info!(name = route.name, trunk = %route.trunk.uri(), ?trusts, "an outbound trunk");
    }
    let tls = tls(
        tls_listen,
        tls_cert.as_deref(),
        tls_key.as_deref(),
        Duration::from_secs(tls_handshake_timeout_seconds),
        tls_max_connections_per_address,
    )?;
    srtp_needs_tls(srtp, tls.is_some())?;
    let trunks = trunks(&trunk_sources, &trunk_credentials)?;
    let names: Vec<String> = trunks.iter().map(|t| t.name.clone()).collect();
    let trunks = Trunks::new(trunks, realm, switchboard_sip_edge::nonce_secret())?.with_algorithms(digest_algorithms);
    if names.is_empty() {
        tracing::warn!("no trunks configured: calls are taken from any address, and no caller's number is trusted");
    } else {
        tracing::info!(trunks = ?names, "calls are taken only from these trunks");
    }
    let shutdown = super::shutdown_signal()?;
    let advertise = match advertise {
        Some(address) => address,
        None if !listen.ip().is_unspecified() => listen.ip(),
        None => bail!("--advertise is needed when --listen is {listen}: phones must be told an address they reach"),
    };
    if !(gateway.starts_with("ws://") || gateway.starts_with("wss://")) {
        bail!("--gateway {gateway:?} is not a ws:// or wss:// URL");
    }
    let api_key = match api_key_file {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the API key file {}", path.display()))?;
            let key = text.strip_suffix('\n').unwrap_or(&text).trim_end_matches('\r').to_owned();
            if key.is_empty() {
                bail!("the API key file {} is empty", path.display());
            }
            Some(key)
        }
        None => None,
    };
    let media = MediaSettings {
        timeout: Duration::from_secs(media_timeout_seconds),
        announcements,
        ..MediaSettings::default()
    };
    let config = EdgeConfig {
        listen,
        tcp,
        tls,
        advertise,
        rtp_ports: rtp_ports.clone(),
        gateway: GatewayConfig {
            url: gateway.clone(),
            api_key,
            open_timeout: Duration::from_secs(gateway_timeout_seconds),
            resume_for: Duration::from_secs(gateway_resume_seconds),
        },
        max_calls: max_calls as usize,
        rate: RateConfig::default(),
        media,
        trunks,
        outbound,
        transfer: transfer_method,
        srtp,
    };
    let edge = Edge::bind(config).await?;
    if let Some(tls) = edge.tls_addr() {
        tracing::info!(%tls, "SIP over TLS on {tls}");
    }
    let stop_metrics = tokio_util::sync::CancellationToken::new();
    let (metrics_at, metrics_served) = serve_metrics(metrics_listen, edge.metrics(), stop_metrics.clone()).await?;
    tracing::info!(metrics = %metrics_at, "SIP edge metrics on http://{metrics_at}/metrics");
    tracing::info!(
        sip = %edge.local_addr(),
        %advertise,
        rtp = format!("{}-{}", rtp_ports.start(), rtp_ports.end()),
        gateway,
        "SIP edge ready: listening on udp://{}{}",
        edge.local_addr(),
        if tcp { " and tcp" } else { "" }
    );
    edge.run(shutdown).await;
    stop_metrics.cancel();
    let _ = metrics_served.await;
    tracing::info!("SIP edge stopped");
    Ok(())
}

#[cfg(test)]
#[path = "sip_tests.rs"]
mod tests;
