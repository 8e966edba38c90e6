//! Why a simulator script cannot be used: unreadable, malformed, or inconsistent.

/// A script that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read simulator script {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Not valid YAML/JSON, or not a script (unknown field, bad regex, ...).
    #[error("simulator script is not valid: {0}")]
    Parse(String),
    /// Well-formed but inconsistent.
    #[error("simulator script is not valid: {0}")]
    Invalid(String),
}
