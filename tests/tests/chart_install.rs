//! The Helm chart installed on the real control plane: its RBAC is enough for the real
//! controller — run here as the chart's ServiceAccount (impersonated) — to reconcile the
//! banking examples, cluster-wide and namespaced (`operator.watchNamespace`: Roles only), and
//! no more than that. The operator never gets the gateway's private key: the gateway's own
//! publication of its public key, run as the gateway's ServiceAccount, is what lets the
//! Agents' pods be built.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use switchboard_crds::Agent;
use switchboard_crds::common::{CONDITION_ACCEPTED, find_condition};
use switchboard_crds::contract::env::GATEWAY_PUBLIC_KEY;
use switchboard_crds::gateway_key::PublicKey;
use switchboard_crds::routing::RoutingTable;
use switchboard_gateway::publish::publish;
use switchboard_operator::build::network_policy::NAME as NETWORK_POLICY;
use switchboard_operator::gateway_key::REASON_KEY_MISSING;
use switchboard_tests::cluster::{TestNamespace, cluster, kubectl};
use switchboard_tests::helm::{KEY, chart, cluster_wide_operator_turn, helm};
use switchboard_tests::manifests::{apply_yaml, install_crds};
use switchboard_tests::operator::{self, routing_table};
use switchboard_tests::{repo_root, wait};

