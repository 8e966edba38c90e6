//! The test tools' bin directory (`tests/tools/install.sh`: Redis, PostgreSQL, Chromium,
//! playwright-core, aiortc, coturn, ...), asked of install.sh once per test binary.
//!
//! Once, because install.sh checks every tool it installs: seconds on a busy machine, which
//! a test restarting Redis under a live session must not spend while its client answers no
//! pings; and because two runs at once race on the wrapper it rewrites (`mcp-python`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The directory install.sh printed last.
pub fn tools_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
        let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
        assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim())
    })
    .clone()
}
