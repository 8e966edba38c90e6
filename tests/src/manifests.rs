//! Server-side apply of YAML documents and CRD installation, the way `kubectl apply
//! --server-side` does it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client, ResourceExt};

/// The field manager tests apply with.
pub const FIELD_MANAGER: &str = "switchboard-tests";

/// Server-side applies the CRDs in `crds/*.yaml` and waits until each is Established.
///
/// The test server is Kubernetes 1.20, whose CRD type has no `x-kubernetes-validations`
/// (CEL rules arrived in 1.23 and are on by default from 1.25): server-side apply refuses
/// the undeclared field. The CRDs are applied here without it, see [`crds_for_test_server`];
/// the rules themselves are proven against the pure validator in `crds/tests/cel_rules.rs`.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for (file, crd) in crds_for_test_server()? {
        let name = crd.name_any();
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying {file}"))?;
        names.push(name);
    }
    for name in names {
        wait_established(&api, &name).await?;
    }
    Ok(())
}

/// The CRDs of `crds/*.yaml` (file name, object) without their CEL rules, which the 1.20
/// test server cannot store.
pub fn crds_for_test_server() -> anyhow::Result<Vec<(String, CustomResourceDefinition)>> {
    let dir = crate::repo_root().join("crds");
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.extension().is_some_and(|e| e == "yaml") {
            let mut value: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(&path)?)
                .with_context(|| format!("parsing {}", path.display()))?;
            strip_cel_rules(&mut value);
            let crd = serde_json::from_value(value).with_context(|| format!("reading {}", path.display()))?;
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            out.push((file, crd));
        }
    }
    Ok(out)
}

fn strip_cel_rules(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(strip_cel_rules);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_cel_rules),
        _ => {}
    }
}

async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> anyhow::Result<()> {
    for _ in 0..100 {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("CRD {name} did not become Established within 10 s")
}

/// Server-side applies every document of every YAML file in `path` (a file, or a folder
/// read like `kubectl apply -f DIR`: its own files, not its subfolders) into `namespace`
/// (for namespaced kinds). Returns the applied objects as the server stored them.
pub async fn apply_path(client: &Client, namespace: &str, path: &Path) -> anyhow::Result<Vec<DynamicObject>> {
    let mut files = Vec::new();
    collect_yaml(path, &mut files)?;
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        out.extend(apply_yaml(client, namespace, &text).await.with_context(|| format!("applying {}", file.display()))?);
    }
    Ok(out)
}

/// Server-side applies every document of `yaml` into `namespace`.
pub async fn apply_yaml(client: &Client, namespace: &str, yaml: &str) -> anyhow::Result<Vec<DynamicObject>> {
    let discovery = Discovery::new(client.clone()).run().await.context("API discovery")?;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let obj: DynamicObject = match serde::Deserialize::deserialize(doc) {
            Ok(o) => o,
            Err(e) => bail!("not a Kubernetes object: {e}"),
        };
        let gvk = obj.types.as_ref().context("document has no apiVersion/kind")?.try_into()?;
        let (ar, caps) = discovery.resolve_gvk(&gvk).with_context(|| format!("the server does not serve {gvk:?}"))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &ar),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        let name = obj.name_any();
        let applied = api
            .patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying {} {name}", gvk.kind))?;
        out.push(applied);
    }
    Ok(out)
}

fn collect_yaml(path: &Path, files: &mut Vec<std::path::PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(path)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for e in entries {
        if e.is_file() && e.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json") {
            files.push(e);
        }
    }
    Ok(())
}
