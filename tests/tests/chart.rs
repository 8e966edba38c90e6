//! The Helm chart, rendered: it lints, renders manifests valid for a current Kubernetes,
//! gives only the gateway its private key, refuses gateway replicas that would lose
//! sessions, and renders no NetworkPolicy: it gives the operator its gateway's namespace and
//! labels, and the operator keeps the policy where the Agents run. The gateway's callers'
//! credentials: `chart_credentials.rs`; installed on the real control plane: `chart_install.rs`.

use std::process::Command;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::helm::{chart, document, helm};
use switchboard_tests::{operator, repo_root};

#[test]
fn the_chart_lints_and_renders_valid_manifests() {
    let chart = chart();
    let (ok, out) = helm(None, &["lint", "--strict", &chart]);
    assert!(ok, "{out}");
    let namespaced_with_options = [
        "--set",
        "operator.watchNamespace=bank",
        "--set",
        "runtime.hpaApiVersion=autoscaling/v2",
        // The gateway's optional parts: an Ingress (as a 1.19+ cluster renders it), Redis,
        // JWT.
        "--api-versions",
        "networking.k8s.io/v1/Ingress",
        "--set",
        "gateway.ingress.enabled=true,gateway.ingress.host=agents.bank.example,gateway.ingress.className=nginx",
        "--set",
        "gateway.redis.url=redis://redis:6379,gateway.jwt.jwksConfigMap=jwks,gateway.jwt.issuer=https://idp.example,gateway.jwt.audience=switchboard",
        // The WebRTC edge on the nodes' network, with TURN servers.
        "--set",
        "gateway.webrtc.enabled=true,gateway.webrtc.turn.existingSecret=turn",
        "--set",
        "gateway.webrtc.turn.urls={turn:turn.bank.example:3478?transport=udp}",
        // The SIP edge with a trunk known by address and digest credentials, and its key
        // for the gateway (which asks for JWTs here).
        "--set",
        "sip.enabled=true,sip.gatewayKey.existingSecret=sip-key,sip.trunks[0].name=carrier",
        "--set",
        "sip.trunks[0].sources={203.0.113.0/24},sip.trunks[0].credentialsSecret=carrier-sip",
        // SIP over TLS, its certificate from a TLS Secret.
        "--set",
        "sip.tls.enabled=true,sip.tls.secretName=sip-tls",
    ];
    for extra in [&[][..], &namespaced_with_options[..]] {
        let mut args = vec!["template", "sb", &chart, "--namespace", "switchboard-system"];
        args.extend_from_slice(extra);
        let (ok, rendered) = helm(None, &args);
        assert!(ok, "{rendered}");
        gateway_key_is_the_gateways_alone(&rendered);
        network_policy_is_the_operators(&rendered, extra.is_empty());
        if extra.is_empty() {
            assert!(
                rendered.contains("kind: ClusterRoleBinding")
                    && !rendered.contains("kind: RoleBinding\nmetadata:\n  name: sb-switchboard\n")
            );
        } else {
            assert!(
                rendered.contains("namespace: bank") && rendered.contains("value: \"autoscaling/v2\""),
                "{rendered}"
            );
            assert!(!rendered.contains("kind: ClusterRole"), "a namespaced install renders no ClusterRole(Binding)");
            for needle in
                ["kind: Ingress", "SWITCHBOARD_REDIS_URL", "SWITCHBOARD_JWKS_FILE", "host: \"agents.bank.example\""]
            {
                assert!(rendered.contains(needle), "{needle} in {rendered}");
            }
        }
        let file = std::env::temp_dir().join(format!("switchboard-chart-{}-{}.yaml", std::process::id(), extra.len()));
        std::fs::write(&file, &rendered).expect("write");
        let out = Command::new(tools_bin().expect("tools").join("kubernetes-validate"))
            .args(["--strict", "-k", "1.33.0", &file.to_string_lossy()])
            .output()
            .expect("kubernetes-validate runs");
        let _ = std::fs::remove_file(&file);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !text.contains("ERROR"), "{text}");
        assert!(text.contains("passed for resource deployment/sb-switchboard"), "{text}");
        if !extra.is_empty() {
            assert!(text.contains("passed for resource deployment/sb-switchboard-sip"), "{text}");
        }
    }
}

