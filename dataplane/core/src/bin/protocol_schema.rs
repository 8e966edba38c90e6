//! Writes the session protocol's JSON Schema, generated from the types in
//! `switchboard_core::protocol`, to `schema/protocol.schema.json` at the repository root,
//! or to the file given as the first argument.

use std::path::{Path, PathBuf};

use switchboard_core::protocol::schema::{SCHEMA_PATH, schema_text};

fn main() -> std::io::Result<()> {
    let path = match std::env::args_os().nth(1) {
        Some(path) => PathBuf::from(path),
        // dataplane/core -> the repository root.
        None => Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap_or(Path::new(".")).join(SCHEMA_PATH),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, schema_text())?;
    println!("wrote {}", path.display());
    Ok(())
}