/// Whether ServiceAccount `account` of `release_ns` may `verb` `resource` (as kubectl names
/// it: `resource.group/name`) in `namespace` (None: every namespace), asked of the API
/// server's authorizer (a SubjectAccessReview, what `kubectl auth can-i --as` does).
async fn can_i(
    client: &Client,
    release_ns: &str,
    account: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> bool {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let (resource, name) = resource.split_once('/').map_or((resource, None), |(r, n)| (r, Some(n.to_owned())));
    let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
    let (resource, subresource) = match name.as_deref() {
        Some("status") => (resource, Some("status".to_owned())),
        _ => (resource, None),
    };
    let name = name.filter(|n| n != "status");
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{release_ns}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{release_ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: namespace.map(str::to_owned),
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                name,
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&Default::default(), &review).await.expect("SubjectAccessReview");
    answer.status.is_some_and(|s| s.allowed)
}

/// Installs the chart into a fresh namespace (Agents there too, or in `watch` — a second
/// namespace — for a namespaced install), runs the real controller as the chart's
/// ServiceAccount (impersonated) until it reconciles the banking examples, and checks the
/// account may do nothing it does not need.
async fn install_and_reconcile_as_the_chart(namespaced: bool) {
    // The cluster-wide install runs alone: its operator reconciles every namespace's Agents,
    // the namespaced install's too, and once it has its own gateway's key it accepts them, so
    // the namespaced install could not see its own operator wait for its key.
    let _turn = cluster_wide_operator_turn(!namespaced);
    let cluster = cluster().await.expect("control plane");
    install_crds(&cluster.client).await.expect("CRDs");
    let ns = TestNamespace::new(&cluster, "chart").await.expect("namespace");
    let watched =
        if namespaced { Some(TestNamespace::new(&cluster, "chart-agents").await.expect("namespace")) } else { None };
    let agents_ns = watched.as_ref().unwrap_or(&ns);
    let release = ns.name.clone();
    // crds.install=false: the test server already has the CRDs (without the CEL rules it
    // cannot store, see install_crds); other tests share them. No replicas of the chart's
    // operator and gateway: the test runs the controller itself and publishes the gateway's
    // key as the gateway would, and with a real node up (`SWITCHBOARD_REAL_NODE=1`) the
    // chart's own pods would run beside it and publish a key before the test looks for the
    // Agents that wait for one.
    let chart = chart();
    let mut install = vec![
        "install",
        &release,
        &chart,
        "--namespace",
        &ns.name,
        "--set",
        "crds.install=false",
        "--set",
        "operator.replicas=0",
        "--set",
        "gateway.replicas=0",
        "--wait=false",
    ];
    let watch_value = format!("operator.watchNamespace={}", agents_ns.name);
    if namespaced {
        install.extend(["--set", &watch_value]);
    }
    let (ok, out) = helm(Some(&cluster.kubeconfig), &install);
    assert!(ok, "{out}");

    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(ns.client(), &ns.name);
    let deployment = deployments.get(&format!("{release}-switchboard")).await.expect("operator Deployment");
    let pod = deployment.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert_eq!(pod.containers[0].command.as_deref(), Some(&["switchboard-operator".to_owned(), "run".to_owned()][..]));

    // The controller, with the chart ServiceAccount's rights only, following the gateway's
    // public key as the chart tells it to.
    let operator_account = format!("{release}-switchboard");
    let gateway_account = format!("{release}-switchboard-gateway");
    let key_config_map = format!("{release}-switchboard-gateway-public-key");
    let as_chart = impersonating(&cluster.kubeconfig, &ns.name, &operator_account).await;
    let mut args = operator::args(&ns.name, "chart-operator", Default::default());
    args.namespace = namespaced.then(|| agents_ns.name.clone());
    args.gateway_key_config_map = Some(key_config_map.clone());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let metrics = switchboard_operator::metrics::Metrics::new().expect("metrics");
    let task = tokio::spawn(switchboard_operator::run::run(args, as_chart, metrics, shutdown.clone()));

    apply_examples(&ns.client(), &agents_ns.name, !namespaced).await;
    let agents: Api<Agent> = Api::namespaced(ns.client(), &agents_ns.name);
    // The chart's ConfigMap is empty until the gateway starts: the operator reads it (its
    // rights suffice) and the Agents wait for the key.
    let no_key_yet = format!("ConfigMap {}/{key_config_map} has no `public-key`", ns.name);
    every_agent(&agents, "Accepted=False (GatewayKeyMissing: the ConfigMap has no key yet)", |c| {
        c.status == "False" && c.reason == REASON_KEY_MISSING && c.message.contains(&no_key_yet)
    })
    .await;
    // The gateway's start-up publication, with the gateway ServiceAccount's rights only.
    let as_gateway = impersonating(&cluster.kubeconfig, &ns.name, &gateway_account).await;
    let key: PublicKey = KEY.parse().expect("a key");
    publish(as_gateway, &ns.name, &key_config_map, &key).await.expect("the gateway may publish its key");
    every_agent(&agents, "Accepted=True", |c| c.status == "True").await;
    let runtimes: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(ns.client(), &agents_ns.name);
    // (Not the chart's own Deployments, in the same namespace in a cluster-wide install.)
    let ours = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=switchboard-operator");
    let runtimes = runtimes.list(&ours).await.expect("Deployments").items;
    assert_eq!(runtimes.len(), 4);
    for runtime in runtimes {
        let env = runtime.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].env.clone().unwrap_or_default());
        let key_env = env.unwrap_or_default().into_iter().find(|e| e.name == GATEWAY_PUBLIC_KEY);
        assert_eq!(key_env.and_then(|e| e.value).as_deref(), Some(KEY), "runtime pods get the published key");
    }
    // The table is published shortly (debounced) after the statuses.
    // (A cluster-wide operator also routes Agents of other tests running at the same time.)
    wait::until("a routing table with the 4 Agents", Duration::from_secs(20), || async {
        let table = routing_table(&ns).await?;
        let ours = |t: &RoutingTable| t.routes.iter().filter(|r| r.namespace == agents_ns.name).count();
        Ok::<_, anyhow::Error>(table.filter(|t| ours(t) == 4))
    })
    .await
    .expect("the controller publishes the routing table with the chart's RBAC");
    assert!(!task.is_finished(), "the operator stopped: missing permissions?");
    // The namespace's NetworkPolicy, owned by its 4 Agents, admitting the gateway from the
    // release namespace (by its pod labels alone when the Agents run there too).
    let policies: Api<k8s_openapi::api::networking::v1::NetworkPolicy> = Api::namespaced(ns.client(), &agents_ns.name);
    let policy = wait::until("the NetworkPolicy owned by the 4 Agents", Duration::from_secs(10), || async {
        let policy = policies.get_opt(NETWORK_POLICY).await?;
        Ok::<_, kube::Error>(policy.filter(|p| p.metadata.owner_references.as_ref().map(Vec::len) == Some(4)))
    })
    .await
    .expect("the operator's NetworkPolicy");
    let gateway = serde_json::to_value(&policy.spec.as_ref().and_then(|s| s.ingress.as_ref()).expect("ingress")[0])
        .expect("json")["from"][0]
        .clone();
    assert_eq!(
        gateway["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].as_str(),
        namespaced.then_some(ns.name.as_str())
    );

    // Least privilege: nothing the operator does not use.
    let admin = ns.client();
    let may = |verb: &'static str, resource: &'static str, namespace: Option<String>| {
        let (admin, release_ns, account) = (admin.clone(), ns.name.clone(), operator_account.clone());
        async move { can_i(&admin, &release_ns, &account, verb, resource, namespace.as_deref()).await }
    };
    let gateway_may = |verb: &'static str, resource: String| {
        let (admin, release_ns, account) = (admin.clone(), ns.name.clone(), gateway_account.clone());
        async move { can_i(&admin, &release_ns, &account, verb, &resource, Some(&release_ns)).await }
    };
    let release_ns = Some(ns.name.clone());
    // Only the gateway reads its private key (through its pod's mount; no API right), and
    // the only object it may write is its public key's ConfigMap.
    let secret = format!("secrets/{release}-switchboard-gateway-key");
    assert!(!can_i(&admin, &ns.name, &operator_account, "get", &secret, Some(&ns.name)).await, "no private key");
    assert!(gateway_may("patch", format!("configmaps/{key_config_map}")).await, "sanity");
    for (verb, resource) in [
        ("patch", "configmaps/switchboard-routes".to_owned()),
        ("create", "configmaps".to_owned()),
        ("update", format!("configmaps/{key_config_map}")),
        ("delete", format!("configmaps/{key_config_map}")),
        ("get", secret.clone()),
    ] {
        assert!(!gateway_may(verb, resource.clone()).await, "the gateway's account may {verb} {resource}");
    }
    let here = Some(agents_ns.name.clone());
    assert!(
        may("patch", "deployments.apps", here.clone()).await
            && may("watch", "agents.switchboard.dev", here.clone()).await,
        "sanity"
    );
    for verb in ["get", "watch", "create", "patch"] {
        assert!(may(verb, "networkpolicies.networking.k8s.io", here.clone()).await, "{verb} networkpolicies");
    }
    for (verb, resource) in [
        ("update", "networkpolicies.networking.k8s.io"),
        ("delete", "networkpolicies.networking.k8s.io"),
        ("update", "deployments.apps"),
        ("update", "configmaps"),
        ("update", "services"),
        ("update", "horizontalpodautoscalers.autoscaling"),
        ("update", "agents.switchboard.dev/status"),
        ("delete", "deployments.apps"),
        ("delete", "configmaps"),
        ("delete", "services"),
        ("create", "pods"),
        ("get", "secrets"),
        ("patch", "serviceaccounts"),
        ("update", "agents.switchboard.dev"),
    ] {
        assert!(
            !may(verb, resource, here.clone()).await,
            "the operator's account may {verb} {resource} in {}",
            agents_ns.name
        );
    }
    assert!(
        !may("update", "leases.coordination.k8s.io/someone-elses-lease", Some(ns.name.clone())).await,
        "only its own Lease"
    );
    assert!(
        !may("get", "customresourcedefinitions.apiextensions.k8s.io", None).await,
        "no cluster-wide reads it does not need"
    );
    if namespaced {
        assert!(
            !may("list", "agents.switchboard.dev", None).await,
            "a namespaced install reads Agents only where it watches"
        );
        assert!(!may("list", "agents.switchboard.dev", Some("default".to_owned())).await);
        assert!(!may("patch", "deployments.apps", Some("default".to_owned())).await);
        let routes_only = may("patch", "configmaps/switchboard-routes", Some(ns.name.clone())).await
            && !may("patch", "configmaps/not-the-routing-table", Some(ns.name.clone())).await;
        assert!(routes_only, "in the release namespace it writes only the routing table");
        let key_resource = format!("configmaps/{key_config_map}");
        for (verb, allowed) in [("watch", true), ("get", true), ("patch", false), ("update", false)] {
            let answer = can_i(&admin, &ns.name, &operator_account, verb, &key_resource, release_ns.as_deref()).await;
            assert_eq!(answer, allowed, "the operator may {verb} the gateway's public key: {answer}");
        }
        assert!(!may("watch", "configmaps/not-the-gateway-key", release_ns.clone()).await, "that one only");
        let (ok, bindings) =
            kubectl(&cluster.kubeconfig, None, &["get", "clusterrolebindings,clusterroles", "-o", "name"])
                .expect("kubectl");
        assert!(ok, "{bindings}");
        assert!(!bindings.contains(&release), "a namespaced install has no cluster-wide RBAC:\n{bindings}");
    } else {
        assert!(may("list", "agents.switchboard.dev", None).await, "a cluster-wide install watches every namespace");
    }

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("operator stops within 30 s")
        .expect("operator task")
        .expect("operator ends without error");

    let (ok, out) = helm(Some(&cluster.kubeconfig), &["uninstall", &release, "--namespace", &ns.name]);
    assert!(ok, "{out}");
}