/// The chart renders no NetworkPolicy of its own: it tells the operator, which keeps one in
/// every namespace with Agents (`operator_network_policy.rs`), where its gateway runs, and
/// gives it the rights for that and no more.
fn network_policy_is_the_operators(rendered: &str, cluster_wide: bool) {
    assert!(!rendered.contains("kind: NetworkPolicy"), "no second policy beside the operator's:\n{rendered}");
    let env = operator_env(rendered);
    assert_eq!(env("SWITCHBOARD_NETWORK_POLICY").as_deref(), Some("true"));
    assert_eq!(env("SWITCHBOARD_NETWORK_POLICY_GATEWAY_NAMESPACE").as_deref(), Some("switchboard-system"));
    let labels = "app.kubernetes.io/name=switchboard-gateway,app.kubernetes.io/instance=sb";
    assert_eq!(env("SWITCHBOARD_NETWORK_POLICY_GATEWAY_LABELS").as_deref(), Some(labels));
    assert_eq!(env("SWITCHBOARD_NETWORK_POLICY_EXTRA_PEERS").as_deref(), Some("[]"));
    let role = document(rendered, if cluster_wide { "ClusterRole" } else { "Role" }, "sb-switchboard");
    let rule = "resources: [networkpolicies]\n    verbs: [get, list, watch, create, patch]\n";
    assert!(role.contains(rule), "{role}");
}

/// The operator container's environment in `rendered`: a lookup by name.
fn operator_env(rendered: &str) -> impl Fn(&str) -> Option<String> {
    let deployment: k8s_openapi::api::apps::v1::Deployment =
        serde_yaml::from_str(document(rendered, "Deployment", "sb-switchboard")).expect("the operator's Deployment");
    let env = deployment.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].env.clone().unwrap_or_default());
    let env = env.unwrap_or_default();
    move |name| env.iter().find(|e| e.name == name).and_then(|e| e.value.clone())
}

