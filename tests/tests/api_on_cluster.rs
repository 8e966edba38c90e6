//! The API against the real kube-apiserver: the generated CRDs are accepted, the examples
//! apply with server-side apply and are defaulted as the Rust types say, invalid objects
//! are refused with a clear message, and `kubectl explain` shows the field docs.

use kube::Api;
use kube::api::{Patch, PatchParams};
use switchboard_crds::{Agent, Catalog, Mode, Workflow};
use switchboard_tests::cluster::{TestNamespace, cluster};
use switchboard_tests::manifests::{FIELD_MANAGER, apply_path, crds_for_test_server, install_crds};
use switchboard_tests::repo_root;

async fn namespace(prefix: &str) -> TestNamespace {
    let cluster = cluster().await.expect("control plane");
    install_crds(&cluster.client).await.expect("CRDs install and become Established");
    TestNamespace::new(&cluster, prefix).await.expect("namespace")
}

#[tokio::test]
async fn examples_apply_and_the_server_defaults_match_the_types() {
    let ns = namespace("examples").await;
    let applied =
        apply_path(&ns.client(), &ns.name, &repo_root().join("examples/banking")).await.expect("examples apply");
    assert_eq!(applied.len(), 13, "4 agents x (Persona, Workflow, Agent), and the banking Agent's fees ConfigMap");

    // Read back through the typed API: what the server stored (with its schema defaults)
    // equals what the Rust types make of the same files.
    let local = Catalog::load_paths(&[repo_root().join("examples/banking")]).expect("examples load");
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    for mine in local.agents() {
        let name = kube::ResourceExt::name_any(mine);
        let stored = agents.get(&name).await.expect("agent stored");
        assert_eq!(stored.spec, mine.spec, "server-side defaults of Agent {name} differ from the Rust defaults");
    }
    let idv = agents.get("idv").await.expect("idv");
    assert_eq!(idv.spec.mode, Mode::Voice);
    assert_eq!(idv.spec.model.voice_model_id, "amazon.nova-2-sonic-v1:0");
    let workflows: Api<Workflow> = Api::namespaced(ns.client(), &ns.name);
    assert_eq!(workflows.get("idv").await.expect("workflow").spec.entry, "collect");
}

#[tokio::test]
async fn objects_that_violate_the_schema_are_refused_with_a_clear_message() {
    let ns = namespace("schema").await;
    let agents: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ns.client(), &ns.name, &kube::discovery::ApiResource::erase::<Agent>(&()));
    let apply = |body: serde_json::Value| {
        let agents = agents.clone();
        async move {
            let obj: kube::api::DynamicObject = serde_json::from_value(body).expect("object");
            agents.patch("bad", &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&obj)).await
        }
    };
    let base = serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "bad"},
        "spec": {"mode": "telepathy", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}}
    });
    let err = apply(base.clone()).await.expect_err("unknown mode is refused").to_string();
    assert!(err.contains("spec.mode") && err.contains("Unsupported value: \"telepathy\""), "{err}");
    assert!(err.contains("\"voice\"") && err.contains("\"hybrid\""), "the message lists the allowed modes: {err}");

    let mut missing = base.clone();
    missing["spec"] = serde_json::json!({"mode": "text", "personaRef": {"name": "p"}});
    let err = apply(missing).await.expect_err("missing workflowRef is refused").to_string();
    assert!(err.contains("spec.workflowRef: Required value"), "{err}");

    let mut bad_tool = base;
    bad_tool["spec"] = serde_json::json!({
        "mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"},
        "tools": [{"name": "1bad name", "description": "x", "builtin": {"kind": "currentTime"}, "cacheTtlSeconds": -1}]
    });
    let err = apply(bad_tool).await.expect_err("bad tool is refused").to_string();
    assert!(err.contains("spec.tools.name") || err.contains("spec.tools[0].name"), "{err}");
    assert!(err.contains("cacheTtlSeconds"), "{err}");

    // Node ids, tool names and handoff targets are list-map keys: the server refuses duplicates.
    let workflows: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ns.client(), &ns.name, &kube::discovery::ApiResource::erase::<Workflow>(&()));
    let dup: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Workflow", "metadata": {"name": "dup"},
        "spec": {"entry": "s", "nodes": [{"id": "s"}, {"id": "s", "kind": "end"}]}
    }))
    .expect("object");
    let err = workflows
        .patch("dup", &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&dup))
        .await
        .expect_err("duplicate node ids are refused")
        .to_string();
    assert!(err.contains("duplicate entries for key [id=\"s\"]"), "{err}");
}

#[tokio::test]
async fn kubectl_applies_crds_then_examples_and_explains_fields() {
    let ns = namespace("kubectl").await;
    // crds/*.yaml less the CEL rules the 1.20 test server cannot store (see install_crds).
    let crds = std::env::temp_dir().join(format!("switchboard-crds-{}", std::process::id()));
    std::fs::create_dir_all(&crds).expect("temp dir");
    for (file, crd) in crds_for_test_server().expect("crds") {
        std::fs::write(crds.join(file), serde_yaml::to_string(&crd).expect("yaml")).expect("write");
    }
    let (ok, out) =
        ns.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &crds.to_string_lossy()]).expect("kubectl");
    let _ = std::fs::remove_dir_all(&crds);
    assert!(ok, "{out}");
    let examples = repo_root().join("examples/banking");
    let (ok, out) = ns.kubectl(&["apply", "--server-side", "-f", &examples.to_string_lossy()]).expect("kubectl");
    assert!(ok, "{out}");
    assert!(out.contains("agent.switchboard.dev/triage serverside-applied"), "{out}");

    let (ok, out) = ns.kubectl(&["get", "agents"]).expect("kubectl");
    assert!(ok, "{out}");
    let header = out.lines().next().unwrap_or_default();
    for column in ["NAME", "MODE", "ACCEPTED", "READY", "AGE"] {
        assert!(header.contains(column), "kubectl get agents lacks {column}: {out}");
    }
    assert!(out.lines().any(|l| l.starts_with("triage") && l.contains("hybrid")), "{out}");

    // The server publishes a new CRD's OpenAPI a few seconds after it is established.
    let mut explained = (false, String::new());
    for _ in 0..60 {
        explained = ns.kubectl(&["explain", "agent.spec"]).expect("kubectl");
        if explained.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let (ok, out) = explained;
    assert!(ok, "{out}");
    assert!(out.contains("personaRef") && out.contains("The Persona (in this namespace)"), "{out}");
    let (ok, out) = ns.kubectl(&["explain", "agent.spec.model.voiceModelId"]).expect("kubectl");
    assert!(ok && out.contains("amazon.nova-2-sonic-v1:0"), "{out}");
}