/// A client acting as ServiceAccount `namespace/account` (impersonated: its rights only).
async fn impersonating(kubeconfig: &std::path::Path, namespace: &str, account: &str) -> Client {
    let mut config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{account}"));
    Client::try_from(config).expect("client")
}

/// Waits until the 4 banking Agents' `Accepted` conditions all pass `check`.
/// The Example Bank, applied into `namespace`. `own_number`: triage claims a number of the
/// namespace's own in place of the example's. A cluster-wide operator sees every namespace of
/// this shared control plane, where other tests apply the example at the same time (and
/// namespaces of tests that just ended are still being deleted); a number is one Agent's in
/// an operator's view, the earliest claim keeping it, so this copy's triage would be refused
/// (`NumberTaken`) whenever another copy is older. The number stays in the same fictional
/// range (Ofcom's drama range, +44 20 7946 0xxx), picked by the namespace's name.
async fn apply_examples(client: &Client, namespace: &str, own_number: bool) {
    const EXAMPLE_NUMBER: &str = "\"+442079460000\"";
    let examples = repo_root().join("examples/banking");
    for entry in std::fs::read_dir(&examples).expect("the examples") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let mut text = std::fs::read_to_string(&path).expect("an example");
        if own_number && path.ends_with("triage.yaml") {
            let pick = namespace.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 999 + 1;
            let own = text.replace(EXAMPLE_NUMBER, &format!("\"+442079460{pick:03}\""));
            assert_ne!(own, text, "the example's triage claims {EXAMPLE_NUMBER}");
            text = own;
        }
        apply_yaml(client, namespace, &text).await.unwrap_or_else(|e| panic!("applying {}: {e:#}", path.display()));
    }
}

async fn every_agent(agents: &Api<Agent>, what: &str, check: impl Fn(&Condition) -> bool) {
    wait::until(&format!("every Agent {what}"), Duration::from_secs(60), || {
        let (agents, check) = (agents.clone(), &check);
        async move {
            let list = agents.list(&Default::default()).await?;
            let all = list.items.iter().all(|a| {
                a.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED)).is_some_and(check)
            });
            Ok::<_, kube::Error>((list.items.len() == 4 && all).then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the controller reconciles with the chart's RBAC: {e}"));
}

#[tokio::test]
async fn the_chart_installs_and_its_rbac_suffices_for_the_controller() {
    install_and_reconcile_as_the_chart(false).await;
}

#[tokio::test]
async fn a_namespaced_install_uses_roles_only_and_they_suffice_for_the_controller() {
    install_and_reconcile_as_the_chart(true).await;
}