#[test]
fn the_operator_takes_the_charts_network_policy_settings() {
    let names = [
        "SWITCHBOARD_NETWORK_POLICY",
        "SWITCHBOARD_NETWORK_POLICY_GATEWAY_NAMESPACE",
        "SWITCHBOARD_NETWORK_POLICY_GATEWAY_LABELS",
        "SWITCHBOARD_NETWORK_POLICY_EXTRA_PEERS",
    ];
    let render = |peer: &str| {
        let value = format!("networkPolicy.metricsFrom[0].namespaceSelector.{peer}.team=monitoring");
        let (ok, rendered) = helm(None, &["template", "sb", &chart(), "--namespace", "sb-system", "--set", &value]);
        assert!(ok, "{rendered}");
        let env = operator_env(&rendered);
        names.map(|name| (name, env(name).unwrap_or_else(|| panic!("{name} in {rendered}"))))
    };
    let operator = operator::operator_binary().expect("the operator binary");
    let examples = repo_root().join("examples/banking");
    let run = |env: [(&str, String); 4]| {
        let out = Command::new(&operator).args(["render", "-f"]).arg(&examples).envs(env).output().expect("runs");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let good = render("matchLabels");
    assert_eq!(good[3].1, r#"[{"namespaceSelector":{"matchLabels":{"team":"monitoring"}}}]"#);
    let (ok, err) = run(good);
    assert!(ok, "the operator starts with the chart's settings: {err}");
    // A typo in metricsFrom stops the operator at start, never a policy that drops the peer.
    let (ok, err) = run(render("matchLabel"));
    assert!(!ok && err.contains("a typo?"), "{err}");
    let (ok, off) = helm(None, &["template", "sb", &chart(), "--set", "networkPolicy.enabled=false"]);
    assert!(ok, "{off}");
    assert_eq!(operator_env(&off)("SWITCHBOARD_NETWORK_POLICY").as_deref(), Some("false"));
    assert!(!off.contains("networkpolicies"), "no rights on NetworkPolicies it does not keep");
}

/// The gateway's replicas lose no session by default: 2 with Redis, 1 without, and more
/// than one without Redis is refused at install unless acknowledged.
#[test]
fn gateway_replicas_without_redis_are_refused_unless_acknowledged() {
    let chart = chart();
    let replicas = |sets: &[&str]| {
        let mut args = vec!["template", "sb", chart.as_str()];
        for set in sets {
            args.extend(["--set", set]);
        }
        let (ok, rendered) = helm(None, &args);
        (ok, if ok { document(&rendered, "Deployment", "sb-switchboard-gateway").to_owned() } else { rendered })
    };
    let (ok, alone) = replicas(&[]);
    assert!(ok && alone.contains("\n  replicas: 1\n"), "no Redis: one replica\n{alone}");
    let (ok, shared) = replicas(&["gateway.redis.url=redis://redis:6379"]);
    assert!(ok && shared.contains("\n  replicas: 2\n"), "with Redis: two\n{shared}");
    let (ok, refused) = replicas(&["gateway.replicas=3"]);
    assert!(!ok && refused.contains("without gateway.redis"), "{refused}");
    let (ok, accepted) = replicas(&["gateway.replicas=3", "gateway.replicasWithoutRedis=true"]);
    assert!(ok && accepted.contains("\n  replicas: 3\n"), "{accepted}");
}

/// The WebRTC edge's values: on the nodes' network (each pod advertising its node's IP, one
/// a node) or behind a UDP load balancer (one replica, its external IP given); TURN servers
/// with the shared secret or a static credential from a Secret; what cannot work is refused.
#[test]
fn the_webrtc_edge_is_exposed_by_host_network_or_a_udp_load_balancer() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let chart = chart();
    let render = |sets: &[&str]| {
        let mut args = vec!["template", "sb", chart.as_str()];
        for set in sets {
            args.extend(["--set", set]);
        }
        helm(None, &args)
    };
    let gateway_of = |rendered: &str| -> Deployment {
        serde_yaml::from_str(document(rendered, "Deployment", "sb-switchboard-gateway")).expect("gateway")
    };
    let (ok, off) = render(&[]);
    assert!(ok && !off.contains("WEBRTC") && !off.contains("hostNetwork"), "off by default\n{off}");

    let secret = "gateway.webrtc.turn.existingSecret=turn";
    let urls = "gateway.webrtc.turn.urls={turn:turn.bank.example:3478?transport=udp,stun:stun.bank.example}";
    let (ok, rendered) = render(&["gateway.webrtc.enabled=true", "gateway.redis.url=redis://r:6379", secret, urls]);
    assert!(ok, "{rendered}");
    let spec = gateway_of(&rendered).spec.expect("a spec");
    // Two replicas on two nodes' ports: a surge pod would find no node with them free.
    let rolling = spec.strategy.and_then(|s| s.rolling_update).expect("a rolling update");
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(0)), "no surge on the nodes' ports");
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
    let labels = spec.template.metadata.and_then(|m| m.labels).expect("labels");
    let pod = spec.template.spec.expect("a pod");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let anti = pod.affinity.and_then(|a| a.pod_anti_affinity).expect("one gateway a node");
    let term = &anti.required_during_scheduling_ignored_during_execution.expect("required")[0];
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    // Only pods on the nodes' network repel each other: an upgrade to the load balancer's
    // pod (without the label) starts beside the old one (tests/cluster/e2e-smoke.sh).
    let selected = term.label_selector.as_ref().and_then(|s| s.match_labels.clone()).expect("match labels");
    assert_eq!(selected.get("switchboard.dev/node-network").map(String::as_str), Some("true"));
    assert!(selected.iter().all(|(k, v)| labels.get(k) == Some(v)), "the pods select each other: {selected:?}");
    let container = &pod.containers[0];
    let env = |name: &str| container.env.iter().flatten().find(|e| e.name == name).cloned();
    assert_eq!(env("SWITCHBOARD_WEBRTC_UDP").and_then(|e| e.value).as_deref(), Some("0.0.0.0:3478"));
    // The reply encoder's complexity (`opusComplexity`), the gateway's default unless set.
    assert_eq!(env("SWITCHBOARD_WEBRTC_OPUS_COMPLEXITY").and_then(|e| e.value).as_deref(), Some("5"));
    // Each pod its node's IP, through a variable of its own (the advertised address stays a
    // plain value, so an upgrade between exposures patches a value: tests/cluster/e2e-smoke.sh).
    let node_ip = env("SWITCHBOARD_NODE_IP").and_then(|e| e.value_from).and_then(|v| v.field_ref);
    assert_eq!(node_ip.map(|f| f.field_path).as_deref(), Some("status.hostIP"), "each pod its node's IP");
    let advertise = env("SWITCHBOARD_WEBRTC_ADVERTISE").expect("the advertised address");
    assert_eq!((advertise.value.as_deref(), advertise.value_from), (Some("$(SWITCHBOARD_NODE_IP)"), None));
    assert_eq!(
        env("SWITCHBOARD_WEBRTC_TURN").and_then(|e| e.value).as_deref(),
        Some("turn:turn.bank.example:3478?transport=udp,stun:stun.bank.example")
    );
    let secret_file = env("SWITCHBOARD_WEBRTC_TURN_SECRET_FILE").and_then(|e| e.value).expect("the shared secret");
    assert!(env("SWITCHBOARD_WEBRTC_TURN_USERNAME_FILE").is_none(), "time-limited credentials, not static ones");
    let mount = container.volume_mounts.iter().flatten().find(|m| m.name == "turn-credential").expect("mounted");
    assert_eq!(format!("{}/secret", mount.mount_path), secret_file);
    let volume = pod.volumes.iter().flatten().find(|v| v.name == "turn-credential").expect("a volume");
    let source = volume.secret.as_ref().expect("from the Secret");
    assert_eq!(source.secret_name.as_deref(), Some("turn"));
    assert_eq!(
        source.items.as_ref().map(|i| (i[0].key.as_str(), i[0].path.as_str())),
        Some(("static-auth-secret", "secret"))
    );
    let udp = container.ports.iter().flatten().find(|p| p.name.as_deref() == Some("webrtc")).expect("a UDP port");
    assert_eq!((udp.container_port, udp.protocol.as_deref()), (3478, Some("UDP")));
    // ICE-TCP beside it, on by default.
    assert_eq!(env("SWITCHBOARD_WEBRTC_TCP").and_then(|e| e.value).as_deref(), Some("0.0.0.0:3478"));
    let tcp = container.ports.iter().flatten().find(|p| p.name.as_deref() == Some("webrtc-tcp")).expect("a TCP port");
    assert_eq!((tcp.container_port, tcp.protocol.as_deref()), (3478, Some("TCP")));
    // Each port the node's, in the manifest: an upgrade off the node's network removes them.
    let host_ports: Vec<_> = container.ports.iter().flatten().map(|p| (p.container_port, p.host_port)).collect();
    assert_eq!(host_ports, [(8080, Some(8080)), (3478, Some(3478)), (3478, Some(3478))]);
    assert!(!rendered.contains("sb-switchboard-gateway-webrtc"), "no load balancer on the nodes' network");

    let lb = ["gateway.webrtc.enabled=true", "gateway.webrtc.exposure=loadBalancer", "gateway.webrtc.udpPort=3479"];
    let (ok, refused) = render(&lb);
    assert!(!ok && refused.contains("gateway.webrtc.advertise is required"), "{refused}");
    let static_turn = [
        "gateway.webrtc.turn.urls={turns:turn.bank.example:5349}",
        secret,
        "gateway.webrtc.turn.secretKey=",
        "gateway.webrtc.turn.usernameKey=user",
        "gateway.webrtc.turn.passwordKey=pass",
    ];
    let with_address: Vec<&str> =
        lb.iter().copied().chain(["gateway.webrtc.advertise=203.0.113.7"]).chain(static_turn).collect();
    let (ok, rendered) = render(&with_address);
    assert!(ok, "{rendered}");
    let service: Service =
        serde_yaml::from_str(document(&rendered, "Service", "sb-switchboard-gateway-webrtc")).expect("svc");
    let spec = service.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    let ports = spec.ports.expect("ports");
    assert_eq!((ports[0].port, ports[0].protocol.as_deref()), (3479, Some("UDP")));
    assert_eq!(
        (ports[1].name.as_deref(), ports[1].port, ports[1].protocol.as_deref()),
        (Some("webrtc-tcp"), 3478, Some("TCP")),
        "ICE-TCP on the same load balancer"
    );
    let spec = gateway_of(&rendered).spec.expect("a spec");
    assert_eq!(spec.strategy, None, "behind a load balancer the default rollout surges");
    let pod = spec.template.spec.expect("a pod");
    assert_eq!(pod.host_network, None);
    assert!(pod.containers[0].ports.iter().flatten().all(|p| p.host_port.is_none()), "no node port on the pod network");
    let env =
        |name: &str| pod.containers[0].env.iter().flatten().find(|e| e.name == name).and_then(|e| e.value.clone());
    assert_eq!(env("SWITCHBOARD_WEBRTC_ADVERTISE").as_deref(), Some("203.0.113.7"));
    assert!(
        env("SWITCHBOARD_WEBRTC_TURN_USERNAME_FILE").is_some()
            && env("SWITCHBOARD_WEBRTC_TURN_PASSWORD_FILE").is_some()
    );
    assert!(env("SWITCHBOARD_WEBRTC_TURN_SECRET_FILE").is_none());

    let two: Vec<&str> = with_address.iter().copied().chain(["gateway.redis.url=redis://r:6379"]).collect();
    let (ok, refused) = render(&two);
    assert!(!ok && refused.contains("a replica other than the one that answered"), "{refused}");
    let (ok, refused) = render(&["gateway.webrtc.enabled=true", urls]);
    assert!(!ok && refused.contains("needs gateway.webrtc.turn.existingSecret"), "{refused}");
    let (ok, no_tcp) = render(&["gateway.webrtc.enabled=true", "gateway.webrtc.tcpPort=0"]);
    assert!(ok && !no_tcp.contains("SWITCHBOARD_WEBRTC_TCP") && !no_tcp.contains("webrtc-tcp"), "{no_tcp}");
    let (ok, refused) = render(&["gateway.webrtc.enabled=true", "gateway.webrtc.exposure=nodePort"]);
    assert!(!ok && refused.contains("use hostNetwork or loadBalancer"), "{refused}");
}

