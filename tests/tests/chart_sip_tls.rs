//! The Helm chart's SIP over TLS (`sip.tls`), rendered: off by default; on, the edge is told
//! its TLS address, bounds and SRTP policy (`sip.tls.srtp`), reads its certificate and key from the TLS Secret mounted
//! where its variables point, and the TLS port is the container's and the Service's (on
//! both exposures); values that cannot work are refused with what to write instead.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PodSpec, Service};
use switchboard_tests::helm::{chart, document, helm};

fn render(sets: &[&str]) -> (bool, String) {
    let chart = chart();
    let mut args = vec!["template", "sb", chart.as_str(), "--namespace", "voice"];
    for set in sets {
        args.extend(["--set", set]);
    }
    helm(None, &args)
}

fn pod_of(rendered: &str) -> PodSpec {
    let deployment: Deployment =
        serde_yaml::from_str(document(rendered, "Deployment", "sb-switchboard-sip")).expect("the SIP edge");
    deployment.spec.and_then(|s| s.template.spec).expect("a pod")
}

fn env(pod: &PodSpec, name: &str) -> Option<String> {
    pod.containers[0].env.iter().flatten().find(|e| e.name == name).and_then(|e| e.value.clone())
}

fn service_ports(rendered: &str) -> Vec<(String, i32, String)> {
    let service: Service = serde_yaml::from_str(document(rendered, "Service", "sb-switchboard-sip")).expect("svc");
    let ports = service.spec.and_then(|s| s.ports).expect("ports");
    ports.into_iter().map(|p| (p.name.unwrap_or_default(), p.port, p.protocol.unwrap_or_default())).collect()
}

#[test]
fn sip_over_tls_is_off_by_default_and_on_mounts_its_secret_and_opens_its_port() {
    let (ok, rendered) = render(&["sip.enabled=true"]);
    assert!(ok, "{rendered}");
    let sip = document(&rendered, "Deployment", "sb-switchboard-sip");
    assert!(!sip.contains("SWITCHBOARD_SIP_TLS") && !sip.contains("sip-tls"), "no TLS by default:\n{sip}");
    assert!(!service_ports(&rendered).iter().any(|(name, ..)| name == "sip-tls"));

    let on = ["sip.enabled=true", "sip.tls.enabled=true", "sip.tls.secretName=sip-edge-tls"];
    let (ok, rendered) = render(&on);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_LISTEN").as_deref(), Some("0.0.0.0:5061"), "the custom port");
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_HANDSHAKE_TIMEOUT_SECONDS").as_deref(), Some("10"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_MAX_CONNECTIONS_PER_ADDRESS").as_deref(), Some("16"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_SRTP").as_deref(), Some("optional"), "SRTP offered on calls over TLS");
    // The certificate and key are the TLS Secret's, mounted where the edge reads them.
    for (variable, key) in [("SWITCHBOARD_SIP_TLS_CERT", "tls.crt"), ("SWITCHBOARD_SIP_TLS_KEY", "tls.key")] {
        let path = env(&pod, variable).unwrap_or_else(|| panic!("{variable} in {rendered}"));
        let dir = path.strip_suffix(&format!("/{key}")).unwrap_or_else(|| panic!("{variable} {path} names {key}"));
        let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == dir).expect("mounted");
        assert_eq!(mount.read_only, Some(true));
        let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a volume");
        let secret = volume.secret.as_ref().expect("from a Secret");
        assert_eq!(secret.secret_name.as_deref(), Some("sip-edge-tls"));
        let items = secret.items.as_ref().expect("items");
        assert!(items.iter().any(|i| i.key == key && i.path == key), "{variable}: {items:?}");
    }
    let ports: Vec<_> = pod.containers[0]
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port, p.protocol.clone().unwrap_or_default()))
        .collect();
    assert!(ports.contains(&("sip-tls".to_owned(), 5061, "TCP".to_owned())), "{ports:?}");
    let service = service_ports(&rendered);
    assert!(service.contains(&("sip-tls".to_owned(), 5061, "TCP".to_owned())), "on the Service: {service:?}");

    // A load balancer in front carries TLS too, on the port asked for, with the bounds asked for.
    let lb = [
        "sip.enabled=true",
        "sip.exposure=loadBalancer",
        "sip.advertise=203.0.113.9",
        "sip.rtpPorts.first=30000",
        "sip.rtpPorts.last=30009",
        "sip.tls.enabled=true",
        "sip.tls.secretName=sip-edge-tls",
        "sip.tls.port=5071",
        "sip.tls.handshakeTimeoutSeconds=5",
        "sip.tls.maxConnectionsPerAddress=64",
        "sip.tls.srtp=required",
    ];
    let (ok, rendered) = render(&lb);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_LISTEN").as_deref(), Some("0.0.0.0:5071"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_HANDSHAKE_TIMEOUT_SECONDS").as_deref(), Some("5"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_TLS_MAX_CONNECTIONS_PER_ADDRESS").as_deref(), Some("64"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_SRTP").as_deref(), Some("required"));
    let service = service_ports(&rendered);
    assert!(service.contains(&("sip-tls".to_owned(), 5071, "TCP".to_owned())), "{service:?}");
}

#[test]
fn sip_tls_values_that_cannot_work_are_refused_with_what_to_write() {
    for (sets, why) in [
        (&[][..], "sip.tls.enabled needs sip.tls.secretName"),
        (&["sip.tls.secretName=t", "sip.tls.port=5060"], "other than sip.port (SIP over TCP holds it)"),
        (&["sip.tls.secretName=t", "sip.tls.port=9060"], "sip.tls.port 9060"),
        (&["sip.tls.secretName=t", "sip.tls.port=20010"], "outside sip.rtpPorts"),
        (&["sip.tls.secretName=t", "sip.tls.handshakeTimeoutSeconds=0"], "handshakeTimeoutSeconds 0: use 1-120"),
        (&["sip.tls.secretName=t", "sip.tls.maxConnectionsPerAddress=0"], "maxConnectionsPerAddress 0: use 1-1024"),
        (&["sip.tls.secretName=t", "sip.tls.srtp=mandatory"], "sip.tls.srtp \"mandatory\": use optional"),
    ] {
        let sets: Vec<&str> =
            ["sip.enabled=true", "sip.tls.enabled=true"].into_iter().chain(sets.iter().copied()).collect();
        let (ok, refused) = render(&sets);
        assert!(!ok && refused.contains(why), "{sets:?}: {refused}");
    }
    // Without TCP on the SIP port, TLS may take that port's number.
    let (ok, rendered) = render(&[
        "sip.enabled=true",
        "sip.tcp=false",
        "sip.tls.enabled=true",
        "sip.tls.secretName=t",
        "sip.tls.port=5060",
    ]);
    assert!(ok, "{rendered}");
}
