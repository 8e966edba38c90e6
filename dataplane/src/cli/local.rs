//! `switchboard local <dir>`: runs every agent of a folder on this machine (see
//! [`switchboard_local`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;
use switchboard_local::{self as local, LocalOptions};
use switchboard_runtime::ServerConfig;

/// Options of `switchboard local`.
#[derive(Debug, Args)]
pub struct LocalArgs {
    /// Folder of Agent, Persona and Workflow YAML (and an optional tools/local.yaml declaring demo tool servers and host aliases).
    dir: PathBuf,

    /// Port to serve ws://127.0.0.1:<port>/v1/session?agent=<name> on.
    #[arg(long, env = "SWITCHBOARD_LOCAL_PORT", default_value_t = 8080)]
    port: u16,

    /// Address to bind (127.0.0.1 keeps it on this machine).
    #[arg(long, env = "SWITCHBOARD_LOCAL_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,

    /// Use real Amazon Bedrock (default AWS credential chain) instead of the simulator.
    #[arg(long, env = "SWITCHBOARD_LOCAL_BEDROCK")]
    bedrock: bool,

    /// Simulator script (YAML). Default: the bundled Example Bank script.
    #[arg(long, env = "SWITCHBOARD_SIM_SCRIPT")]
    sim_script: Option<PathBuf>,

    /// Directory for JSONL transcripts.
    #[arg(long, env = "SWITCHBOARD_TRANSCRIPTS_DIR")]
    transcripts_dir: Option<PathBuf>,

    /// Most concurrent sessions; more are refused with close code 1013.
    #[arg(long, env = "SWITCHBOARD_LOCAL_MAX_SESSIONS", default_value_t = 1000)]
    max_sessions: usize,

    /// PEM CA certificates trusted, on top of the system's roots, for https:// tool servers,
    /// MCP servers and OpenAI-compatible endpoints.
    #[arg(long, env = "SWITCHBOARD_CA_FILE")]
    ca_file: Option<PathBuf>,

    /// A browser origin (e.g. `http://my-app.test:3000`) whose pages may open sessions,
    /// besides local mode's own page; repeatable, or comma-separated in the variable; `*`
    /// allows any. Pages of other sites are refused with 4405.
    #[arg(long = "allowed-origin", env = "SWITCHBOARD_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,

    /// Where to answer phone calls (SIP over UDP and TCP; the SIP edge runs in this
    /// process): a softphone calls `sip:<agent>@<address>`. `off`: no SIP. Default
    /// 127.0.0.1:5060, skipped with a warning when that port is taken; an address given
    /// here must be free. Port 0: any free port (printed). Not 0.0.0.0: the address is
    /// written in SDP for the phone's RTP, so name one it reaches.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_LISTEN", value_name = "ADDRESS|off", value_parser = sip_listen)]
    sip_listen: Option<SipListen>,

    /// Where local mode's SIP edge listens for SIP over TLS too (a softphone calls
    /// `sip:<agent>@<address>;transport=tls`), e.g. 127.0.0.1:5061; needs --sip-tls-cert
    /// and --sip-tls-key. Default: no TLS.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_TLS_LISTEN", requires_all = ["sip_tls_cert", "sip_tls_key"])]
    sip_tls_listen: Option<SocketAddr>,

    /// The SIP TLS certificate chain, PEM, leaf first (as `switchboard sip --tls-cert`).
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_TLS_CERT", requires = "sip_tls_listen")]
    sip_tls_cert: Option<PathBuf>,

    /// The SIP TLS certificate's private key, PEM (as `switchboard sip --tls-key`).
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_TLS_KEY", requires = "sip_tls_listen")]
    sip_tls_key: Option<PathBuf>,

