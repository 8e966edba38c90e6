//! Writes the CRD manifests generated from the Rust types into `crds/` (or the directory
//! given as the first argument).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    for (name, yaml) in switchboard_crds::manifests::crd_files() {
        let path = dir.join(name);
        std::fs::write(&path, yaml)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
