//! The operator against the real kube-apiserver + kube-controller-manager, running
//! in-process and scoped to each test's namespace: the banking examples become the right
//! children with the right owners and statuses; a Persona edit rolls every Deployment that
//! uses it; a deleted Agent's children are garbage-collected; a missing Persona is reported
//! and then picked up without a restart; hand edits are put back; autoscaling comes and goes.

mod common;

use std::time::Duration;

use common::{accepted, agent, setup, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Service};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use switchboard_crds::{Agent, Persona, RuntimeSpec, Workflow, resolve};
use switchboard_operator::build::hpa::{HPA_V2BETA2, api_resource};
use switchboard_operator::build::{CONFIG_HASH_ANNOTATION, build};
use switchboard_operator::settings::{BuildSettings, DEFAULT_IMAGE};
use switchboard_tests::manifests::{apply_path, apply_yaml};
use switchboard_tests::operator::routing_table;
use switchboard_tests::repo_root;
use switchboard_tests::wait::until;

const BANKING: [&str; 4] = ["banking", "disputes", "idv", "triage"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banking_examples_become_children_with_owners_and_accepted_statuses() {
    // Not beside the chart's cluster-wide operator (chart_install.rs): it reconciles this
    // namespace too, and where another test's copy of the Example Bank claimed triage's
    // number earlier it would write this triage `NumberTaken` while ours writes it accepted
    // (a number is one Agent's in an operator's view, and its view is every namespace).
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let (ns, _op) = setup("op-banking").await;
    let client = ns.client();
    // The fee schedule the banking agent's fees skill reads comes with the agents.
    for name in BANKING.iter().chain(&["fees"]) {
        let file = repo_root().join(format!("examples/banking/{name}.yaml"));
        apply_path(&client, &ns.name, &file).await.expect("examples apply");
    }
    for name in BANKING {
        wait_accepted(&ns, name).await;
    }
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let personas: Api<Persona> = Api::namespaced(client.clone(), &ns.name);
    let workflows: Api<Workflow> = Api::namespaced(client.clone(), &ns.name);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let settings = BuildSettings { hpa_api_version: Some(HPA_V2BETA2.into()), ..Default::default() };
    for name in BANKING {
        let a = agents.get(name).await.expect("agent");
        let persona = personas.get(&a.spec.persona_ref.name).await.expect("persona");
        let workflow = workflows.get(&a.spec.workflow_ref.name).await.expect("workflow");
        let mut config_maps = switchboard_crds::agent::ConfigMaps::new();
        for read in switchboard_crds::agent::referenced_config_maps(&a.spec) {
            let data = cms.get(&read).await.expect("a ConfigMap the agent reads").data.unwrap_or_default();
            config_maps.insert(read, data);
        }
        let desired = build(&a, &resolve(&a, &persona, &workflow, &config_maps), &settings);

        // Status: Accepted, Ready=False (no pods run here) with counts, endpoint.
        let status = a.status.clone().expect("status");
        assert_eq!(status.observed_generation, a.metadata.generation);
        assert_eq!(status.endpoint.as_deref(), Some(format!("{name}.{}.svc:8080", ns.name).as_str()));
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready condition");
        assert_eq!(ready.status, "False");
        assert!(ready.message.ends_with("replicas available"), "{}", ready.message);

        // ConfigMap: the resolved RuntimeSpec of this Agent in this namespace.
        let cm = cms.get(name).await.expect("configmap");
        let text = cm.data.as_ref().and_then(|d| d.get("runtime.json")).expect("runtime.json");
        let spec = RuntimeSpec::parse(text).expect("a RuntimeSpec");
        assert_eq!((spec.agent.name.as_str(), spec.agent.namespace.as_str()), (name, ns.name.as_str()));
        assert_eq!(spec.persona.name, a.spec.persona_ref.name);
        assert_eq!(cm.data, desired.config_map.data);

        // Deployment: the pod template the build makes, the default image, MODE.
        let d = deployments.get(name).await.expect("deployment");
        let template = d.spec.as_ref().map(|s| &s.template).expect("template");
        let want = desired.deployment.spec.as_ref().map(|s| &s.template).expect("desired template");
        assert_eq!(
            template.metadata.as_ref().and_then(|m| m.annotations.as_ref()).map(|a| &a[CONFIG_HASH_ANNOTATION]),
            want.metadata.as_ref().and_then(|m| m.annotations.as_ref()).map(|a| &a[CONFIG_HASH_ANNOTATION]),
        );
        let container = &template.spec.as_ref().expect("pod spec").containers[0];
        let want_container = &want.spec.as_ref().expect("desired pod spec").containers[0];
        assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));
        assert_eq!(container.env, want_container.env);
        assert!(container.env.iter().flatten().any(
            |e| e.name == switchboard_crds::contract::env::MODE && e.value.as_deref() == Some(a.spec.mode.as_str())
        ));
        assert_eq!(container.security_context, want_container.security_context);
        assert_eq!(container.readiness_probe, want_container.readiness_probe);

        let svc = services.get(name).await.expect("service");
        let port = &svc.spec.as_ref().and_then(|s| s.ports.clone()).expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));

        // Every child is owned (controller) by the Agent and labelled.
        for meta in [&cm.metadata, &d.metadata, &svc.metadata] {
            let owners = meta.owner_references.clone().unwrap_or_default();
            assert_eq!(owners.len(), 1, "{name}: {owners:?}");
            assert_eq!(
                (owners[0].kind.as_str(), owners[0].uid.as_str()),
                ("Agent", a.uid().unwrap_or_default().as_str())
            );
            assert_eq!(owners[0].controller, Some(true));
            let labels = meta.labels.clone().unwrap_or_default();
            assert_eq!(labels.get("app.kubernetes.io/managed-by").map(String::as_str), Some("switchboard-operator"));
            assert_eq!(labels.get("app.kubernetes.io/instance").map(String::as_str), Some(name));
        }
        assert_eq!(accepted(&persona).map(|c| c.status), Some("True".into()), "Persona {name} Accepted");
        let workflow = workflows.get(&a.spec.workflow_ref.name).await.expect("workflow");
        assert_eq!(accepted(&workflow).map(|c| c.status), Some("True".into()), "Workflow {name} Accepted");
    }

    // triage autoscales: an HPA (v2beta2 on this 1.20 server), and the operator does not own replicas.
    let hpas: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &api_resource(HPA_V2BETA2));
    let hpa = hpas.get("triage").await.expect("triage HPA");
    assert_eq!(hpa.data["spec"]["maxReplicas"], 4);
    assert_eq!(hpa.data["spec"]["scaleTargetRef"]["name"], "triage");
    let triage = deployments.get("triage").await.expect("triage");
    let ours = triage.managed_fields().iter().find(|m| m.manager.as_deref() == Some("switchboard-operator")).cloned();
    let fields = serde_json::to_string(&ours.expect("operator field manager").fields_v1).unwrap_or_default();
    assert!(!fields.contains("f:replicas"), "the operator must not own replicas of an autoscaled Deployment: {fields}");
    assert!(hpas.get_opt("banking").await.expect("get").is_none(), "no HPA without autoscaling");

    let table = until("4 routes", Duration::from_secs(5), || async {
        Ok::<_, anyhow::Error>(routing_table(&ns).await?.filter(|t| t.routes.len() == 4))
    })
    .await
    .expect("routing table");
    let triage_route = table.route(&ns.name, "triage").expect("triage route");
    assert_eq!(triage_route.service, format!("triage.{}.svc", ns.name));
    // idv for callers who must prove who they are; banking for a customer the bank app
    // vouches for (spec.appContext.identity).
    assert_eq!(triage_route.handoffs, ["idv", "banking"]);

    let (ok, out) = ns.kubectl(&["get", "agents"]).expect("kubectl");
    assert!(ok, "{out}");
    assert!(out.lines().any(|l| l.starts_with("triage") && l.contains("hybrid") && l.contains("True")), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_edit_rolls_every_deployment_that_uses_it() {
    let (ns, _op) = setup("op-persona").await;
    let client = ns.client();
    let base = common::objects("shared", "wf")
        + &common::persona("solo", "Solo")
        + &agent("a1", "shared", "wf", "")
        + &agent("a2", "shared", "wf", "")
        + &agent("a3", "solo", "wf", "");
    apply_yaml(&client, &ns.name, &base).await.expect("apply");
    for name in ["a1", "a2", "a3"] {
        wait_accepted(&ns, name).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let hash = |name: &'static str| {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(name).await?;
            Ok::<_, anyhow::Error>(
                d.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).unwrap_or_default()
                    [CONFIG_HASH_ANNOTATION]
                    .clone(),
            )
        }
    };
    let before = [hash("a1").await.expect("a1"), hash("a2").await.expect("a2"), hash("a3").await.expect("a3")];
    apply_yaml(&client, &ns.name, &common::persona("shared", "Renamed")).await.expect("persona edit");
    for (i, name) in ["a1", "a2"].into_iter().enumerate() {
        let old = before[i].clone();
        until(&format!("{name}'s pod template to change"), Duration::from_secs(10), || {
            let (hash, old) = (hash(name), old.clone());
            async move { Ok::<_, anyhow::Error>(Some(hash.await?).filter(|h| *h != old)) }
        })
        .await
        .expect("rolled");
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let text = cms.get("a1").await.expect("cm").data.unwrap_or_default()["runtime.json"].clone();
    assert_eq!(RuntimeSpec::parse(&text).expect("spec").persona.spec.display_name, "Renamed");
    assert_eq!(hash("a3").await.expect("a3"), before[2], "an Agent with another Persona does not roll");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_agent_lets_the_garbage_collector_remove_its_children() {
    let (ns, _op) = setup("op-gc").await;
    let client = ns.client();
    apply_yaml(&client, &ns.name, &(common::objects("p", "wf") + &agent("doomed", "p", "wf", "")))
        .await
        .expect("apply");
    wait_accepted(&ns, "doomed").await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    agents.delete("doomed", &DeleteParams::default()).await.expect("delete");
    let selector = "switchboard.dev/agent=doomed";
    until("children to be garbage-collected", Duration::from_secs(30), || {
        let client = client.clone();
        let ns = ns.name.clone();
        async move {
            let lp = ListParams::default().labels(selector);
            let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns).list_metadata(&lp).await?.items.len();
            let ds = Api::<Deployment>::namespaced(client.clone(), &ns).list_metadata(&lp).await?.items.len();
            let svcs = Api::<Service>::namespaced(client.clone(), &ns).list_metadata(&lp).await?.items.len();
            Ok::<_, anyhow::Error>((cms + ds + svcs == 0).then_some(()))
        }
    })
    .await
    .expect("garbage collected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_persona_is_reported_then_picked_up_without_a_restart() {
    let (ns, op) = setup("op-missing").await;
    let client = ns.client();
    let yaml = common::workflow("wf") + &agent("lonely", "ghost", "wf", "");
    apply_yaml(&client, &ns.name, &yaml).await.expect("apply");
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let condition = until("Accepted=False", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(accepted(&agents.get("lonely").await?).filter(|c| c.status == "False"))
    })
    .await
    .expect("not accepted");
    assert_eq!(condition.reason, "PersonaNotFound");
    let expected = format!("PersonaNotFound: persona \"ghost\" does not exist in namespace \"{}\"", ns.name);
    assert!(condition.message.contains(&expected), "{}", condition.message);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("lonely").await.expect("get").is_none(), "no children for a rejected Agent");
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    until("a PersonaNotFound Warning event", Duration::from_secs(10), || async {
        let list = events.list(&ListParams::default()).await?;
        Ok::<_, anyhow::Error>(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("PersonaNotFound")
                && e.type_.as_deref() == Some("Warning")
                && e.involved_object.name.as_deref() == Some("lonely")
        }))
    })
    .await
    .expect("event");

    apply_yaml(&client, &ns.name, &common::persona("ghost", "Casper")).await.expect("persona");
    wait_accepted(&ns, "lonely").await;
    until("the Deployment", Duration::from_secs(10), || async { deployments.get_opt("lonely").await })
        .await
        .expect("deployment");
    assert!(!op.is_finished(), "the same operator, never restarted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edits_of_children_are_put_back() {
    let (ns, _op) = setup("op-drift").await;
    let client = ns.client();
    apply_yaml(&client, &ns.name, &(common::objects("p", "wf") + &agent("steady", "p", "wf", "")))
        .await
        .expect("apply");
    wait_accepted(&ns, "steady").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let image = |d: &Deployment| {
        d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|p| p.containers[0].image.clone())
    };
    let edit = serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "runtime", "image": "evil:latest"}]}}}});
    let edited = deployments
        .patch(
            "steady",
            &PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() },
            &Patch::Strategic(&edit),
        )
        .await
        .expect("hand edit");
    assert_eq!(image(&edited).as_deref(), Some("evil:latest"));
    until("the image to be put back", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(image(&deployments.get("steady").await?).filter(|i| i == DEFAULT_IMAGE))
    })
    .await
    .expect("reverted");

    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    services.delete("steady", &DeleteParams::default()).await.expect("delete service");
    until("the Service to come back", Duration::from_secs(10), || async { services.get_opt("steady").await })
        .await
        .expect("recreated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_adds_an_hpa_and_removing_it_prunes_the_hpa() {
    let (ns, _op) = setup("op-hpa").await;
    let client = ns.client();
    let scaled = agent("elastic", "p", "wf", "  autoscaling: {minReplicas: 2, maxReplicas: 5}\n");
    apply_yaml(&client, &ns.name, &(common::objects("p", "wf") + &scaled)).await.expect("apply");
    wait_accepted(&ns, "elastic").await;
    let hpas: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &api_resource(HPA_V2BETA2));
    let hpa = hpas.get("elastic").await.expect("HPA");
    assert_eq!(
        (hpa.data["spec"]["minReplicas"].as_i64(), hpa.data["spec"]["maxReplicas"].as_i64()),
        (Some(2), Some(5))
    );

    apply_yaml(&client, &ns.name, &agent("elastic", "p", "wf", "  replicas: 3\n")).await.expect("apply fixed");
    until("the HPA to be pruned", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(hpas.get_opt("elastic").await?.is_none().then_some(()))
    })
    .await
    .expect("pruned");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    until("replicas 3", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(deployments.get("elastic").await?.spec.and_then(|s| s.replicas).filter(|r| *r == 3))
    })
    .await
    .expect("replicas");
}
