//! Writes the CRD manifests generated from the Rust types into `crds/` and into the Helm
//! chart's `charts/switchboard/files/crds/` (the same bytes; the chart's `templates/crds.yaml`
//! renders them), and the book's resource reference into `docs/src/reference/`; or only the
//! manifests into the directory given as the first argument.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dirs = match std::env::args_os().nth(1) {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![root.clone(), root.join(switchboard_crds::manifests::CHART_CRDS_DIR)],
    };
    let to_book = std::env::args_os().nth(1).is_none();
    for dir in dirs {
        std::fs::create_dir_all(&dir)?;
        for (name, yaml) in switchboard_crds::manifests::crd_files() {
            let path = dir.join(name);
            std::fs::write(&path, yaml)?;
            println!("wrote {}", path.display());
        }
    }
    if to_book {
        let dir = root.join(switchboard_crds::reference::BOOK_REFERENCE_DIR);
        std::fs::create_dir_all(&dir)?;
        for (name, markdown) in switchboard_crds::reference::reference_files() {
            let path = dir.join(name);
            std::fs::write(&path, markdown)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
