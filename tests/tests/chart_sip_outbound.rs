//! The Helm chart's outbound trunk (`sip.outbound`), rendered: its URI over UDP, TCP or TLS
//! reaches the edge as written; a TLS trunk's CA comes from a ConfigMap mounted where the
//! edge reads it; a URI the edge cannot call, or a CA for a trunk that is not TLS, is refused
//! at install with what to write instead.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodSpec;
use switchboard_tests::helm::{chart, document, helm};

fn render(sets: &[&str]) -> (bool, String) {
    let chart = chart();
    let mut args = vec!["template", "sb", chart.as_str(), "--namespace", "voice", "--set", "sip.enabled=true"];
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

#[test]
fn an_outbound_trunk_over_tcp_or_tls_reaches_the_edge_with_its_ca() {
    for trunk in ["sip:10.0.0.1:5070;transport=tcp", "sip:trunk.example.com;transport=TLS;lr", "sips:[2001:db8::1]"] {
        let (ok, rendered) = render(&[&format!("sip.outbound.trunk={trunk}"), "sip.outbound.callerId=bank"]);
        assert!(ok, "{trunk}: {rendered}");
        let pod = pod_of(&rendered);
        assert_eq!(env(&pod, "SWITCHBOARD_SIP_OUTBOUND_TRUNK").as_deref(), Some(trunk));
        assert_eq!(env(&pod, "SWITCHBOARD_SIP_OUTBOUND_CA"), None, "the system's roots unless a CA is given");
    }
    let tls = ["sip.outbound.trunk=sips:trunk.example.com:5061", "sip.outbound.callerId=bank"];
    let (ok, rendered) = render(&[&tls[..], &["sip.outbound.caConfigMap=carrier-ca"]].concat());
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    let path = env(&pod, "SWITCHBOARD_SIP_OUTBOUND_CA").expect("the CA's path");
    let dir = path.strip_suffix("/ca.crt").expect("names ca.crt");
    let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == dir).expect("mounted");
    assert_eq!(mount.read_only, Some(true));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a volume");
    let map = volume.config_map.as_ref().expect("from a ConfigMap");
    assert_eq!(map.name, "carrier-ca");
    let items = map.items.as_ref().expect("items");
    assert!(items.iter().any(|i| i.key == "ca.crt" && i.path == "ca.crt"), "{items:?}");

    for (sets, why) in [
        (&["sip.outbound.trunk=sip:10.0.0.1;transport=sctp"][..], "is not a SIP URI the edge can call"),
        (&["sip.outbound.trunk=sips:10.0.0.1;transport=udp"], "is not a SIP URI the edge can call"),
        (&["sip.outbound.trunk=trunk.example.com"], "write sip:HOST[:PORT] (UDP), sip:HOST[:PORT];transport=tcp"),
        (&["sip.outbound.trunk=sip:user@trunk"], "is not a SIP URI the edge can call"),
        (
            &["sip.outbound.trunk=sip:10.0.0.1;transport=tcp", "sip.outbound.caConfigMap=carrier-ca"],
            "sip.outbound.caConfigMap \"carrier-ca\" is for a TLS trunk",
        ),
    ] {
        let sets: Vec<&str> = sets.iter().copied().chain(["sip.outbound.callerId=bank"]).collect();
        let (ok, refused) = render(&sets);
        assert!(!ok && refused.contains(why), "{sets:?}: {refused}");
    }
}

#[test]
fn named_outbound_trunks_reach_the_edge_each_with_its_caller_id_credentials_and_ca() {
    let sets = [
        "sip.outbound.trunk=sip:10.0.0.1;transport=tcp",
        "sip.outbound.callerId=bank",
        "sip.outbound.trunks[0].name=pbx",
        "sip.outbound.trunks[0].uri=sips:pbx.example.com",
        "sip.outbound.trunks[0].callerId=desk-7",
        "sip.outbound.trunks[0].credentialsSecret=pbx-out",
        "sip.outbound.trunks[0].caConfigMap=pbx-ca",
        "sip.outbound.trunks[1].name=carrier",
        "sip.outbound.trunks[1].uri=sip:sbc.carrier.example:5070",
        "sip.outbound.defaultTrunk=pbx",
    ];
    let (ok, rendered) = render(&sets);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    let trunks = "sip:10.0.0.1;transport=tcp,pbx=sips:pbx.example.com,carrier=sip:sbc.carrier.example:5070";
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_OUTBOUND_TRUNK").as_deref(), Some(trunks), "by commas: a URI holds ';'");
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_CALLER_ID").as_deref(), Some("bank,pbx=desk-7"));
    assert_eq!(env(&pod, "SWITCHBOARD_SIP_DEFAULT_OUTBOUND_TRUNK").as_deref(), Some("pbx"));
    let credentials = env(&pod, "SWITCHBOARD_SIP_OUTBOUND_CREDENTIALS").expect("the pbx's credentials");
    let dir = credentials.strip_prefix("pbx=").expect("named");
    let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == dir).expect("mounted");
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a volume");
    assert_eq!(volume.secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("pbx-out"));
    let ca = env(&pod, "SWITCHBOARD_SIP_OUTBOUND_CA").expect("the pbx's CA");
    let dir = ca.strip_prefix("pbx=").and_then(|p| p.strip_suffix("/ca.crt")).expect("named, ca.crt");
    let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == dir).expect("mounted");
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a volume");
    assert_eq!(volume.config_map.as_ref().map(|c| c.name.as_str()), Some("pbx-ca"));

    let named = ["sip.outbound.trunks[0].name=pbx", "sip.outbound.trunks[0].uri=sip:10.0.0.2"];
    for (sets, why) in [
        (&["sip.outbound.trunks[0].name=PBX", "sip.outbound.trunks[0].uri=sip:10.0.0.2"][..], "lower-case letters"),
        (&named[..], "sip.outbound.trunks pbx needs a callerId"),
        (
            &[named[0], "sip.outbound.trunks[0].uri=sip:10.0.0.2;transport=sctp", "sip.outbound.callerId=bank"],
            "sip.outbound.trunks pbx: uri",
        ),
        (&[named[0], named[1], "sip.outbound.callerId=bank", "sip.outbound.trunks[0].password=x"], "unknown key"),
        (
            &[named[0], named[1], "sip.outbound.callerId=bank", "sip.outbound.trunks[0].caConfigMap=ca"],
            "caConfigMap is for a TLS trunk",
        ),
        (
            &[
                "sip.outbound.trunk=sip:10.0.0.1",
                "sip.outbound.callerId=bank",
                "sip.outbound.trunks[0].name=default",
                "sip.outbound.trunks[0].uri=sip:10.0.0.2",
            ],
            "named twice",
        ),
        (&[named[0], named[1], "sip.outbound.callerId=bank", "sip.outbound.defaultTrunk=other"], "is not one of"),
    ] {
        let (ok, refused) = render(sets);
        assert!(!ok && refused.contains(why), "{sets:?}: {refused}");
    }
}