/// The SIP edge's values: its own Deployment and Service, a client of the gateway's Service
/// (with its API key from a Secret when the gateway asks for credentials); trunks by source
/// addresses and by digest credentials mounted from Secrets, never values; on the nodes'
/// network (each pod advertising its node's IP, one a node) or behind a UDP load balancer
/// that carries the SIP port and every RTP port (one replica, its external IP given); an
/// outbound trunk; its metrics on a port of their own, on the pod but not the Service; what
/// cannot work is refused.
#[test]
fn the_sip_edge_is_its_own_deployment_exposed_by_host_network_or_a_udp_load_balancer() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{PodSpec, Service};
    let chart = chart();
    let render = |sets: &[&str]| {
        let mut args = vec!["template", "sb", chart.as_str(), "--namespace", "voice"];
        for set in sets {
            args.extend(["--set", set]);
        }
        helm(None, &args)
    };
    let pod_of = |rendered: &str| -> PodSpec {
        let deployment: Deployment =
            serde_yaml::from_str(document(rendered, "Deployment", "sb-switchboard-sip")).expect("the SIP edge");
        deployment.spec.and_then(|s| s.template.spec).expect("a pod")
    };
    let env_of = |pod: &PodSpec, name: &str| pod.containers[0].env.iter().flatten().find(|e| e.name == name).cloned();
    let (ok, off) = render(&[]);
    assert!(ok && !off.contains("switchboard-sip") && !off.contains("SWITCHBOARD_SIP"), "off by default\n{off}");

    let trunks = [
        "sip.enabled=true",
        "gateway.apiKeysSecret=api-keys",
        "sip.gatewayKey.existingSecret=sip-edge-key",
        "sip.trunks[0].name=carrier",
        "sip.trunks[0].sources={203.0.113.0/24,198.51.100.7}",
        "sip.trunks[1].name=pbx",
        "sip.trunks[1].sources={10.20.0.0/16}",
        "sip.trunks[1].credentialsSecret=pbx-sip",
        "sip.trunks[2].name=roaming",
        "sip.trunks[2].credentialsSecret=roaming-sip",
        "sip.outbound.trunk=sip:10.0.0.1:5070",
        "sip.outbound.callerId=bank-outbound",
        "sip.outbound.credentialsSecret=carrier-out",
    ];
    let (ok, rendered) = render(&trunks);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    let env = |name: &str| env_of(&pod, name).and_then(|e| e.value);
    assert_eq!(pod.containers[0].command.as_deref(), Some(&["switchboard".to_owned(), "sip".to_owned()][..]));
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let anti = pod.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref()).expect("one edge a node");
    let term = &anti.required_during_scheduling_ignored_during_execution.as_ref().expect("required")[0];
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    let node_ip = env_of(&pod, "SWITCHBOARD_NODE_IP").and_then(|e| e.value_from).and_then(|v| v.field_ref);
    assert_eq!(node_ip.map(|f| f.field_path).as_deref(), Some("status.hostIP"), "each pod its node's IP");
    let advertise = env_of(&pod, "SWITCHBOARD_SIP_ADVERTISE").expect("the advertised address");
    assert_eq!((advertise.value.as_deref(), advertise.value_from), (Some("$(SWITCHBOARD_NODE_IP)"), None));
    assert_eq!(env("SWITCHBOARD_SIP_LISTEN").as_deref(), Some("0.0.0.0:5060"));
    assert_eq!(env("SWITCHBOARD_SIP_RTP_PORTS").as_deref(), Some("20000-20999"));
    assert_eq!(env("SWITCHBOARD_SIP_GATEWAY").as_deref(), Some("ws://sb-switchboard-gateway.voice.svc:80/v1/session"));
    assert_eq!(env("SWITCHBOARD_SIP_TRUNKS").as_deref(), Some("carrier=203.0.113.0/24,198.51.100.7;pbx=10.20.0.0/16"));
    assert_eq!(
        env("SWITCHBOARD_SIP_TRUNK_CREDENTIALS").as_deref(),
        Some("pbx=/etc/switchboard-sip/trunks/pbx;roaming=/etc/switchboard-sip/trunks/roaming")
    );
    assert_eq!(env("SWITCHBOARD_SIP_OUTBOUND_TRUNK").as_deref(), Some("sip:10.0.0.1:5070"));
    assert_eq!(env("SWITCHBOARD_SIP_CALLER_ID").as_deref(), Some("bank-outbound"));
    assert_eq!(env("SWITCHBOARD_SIP_TRANSFER_METHOD").as_deref(), Some("refer"), "REFER first by default");
    // Every file the edge reads is a Secret's, mounted where its variable points.
    let mounted = |variable: &str, file: &str, secret: &str, key: &str| {
        let path = env(variable).unwrap_or_else(|| panic!("{variable} in {rendered}"));
        let path = path.split(';').find_map(|p| p.split_once('=').map(|(_, d)| d.to_owned())).unwrap_or(path);
        let dir = path.strip_suffix(&format!("/{file}")).unwrap_or(&path);
        let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == dir).expect("mounted");
        let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a volume");
        let source = volume.secret.as_ref().expect("from a Secret");
        assert_eq!(source.secret_name.as_deref(), Some(secret));
        let items = source.items.as_ref().expect("items");
        assert!(items.iter().any(|i| i.key == key && i.path == file), "{variable}: {items:?}");
    };
    mounted("SWITCHBOARD_SIP_API_KEY_FILE", "api-key", "sip-edge-key", "api-key");
    mounted("SWITCHBOARD_SIP_TRUNK_CREDENTIALS", "password", "pbx-sip", "password");
    mounted("SWITCHBOARD_SIP_OUTBOUND_CREDENTIALS", "username", "carrier-out", "username");
    let sip = document(&rendered, "Deployment", "sb-switchboard-sip");
    assert!(!sip.contains("password:") && !sip.contains("username:"), "no credentials in values:\n{sip}");
    let ports: Vec<_> =
        pod.containers[0].ports.iter().flatten().map(|p| (p.container_port, p.protocol.clone().unwrap())).collect();
    assert_eq!(ports, [(5060, "UDP".to_owned()), (5060, "TCP".to_owned()), (9060, "TCP".to_owned())]);
    // The metrics port, named for the PodMonitor, where the edge is told to serve them.
    let named = pod.containers[0].ports.iter().flatten().find(|p| p.name.as_deref() == Some("metrics"));
    assert_eq!(named.map(|p| p.container_port), Some(9060));
    assert_eq!(env("SWITCHBOARD_SIP_METRICS_LISTEN").as_deref(), Some("0.0.0.0:9060"));
    let service: Service = serde_yaml::from_str(document(&rendered, "Service", "sb-switchboard-sip")).expect("svc");
    let spec = service.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"), "the nodes' addresses, not a load balancer");
    assert_eq!(spec.ports.map(|p| p.len()), Some(2), "SIP only: RTP goes to the advertised node, metrics are scraped");

    let lb = ["sip.enabled=true", "sip.exposure=loadBalancer", "sip.rtpPorts.first=30000", "sip.rtpPorts.last=30009"];
    let (ok, refused) = render(&lb);
    assert!(!ok && refused.contains("sip.advertise is required"), "{refused}");
    let with_address: Vec<&str> = lb.iter().copied().chain(["sip.advertise=203.0.113.9", "sip.tcp=false"]).collect();
    let (ok, rendered) = render(&with_address);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    assert_eq!(pod.host_network, None);
    assert!(pod.containers[0].volume_mounts.is_none());
    // Probed on the metrics port with tcp: false too: an upgrade that dropped the probes
    // (tcp: true to false) was refused by the API server on the real node.
    for probe in [&pod.containers[0].readiness_probe, &pod.containers[0].liveness_probe] {
        let get = probe.as_ref().and_then(|p| p.http_get.as_ref()).expect("an HTTP probe");
        let metrics = k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into());
        assert_eq!(get.port, metrics, "{get:?}");
    }
    let env = |name: &str| env_of(&pod, name).and_then(|e| e.value);
    assert_eq!(env("SWITCHBOARD_SIP_ADVERTISE").as_deref(), Some("203.0.113.9"));
    assert_eq!(env("SWITCHBOARD_SIP_TCP").as_deref(), Some("false"));
    assert!(env("SWITCHBOARD_SIP_API_KEY_FILE").is_none() && env("SWITCHBOARD_SIP_TRUNKS").is_none());
    let service: Service = serde_yaml::from_str(document(&rendered, "Service", "sb-switchboard-sip")).expect("svc");
    let spec = service.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"), "callers' addresses kept");
    let ports: Vec<(i32, String)> =
        spec.ports.expect("ports").into_iter().map(|p| (p.port, p.protocol.unwrap_or_default())).collect();
    let mut expected = vec![(5060, "UDP".to_owned())];
    expected.extend((30000..=30009).map(|p| (p, "UDP".to_owned())));
    assert_eq!(
        ports, expected,
        "the SIP port and every RTP port; not the metrics, which a load balancer would publish"
    );
    let with_port: Vec<&str> = with_address.iter().copied().chain(["sip.metricsPort=9100"]).collect();
    let (ok, rendered) = render(&with_port);
    assert!(ok, "{rendered}");
    let pod = pod_of(&rendered);
    let metrics = env_of(&pod, "SWITCHBOARD_SIP_METRICS_LISTEN").and_then(|e| e.value);
    assert_eq!(metrics.as_deref(), Some("0.0.0.0:9100"));
    let ports: Vec<i32> = pod.containers[0].ports.iter().flatten().map(|p| p.container_port).collect();
    assert_eq!(ports, [5060, 9100], "SIP over UDP only (tcp false), and the metrics");

    for (sets, why) in [
        (&["sip.exposure=nodePort"][..], "use hostNetwork or loadBalancer"),
        (&["sip.transferMethod=bridge"], "use refer (REFER, dialling the person where it is refused) or dial"),
        (&["sip.rtpPorts.first=20001"], "first must be even"),
        (&["sip.port=20100"], "lies inside sip.rtpPorts"),
        (&["sip.metricsPort=20100"], "sip.metricsPort 20100: a port (1-65535) other than sip.port"),
        (&["sip.metricsPort=5060"], "other than sip.port"),
        (&["sip.exposure=loadBalancer", "sip.advertise=203.0.113.9", "sip.replicas=2"], "a replica other than"),
        (&["sip.exposure=loadBalancer", "sip.advertise=203.0.113.9", "sip.rtpPorts.last=29999"], "at most 1000"),
        (&["gateway.apiKeysSecret=api-keys"], "needs sip.gatewayKey.existingSecret"),
        (&["gateway.enabled=false"], "needs sip.gatewayUrl"),
        (&["sip.trunks[0].name=Carrier", "sip.trunks[0].sources={10.0.0.1}"], "lower-case"),
        (&["sip.trunks[0].name=carrier"], "give its sources"),
        (
            &["sip.trunks[0].name=carrier", "sip.trunks[0].sources={10.0.0.1}", "sip.trunks[0].password=x"],
            "never from values",
        ),
        (&["sip.outbound.trunk=sip:10.0.0.1"], "needs sip.outbound.callerId"),
        // --set reads +442079460000 as a number: refused rather than sent without its +.
        (&["sip.outbound.trunk=sip:10.0.0.1", "sip.outbound.callerId=+442079460000"], "must be a string"),
    ] {
        let sets: Vec<&str> = ["sip.enabled=true"].into_iter().chain(sets.iter().copied()).collect();
        let (ok, refused) = render(&sets);
        assert!(!ok && refused.contains(why), "{sets:?}: {refused}");
    }
}

