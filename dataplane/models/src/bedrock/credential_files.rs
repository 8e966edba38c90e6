//! AWS credentials read from files — a Kubernetes Secret mounted as a volume, one file per
//! key: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, for temporary credentials,
//! `AWS_SESSION_TOKEN`. They are read again whenever the SDK's credential cache asks, which
//! it does once the credentials handed out reach their expiry ([`CredentialFiles::max_age`]
//! after they were read): the kubelet updates a mounted Secret in place, so a rotated
//! Secret reaches a running pod within the kubelet's sync period plus `max_age`, with no
//! restart and with no right on Secrets for the operator. (Environment variables from a
//! Secret would keep the old values until the pod is replaced.)
//!
//! Values are never logged or put in errors: errors name the file only.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, future};

/// The access key id's file.
pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// The secret access key's file.
pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// The session token's file (optional).
pub const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
/// Largest credential file read.
const MAX_FILE_BYTES: u64 = 8 * 1024;

/// Credentials from the files of one folder.
#[derive(Clone, Debug)]
pub struct CredentialFiles {
    dir: PathBuf,
    max_age: Duration,
}

impl CredentialFiles {
    /// The files of `dir`, read again `max_age` after each read.
    pub fn new(dir: impl Into<PathBuf>, max_age: Duration) -> Self {
        Self { dir: dir.into(), max_age }
    }

    /// How long credentials read once are used before the files are read again.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads the files now.
    pub fn read(&self) -> Result<Credentials, CredentialsError> {
        let access_key_id = read_value(&self.dir, ACCESS_KEY_ID)?.ok_or_else(|| missing(&self.dir, ACCESS_KEY_ID))?;
        let secret = read_value(&self.dir, SECRET_ACCESS_KEY)?.ok_or_else(|| missing(&self.dir, SECRET_ACCESS_KEY))?;
        let token = read_value(&self.dir, SESSION_TOKEN)?;
        Ok(Credentials::new(
            access_key_id,
            secret,
            token,
            Some(SystemTime::now() + self.max_age),
            "switchboard-credential-files",
        ))
    }
}

impl ProvideCredentials for CredentialFiles {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::ready(self.read())
    }
}

fn missing(dir: &Path, name: &str) -> CredentialsError {
    CredentialsError::invalid_configuration(format!(
        "no {name} in {}: the Agent's credentials Secret needs the keys {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}",
        dir.display()
    ))
}

/// The trimmed contents of `dir/name`; `None` when the file is absent or blank.
fn read_value(dir: &Path, name: &str) -> Result<Option<String>, CredentialsError> {
    let path = dir.join(name);
    let unreadable = |why: String| CredentialsError::provider_error(format!("cannot read {}: {why}", path.display()));
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
        Ok(meta) if meta.len() > MAX_FILE_BYTES => {
            return Err(unreadable(format!("larger than {MAX_FILE_BYTES} bytes; is it a credential?")));
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(&path).map_err(|e| unreadable(e.to_string()))?;
    let value = text.trim();
    Ok((!value.is_empty()).then(|| value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> PathBuf {
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("switchboard-credential-files-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn the_files_are_read_at_each_ask_and_errors_name_files_not_values() {
        let dir = folder();
        let files = CredentialFiles::new(&dir, Duration::from_secs(60));
        // The SDK keeps the message in the error's source: it shows in `{:?}` and in its
        // error reports.
        let error = format!("{:?}", files.read().expect_err("nothing there"));
        assert!(error.contains(ACCESS_KEY_ID), "{error}");
        std::fs::write(dir.join(ACCESS_KEY_ID), "AKIDFIRST\n").expect("writes");
        std::fs::write(dir.join(SECRET_ACCESS_KEY), "first-secret").expect("writes");
        let first = files.read().expect("read");
        assert_eq!((first.access_key_id(), first.secret_access_key()), ("AKIDFIRST", "first-secret"));
        assert_eq!(first.session_token(), None);
        let expiry = first.expiry().expect("an expiry, so the SDK asks again");
        assert!(
            expiry > SystemTime::now() + Duration::from_secs(50)
                && expiry <= SystemTime::now() + Duration::from_secs(60)
        );
        // Rotated: the next read has the new values.
        std::fs::write(dir.join(ACCESS_KEY_ID), "AKIDSECOND").expect("writes");
        std::fs::write(dir.join(SECRET_ACCESS_KEY), "second-secret").expect("writes");
        std::fs::write(dir.join(SESSION_TOKEN), "token").expect("writes");
        let second = files.read().expect("read");
        assert_eq!((second.access_key_id(), second.session_token()), ("AKIDSECOND", Some("token")));
        // A secret missing or oversized: the error names the file, never a value.
        std::fs::remove_file(dir.join(SECRET_ACCESS_KEY)).expect("removes");
        let error = format!("{:?}", files.read().expect_err("no secret"));
        assert!(error.contains(SECRET_ACCESS_KEY) && !error.contains("AKIDSECOND"), "{error}");
        std::fs::write(dir.join(SECRET_ACCESS_KEY), "x".repeat(10_000)).expect("writes");
        let error = format!("{:?}", files.read().expect_err("oversized"));
        assert!(error.contains("larger than") && !error.contains("xxxx"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