    /// The RTP ports of phone calls, `FIRST-LAST`: an even port and the next per call.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_RTP_PORTS", default_value = "20000-20999",
          value_parser = super::sip::port_range)]
    sip_rtp_ports: std::ops::RangeInclusive<u16>,

    /// Where the agents' outbound calls go (`switchboard call`, `POST /v1/calls`): a trunk's
    /// SIP URI, `sip:HOST[:PORT]` (UDP), `sip:HOST[:PORT];transport=tcp`,
    /// `sip:HOST[:PORT];transport=tls` or `sips:HOST[:PORT]` (TLS), which routes numbers and
    /// SIP URIs. Repeatable as `NAME=URI` (as `switchboard sip --outbound-trunk`, 1-40
    /// lower-case letters, digits, '-'): a call names its trunk (`"trunk"`, `switchboard call
    /// --trunk`), else goes through the default (--sip-default-outbound-trunk, else the
    /// first); a URI alone is the trunk `default`. In the variable, trunks are separated by
    /// `,`. Default: no trunk; a SIP URI (`sip:me@127.0.0.1:5062`, a softphone on this
    /// machine) is called at its own address, and a number is refused.
    #[arg(
        long = "sip-outbound-trunk",
        env = "SWITCHBOARD_LOCAL_SIP_OUTBOUND_TRUNK",
        value_delimiter = ',',
        value_name = "[NAME=]SIP URI"
    )]
    sip_outbound_trunks: Vec<String>,

    /// The outbound trunk calls naming none go through: a name of --sip-outbound-trunk.
    /// Default: the first.
    #[arg(
        long,
        env = "SWITCHBOARD_LOCAL_SIP_DEFAULT_OUTBOUND_TRUNK",
        value_name = "NAME",
        requires = "sip_outbound_trunks"
    )]
    sip_default_outbound_trunk: Option<String>,

    /// A TLS outbound trunk's CA, `[NAME=]FILE` (repeatable; as `switchboard sip
    /// --outbound-ca`; without a name: the trunk `default`'s, or the only trunk's): only it
    /// is trusted then; without it the system's root certificates are.
    #[arg(
        long = "sip-outbound-ca",
        env = "SWITCHBOARD_LOCAL_SIP_OUTBOUND_CA",
        value_delimiter = ',',
        value_name = "[NAME=]FILE",
        requires = "sip_outbound_trunks"
    )]
    sip_outbound_cas: Vec<String>,

    /// An outbound trunk's digest credentials for its 401/407 challenges, `[NAME=]DIR`
    /// (repeatable; as `switchboard sip --outbound-credentials`): a folder with the files
    /// `username` and `password`.
    #[arg(
        long = "sip-outbound-credentials",
        env = "SWITCHBOARD_LOCAL_SIP_OUTBOUND_CREDENTIALS",
        value_delimiter = ',',
        value_name = "[NAME=]DIR",
        requires = "sip_outbound_trunks"
    )]
    sip_outbound_credentials: Vec<String>,

    /// The number (E.164) or SIP user outbound calls come from (the From header),
    /// `[NAME=]ID` (repeatable; without a name: every trunk's that has none of its own, and
    /// the calls placed with no trunk). Default: `switchboard`.
    #[arg(
        long = "sip-caller-id",
        env = "SWITCHBOARD_LOCAL_SIP_CALLER_ID",
        value_delimiter = ',',
        value_name = "[NAME=]ID"
    )]
    sip_caller_ids: Vec<String>,

    /// How a caller is put through to a person (`transfer_to_person`), as `switchboard sip
    /// --transfer-method`: `refer` sends SIP REFER to the caller's phone, and where it
    /// refuses the REFER (405, 501, 403, ...) the edge dials the person itself and bridges
    /// the two calls; `dial` always dials and bridges (a phone or PBX known not to take
    /// REFER). A person's SIP URI is called at its own host; a number through
    /// --sip-outbound-trunk, else through the caller's side.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_TRANSFER_METHOD", default_value = "refer", value_name = "refer|dial")]
    sip_transfer_method: switchboard_sip_edge::TransferMethod,

    /// SRTP on phone calls (as `switchboard sip --srtp`): `optional` offers and takes
    /// SDES-SRTP on calls over TLS (--sip-tls-listen) and plain RTP where the phone offers
    /// no key; `required` refuses (488) any call without it; `off` never. Keys are never
    /// exchanged over plain UDP or TCP.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_SRTP", default_value = "optional", value_name = "off|optional|required")]
    sip_srtp: switchboard_sip_edge::SrtpPolicy,

    /// A folder of recorded announcements phone callers hear, as `switchboard sip
    /// --announcements`: `hold.wav` while a call waits for the model quota (try it with
    /// --capacity-quota), `outage.wav` when outage mode turns a call away or interrupts it,
    /// and an Agent's own as `<namespace>.<agent>.hold.wav` / `.outage.wav` (local mode's
    /// namespace is `default`). A file that is not a usable WAV stops local mode with its name.
    #[arg(long, env = "SWITCHBOARD_LOCAL_SIP_ANNOUNCEMENTS", value_name = "DIR")]
    sip_announcements: Option<PathBuf>,

    /// ICE-TCP, the WebRTC fallback for clients whose network blocks UDP (as `switchboard
    /// gateway --webrtc-tcp`): the TCP address the edge listens on beside its UDP socket,
    /// offered in every answer as a passive TCP candidate. Default: on, any free port on
    /// --host's address. `off`: UDP only.
    #[arg(long, env = "SWITCHBOARD_LOCAL_WEBRTC_TCP", value_name = "ADDRESS|off", value_parser = webrtc_tcp)]
    webrtc_tcp: Option<WebrtcTcp>,

    #[command(flatten)]
    voice: super::VoiceArgs,

    #[command(flatten)]
    record: super::record::RecordArgs,

    /// The model quota, as `switchboard gateway` takes it (this process's count: local mode
    /// has no Redis); try a full pool's queue or refusal on a laptop.
    #[command(flatten)]
    capacity: super::capacity::CapacityArgs,

    #[command(flatten)]
    call_webhooks: super::call_webhook::CallWebhookArgs,
}

