//! A rotation of the gateway's key through the chart (SECURITY.md, "Key rotation"): the
//! chart value `runtime.gatewayPublicKey` listing the old and the new key, one a line as a
//! values file holds them, reaches the operator, which gives runtime pods both — and the
//! operator refuses a list with a malformed key at start, saying which.

use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use switchboard_crds::contract::env::GATEWAY_PUBLIC_KEY;
use switchboard_tests::cluster::tools_bin;
use switchboard_tests::operator::operator_binary;
use switchboard_tests::repo_root;

/// Real Ed25519 public keys (`openssl genpkey -algorithm ed25519`, then `openssl pkey
/// -pubout`): the old key as hex (what the gateway's ConfigMap holds), the new one as PEM.
const OLD: &str = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";
const NEW_PEM: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAlN+i9Mai50149Xk6kb562RmWWoz/qZzZXqf3eUN2WVA=\n-----END PUBLIC KEY-----\n";
const NEW: &str = "94dfa2f4c6a2e74d78f5793a91be7ad919965a8cffa99cd95ea7f77943765950";

/// `helm template` of the chart with `values` (a values file's text): the rendered text.
fn template(values: &str) -> String {
    let file = std::env::temp_dir().join(format!("switchboard-rotation-{}.yaml", std::process::id()));
    std::fs::write(&file, values).expect("values file");
    let chart = repo_root().join("charts/switchboard");
    let out = Command::new(tools_bin().expect("tools").join("helm"))
        .args(["template", "sb"])
        .arg(&chart)
        .args(["--namespace", "switchboard-system", "-f"])
        .arg(&file)
        .output()
        .expect("helm runs");
    let _ = std::fs::remove_file(&file);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    text
}

/// The Deployments in a multi-document YAML text.
fn deployments(text: &str) -> Vec<Deployment> {
    text.split("\n---")
        .filter(|d| d.contains("\nkind: Deployment\n") || d.starts_with("kind: Deployment\n"))
        .map(|d| serde_yaml::from_str(d).expect("a Deployment"))
        .collect()
}

/// The value of variable `name` of `deployment`'s first container.
fn env(deployment: &Deployment, name: &str) -> Option<String> {
    let containers = &deployment.spec.as_ref()?.template.spec.as_ref()?.containers;
    containers.first()?.env.as_ref()?.iter().find(|e| e.name == name)?.value.clone()
}

#[test]
fn the_old_and_the_new_key_listed_in_the_chart_reach_every_runtime_pod() {
    let indented: String = format!("{OLD}\n{NEW_PEM}").lines().map(|l| format!("    {l}\n")).collect();
    let rendered = template(&format!("runtime:\n  gatewayPublicKey: |\n{indented}"));
    let operator = deployments(&rendered)
        .into_iter()
        .find(|d| d.metadata.name.as_deref() == Some("sb-switchboard"))
        .expect("the operator's Deployment");
    let given = env(&operator, GATEWAY_PUBLIC_KEY).expect("the operator gets the keys");
    assert_eq!(given, format!("{OLD}\n{NEW_PEM}"), "both keys, as listed");
    assert_eq!(env(&operator, "SWITCHBOARD_GATEWAY_KEY_CONFIGMAP"), None, "an explicit list, not the published key");

    // The operator, with the chart's variable, renders runtime pods that trust both keys.
    let examples = repo_root().join("examples/banking");
    let out = Command::new(operator_binary().expect("the operator binary"))
        .args(["render", "-f"])
        .arg(&examples)
        .env(GATEWAY_PUBLIC_KEY, &given)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pods = deployments(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(pods.len(), 4, "the Example Bank's four Agents");
    for pod in &pods {
        let keys = env(pod, GATEWAY_PUBLIC_KEY);
        assert_eq!(keys.as_deref(), Some(format!("{OLD},{NEW}").as_str()), "{:?}", pod.metadata.name);
    }

    // A malformed key in the list: the operator does not start, and says which key.
    let out = Command::new(operator_binary().expect("the operator binary"))
        .args(["render", "-f"])
        .arg(&examples)
        .env(GATEWAY_PUBLIC_KEY, format!("{OLD}\nabcd"))
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("key 2 of 2: 2 bytes"), "{said}");
}
