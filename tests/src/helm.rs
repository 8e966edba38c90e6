//! The Helm chart from the tests: its path, the pinned `helm` binary, a rendered document by
//! kind and name, and the lock that keeps a cluster-wide operator away from tests that must
//! not meet one.

use std::path::Path;
use std::process::Command;

use crate::cluster::tools_bin;
use crate::repo_root;

/// A real Ed25519 public key (`openssl genpkey -algorithm ed25519`), for a gateway key the
/// chart is given or a test publishes.
pub const KEY: &str = "e60f2802b0b07ae94418c11df1f4fc54a3af0fad41f53e66074926985a496493";

/// The lock file of [`cluster_wide_operator_turn`] (in the temporary directory).
const CLUSTER_WIDE_LOCK: &str = "switchboard-cluster-wide-operator.lock";

/// The chart's folder.
pub fn chart() -> String {
    repo_root().join("charts/switchboard").to_string_lossy().into_owned()
}

/// Runs the pinned `helm` with `args` (against `kubeconfig`'s cluster, if given): whether
/// it succeeded, and its output.
pub fn helm(kubeconfig: Option<&Path>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(tools_bin().expect("tools").join("helm"));
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let out = cmd.args(args).output().expect("helm runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A turn on the shared control plane with respect to a cluster-wide operator: `alone` for
/// a test that runs one (an exclusive lock: its operator reconciles every namespace's
/// Agents), shared for tests that must not meet one while it runs. Held while the returned
/// file lives.
pub fn cluster_wide_operator_turn(alone: bool) -> std::fs::File {
    let path = std::env::temp_dir().join(CLUSTER_WIDE_LOCK);
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).expect("lock file");
    if alone { file.lock() } else { file.lock_shared() }.expect("a turn with respect to a cluster-wide operator");
    file
}

/// The rendered document of `kind` named `name`.
pub fn document<'a>(rendered: &'a str, kind: &str, name: &str) -> &'a str {
    rendered
        .split("\n---")
        .find(|d| d.contains(&format!("\nkind: {kind}\n")) && d.contains(&format!("\n  name: {name}\n")))
        .unwrap_or_else(|| panic!("no {kind} {name} in:\n{rendered}"))
}