/// `--sip-listen`: an address, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SipListen {
    Off,
    On(SocketAddr),
}

fn sip_listen(text: &str) -> Result<SipListen, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(SipListen::Off);
    }
    let addr: SocketAddr =
        text.trim().parse().map_err(|_| format!("{text:?} is not an address (IP:PORT, e.g. 127.0.0.1:5060) or off"))?;
    if addr.ip().is_unspecified() {
        return Err(format!(
            "{text:?}: name the address phones reach (it is written in SDP for their RTP), not {}",
            addr.ip()
        ));
    }
    Ok(SipListen::On(addr))
}

/// `--webrtc-tcp`: an address, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WebrtcTcp {
    Off,
    On(SocketAddr),
}

fn webrtc_tcp(text: &str) -> Result<WebrtcTcp, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(WebrtcTcp::Off);
    }
    text.trim()
        .parse()
        .map(WebrtcTcp::On)
        .map_err(|_| format!("{text:?} is not an address (IP:PORT, e.g. 127.0.0.1:3478; port 0: any) or off"))
}

/// Runs until Ctrl-C.
pub async fn run(args: LocalArgs) -> anyhow::Result<()> {
    let LocalArgs {
        dir,
        port,
        host,
        bedrock,
        sim_script,
        transcripts_dir,
        max_sessions,
        ca_file,
        allowed_origins,
        sip_listen,
        sip_tls_listen,
        sip_tls_cert,
        sip_tls_key,
        sip_rtp_ports,
        sip_outbound_trunks,
        sip_default_outbound_trunk,
        sip_outbound_cas,
        sip_outbound_credentials,
        sip_caller_ids,
        sip_transfer_method,
        sip_srtp,
        sip_announcements,
        webrtc_tcp,
        voice,
        record,
        capacity,
        call_webhooks,
    } = args;
    let call_webhooks = call_webhooks.config(ca_file.as_deref())?;
    let options = LocalOptions {
        listen: SocketAddr::new(host, port),
        bedrock,
        sim_script,
        transcripts: transcripts_dir,
        server: ServerConfig {
            drain_timeout: std::time::Duration::from_secs(5),
            max_sessions,
            voice_rotate_after: voice.rotate_after(),
            voice_audio_chunk: voice.audio_chunk(),
            allowed_origins,
            ..ServerConfig::default()
        },
        ca_file,
        gateway_key: None,
        capacity: capacity.config(None)?,
        webrtc_tcp: match webrtc_tcp {
            Some(WebrtcTcp::Off) => None,
            Some(WebrtcTcp::On(address)) => Some(address),
            None => Some(SocketAddr::new(host, 0)),
        },
        call_webhooks,
    };
    // Before anything starts: a bad recording stops local mode with its name.
    let announcements = super::sip::announcements(sip_announcements.as_deref())?;
    let default_record = super::record::default_local_file().map(|file| format!("sqlite:{}", file.display()));
    let resume_window = switchboard_gateway::GatewayConfig::default().resume_window;
    let redact = record.redactor()?;
    let record = record.start(default_record, options.ca_file.as_deref(), resume_window).await?;
    let recorder = record.as_ref().map(|task| task.recorder.clone());
    let stop = super::shutdown_signal()?;
    let mut local = local::start_redacting(&dir, options, recorder, redact).await?;
    let addr = local.server.local_addr()?;
    // Phones: the SIP edge in this process. The default address is tried and skipped with
    // a warning when taken (another local mode, a softphone); one asked for must be free.
    // Bad outbound settings stop local mode (never a silent phone-less start): parsed as
    // `switchboard sip` parses its own, the unnamed caller-id `switchboard` unless given.
    let mut sip_caller_ids = sip_caller_ids;
    if super::sip_outbound::unnamed("--sip-caller-id", &sip_caller_ids)?.is_none() {
        sip_caller_ids.push(local::LocalSip::DEFAULT_CALLER_ID.to_owned());
    }
    let outbound = super::sip_outbound::outbound(&super::sip_outbound::OutboundFlags {
        prefix: "sip-",
        trunks: &sip_outbound_trunks,
        credentials: &sip_outbound_credentials,
        caller_ids: &sip_caller_ids,
        cas: &sip_outbound_cas,
        default: sip_default_outbound_trunk.as_deref(),
        ring_timeout: local::LocalSip::RING_TIMEOUT,
    })?;
    let trunk_names = outbound.as_ref().map(switchboard_sip_edge::Outbound::names);
    let caller_id = super::sip_outbound::unnamed("--sip-caller-id", &sip_caller_ids)?
        .unwrap_or(local::LocalSip::DEFAULT_CALLER_ID)
        .to_owned();
    let tls = match (sip_tls_listen, sip_tls_cert, sip_tls_key) {
        (Some(listen), Some(cert), Some(key)) => {
            Some(switchboard_sip_edge::TlsConfig::from_pem_files(listen, &cert, &key)?)
        }
        (Some(_), _, _) => anyhow::bail!("--sip-tls-listen needs --sip-tls-cert and --sip-tls-key"),
        _ => None,
    };
    if sip_srtp == switchboard_sip_edge::SrtpPolicy::Required && tls.is_none() {
        anyhow::bail!("--sip-srtp required needs --sip-tls-listen: SRTP keys are exchanged only over TLS");
    }
    let sip = match sip_listen {
        Some(SipListen::Off) if tls.is_some() => {
            anyhow::bail!("--sip-tls-listen needs local mode's SIP edge: drop --sip-listen off")
        }
        Some(SipListen::Off) => None,
        Some(SipListen::On(listen)) => {
            let sip = local::LocalSip {
                listen,
                rtp_ports: sip_rtp_ports,
                outbound,
                caller_id,
                transfer: sip_transfer_method,
                announcements,
                tls,
                srtp: sip_srtp,
            };
            Some(local.server.serve_sip(&sip).await?)
        }
        None => {
            let sip = local::LocalSip {
                listen: local::LocalSip::DEFAULT_LISTEN,
                rtp_ports: sip_rtp_ports,
                outbound,
                caller_id,
                transfer: sip_transfer_method,
                announcements,
                tls,
                srtp: sip_srtp,
            };
            match local.server.serve_sip(&sip).await {
                Ok(addr) => Some(addr),
                Err(error) => {
                    tracing::warn!(%error, "phone calls are not answered: --sip-listen to choose another address, off to silence this");
                    None
                }
            }
        }
    };
    match &local.sim {
        // The certificate is named, as `switchboard sim` names it: Polly clients pointed at
        // the simulator (`switchboard test`/`load --speech-endpoint-url`) trust it.
        Some(sim) => match sim.ca_cert_path() {
            Some(cert) => println!("Bedrock simulator on {} (trust {})", sim.endpoint_url(), cert.display()),
            None => println!("Bedrock simulator on {}", sim.endpoint_url()),
        },
        None => println!("Using Amazon Bedrock with the default AWS credential chain"),
    }
    for (host, tools) in &local.demo_tools {
        println!("Demo tool server for host {host} on http://{}", tools.addr);
    }
    for agent in local.agents.iter().filter(|a| !local.by_handoff.contains(a)) {
        let marker = if Some(agent) == local.default_agent.as_ref() { " (default)" } else { "" };
        println!("Agent {agent}{marker}: ws://{addr}/v1/session?agent={agent}");
    }
    for agent in &local.by_handoff {
        println!("Agent {agent}: reached by handoff (gateway.expose: false)");
    }
    if let Some(sip) = sip {
        let agent = local.default_agent.as_deref().or_else(|| local.agents.first().map(String::as_str));
        let agent = agent.unwrap_or("<agent>");
        println!("Phone calls: sip:{agent}@{sip} (UDP and TCP)");
        if let Some(tls) = local.server.sip_tls_addr() {
            println!("Phone calls over TLS: sip:{agent}@{tls};transport=tls");
        }
        match &trunk_names {
            Some(names) => println!(
                "Outbound calls through the trunks {} (the first the default): switchboard call <number or sip:USER@HOST:PORT> --agent {agent} --gateway http://{addr} [--trunk NAME]",
                names.join(", ")
            ),
            None => println!(
                "Outbound calls: switchboard call sip:USER@HOST:PORT --agent {agent} --gateway http://{addr} (no trunk: --sip-outbound-trunk to call numbers)"
            ),
        }
    }
    let udp = local.webrtc.advertised();
    match local.webrtc.tcp() {
        Some((_, tcp)) => println!("WebRTC: POST http://{addr}/v1/webrtc (media on UDP {udp}, ICE-TCP {tcp})"),
        None => println!("WebRTC: POST http://{addr}/v1/webrtc (media on UDP {udp})"),
    }
    println!("Web page: http://{addr}/");
    if let Some(record) = &record {
        println!("Sessions recorded in {} (switchboard sessions list)", record.recorder.store.display);
    }
    println!("Chat with: switchboard chat ws://{addr}/v1/session");
    println!(
        "Outage mode: write {} (`active: true`, or `agents: [<name>]`) to switch it on; delete it to switch off",
        dir.join(switchboard_local::outage::OUTAGE_FILE).display()
    );
    local.server.run(stop).await?;
    if let Some(sim) = local.sim {
        sim.shutdown().await;
    }
    if let Some(record) = record {
        record.finish().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{SipListen, WebrtcTcp, sip_listen, webrtc_tcp};

    #[test]
    fn webrtc_tcp_is_an_address_or_off() {
        assert_eq!(webrtc_tcp("off"), Ok(WebrtcTcp::Off));
        assert_eq!(webrtc_tcp(" OFF "), Ok(WebrtcTcp::Off));
        assert_eq!(webrtc_tcp("0.0.0.0:3478"), Ok(WebrtcTcp::On("0.0.0.0:3478".parse().expect("addr"))));
        assert!(webrtc_tcp("3478").expect_err("no IP").contains("not an address"));
    }

    #[test]
    fn sip_listen_is_an_address_phones_reach_or_off() {
        assert_eq!(sip_listen("off"), Ok(SipListen::Off));
        assert_eq!(sip_listen("127.0.0.1:5070"), Ok(SipListen::On("127.0.0.1:5070".parse().expect("addr"))));
        let error = sip_listen("0.0.0.0:5060").expect_err("unspecified");
        assert!(error.contains("name the address phones reach"), "{error}");
        assert!(sip_listen("localhost").expect_err("no port").contains("not an address"));
    }
}
