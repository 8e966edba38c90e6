//! Who may place outbound calls (`POST /v1/calls`, an API key with `calls=place`) and who
//! may take them to place (`/v1/calls/edge`, a SIP edge's key with `calls=edge`). Without
//! credentials configured, only where the record is open (local mode on this machine, a
//! request that names it by address: [`Auth::open_data`]). A JWT places no calls yet.

use std::sync::Arc;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

pub use super::keys::CallAccess;
use super::{Auth, ReadRefusal, Scope, bearer, looks_like_jwt};

impl Auth {
    /// The credential (its name; empty without credentials) and the Agents it reaches, if
    /// it has `access` to outbound calls.
    pub fn calls(&self, headers: &HeaderMap, access: CallAccess) -> Result<(String, Arc<Scope>), ReadRefusal> {
        let refused = |status, code, message: String| ReadRefusal { status, code, message };
        let option = match access {
            CallAccess::Place => "calls=place",
            CallAccess::Edge => "calls=edge",
        };
        if !self.requires_keys() {
            return if self.open_records {
                self.open_data(headers).map(|()| (String::new(), Arc::default()))
            } else {
                Err(refused(
                    403,
                    "calls_not_allowed",
                    format!(
                        "this gateway has no API keys, so nobody may use its outbound calls; give it --api-keys-file \
                         with a key marked {option}"
                    ),
                ))
            };
        }
        let presented = bearer(headers).ok_or_else(|| {
            refused(401, "missing_key", format!("send an API key marked {option} (`Authorization: Bearer <key>`)"))
        })?;
        if looks_like_jwt(presented) {
            return Err(refused(
                403,
                "calls_not_allowed",
                format!("outbound calls take an API key marked {option}, not a token"),
            ));
        }
        let entry =
            self.keys.as_ref().and_then(|keys| keys.get(&<[u8; 32]>::from(Sha256::digest(presented.as_bytes()))));
        let Some(entry) = entry else {
            return Err(refused(401, "unknown_key", "the API key is not valid here".into()));
        };
        if entry.calls() != Some(access) {
            return Err(refused(
                403,
                "calls_not_allowed",
                format!("the API key {:?} may not do this (its line in the keys file needs {option})", entry.name()),
            ));
        }
        Ok((entry.name().to_owned(), entry.scope()))
    }
}
