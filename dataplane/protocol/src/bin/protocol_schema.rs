//! Writes the session protocol's JSON Schema, generated from the types in
//! `switchboard_protocol`, to `schema/protocol.schema.json` at the repository root, and
//! the reference generated from it to `schema/protocol.md`; or to the files given as the
//! first and second arguments.

use std::path::{Path, PathBuf};

use switchboard_protocol::schema::{REFERENCE_PATH, SCHEMA_PATH, reference, schema, schema_text};

fn main() -> std::io::Result<()> {
    // dataplane/protocol -> the repository root.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap_or(Path::new("."));
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let schema_path = args.next().unwrap_or_else(|| root.join(SCHEMA_PATH));
    let reference_path = args.next().unwrap_or_else(|| root.join(REFERENCE_PATH));
    for (path, text) in [(&schema_path, schema_text()), (&reference_path, reference(&schema()))] {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