/// Only the gateway mounts its private key; the operator follows the public key's
/// ConfigMap (which the chart creates empty), or gets `runtime.gatewayPublicKey`.
fn gateway_key_is_the_gateways_alone(rendered: &str) {
    let operator = document(rendered, "Deployment", "sb-switchboard");
    assert!(!operator.contains("secret"), "the operator mounts no Secret:\n{operator}");
    assert!(!operator.contains("SWITCHBOARD_GATEWAY_KEY_FILE"), "{operator}");
    assert!(
        operator.contains(
            "- name: SWITCHBOARD_GATEWAY_KEY_CONFIGMAP\n              value: \"sb-switchboard-gateway-public-key\""
        ),
        "{operator}"
    );
    let gateway = document(rendered, "Deployment", "sb-switchboard-gateway");
    assert!(gateway.contains("secretName: sb-switchboard-gateway-key"), "{gateway}");
    assert!(gateway.contains("value: \"sb-switchboard-gateway-public-key\""), "{gateway}");
    let public = document(rendered, "ConfigMap", "sb-switchboard-gateway-public-key");
    assert!(!public.contains("\ndata:"), "created empty; the gateway writes the key:\n{public}");

    let key = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";
    let value = format!("runtime.gatewayPublicKey={key}");
    let (ok, explicit) =
        helm(None, &["template", "sb", &chart(), "--namespace", "switchboard-system", "--set", &value]);
    assert!(ok, "{explicit}");
    let operator = document(&explicit, "Deployment", "sb-switchboard");
    assert!(operator.contains(&format!("value: \"{key}\"")) && !operator.contains("KEY_CONFIGMAP"), "{operator}");
    let leader = document(&explicit, "Role", "sb-switchboard-leader");
    assert!(!leader.contains("gateway-public-key"), "nothing to read with an explicit key:\n{leader}");
}
