//! Who may read what the gateway serves besides sessions: the conversation record
//! (`/v1/sessions`) and, where the record is open without a credential (local mode on
//! loopback), everything served to requests that name this machine only.

use std::sync::Arc;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use super::{Auth, Scope, bearer, looks_like_jwt};

/// A refused reader of the conversation record: the HTTP status, a stable code, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRefusal {
    /// 401 or 403.
    pub status: u16,
    /// `missing_key`, `unknown_key`, `invalid_token`, `records_not_allowed`, `host_not_local`.
    pub code: &'static str,
    /// What went wrong and what to do.
    pub message: String,
}

impl axum::response::IntoResponse for ReadRefusal {
    /// The status, and `{"error": code, "message": ...}`.
    fn into_response(self) -> axum::response::Response {
        let status = axum::http::StatusCode::from_u16(self.status).unwrap_or(axum::http::StatusCode::FORBIDDEN);
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        (status, axum::Json(body)).into_response()
    }
}

impl Auth {
    /// Whether a request may have what this gateway serves without a credential (the record,
    /// `/metrics`, local mode's agent list) — where the record is open (local mode on
    /// loopback), only a request whose `Host` is an IP address or `localhost`, with its port.
    /// Loopback alone does not keep a web page out: a page of another site can make its own
    /// name resolve to 127.0.0.1 (DNS rebinding) and read whatever answers that name; a browser
    /// sends no `Origin` on such a same-origin `GET`, but always the name as `Host`. Elsewhere
    /// every request may (the record there needs a credential: [`Auth::records_reader`]).
    pub fn open_data(&self, headers: &HeaderMap) -> Result<(), ReadRefusal> {
        if !self.open_records {
            return Ok(());
        }
        let host = crate::origin::host(headers);
        if host.is_some_and(crate::origin::address_or_localhost) {
            return Ok(());
        }
        let port = host.and_then(|h| h.rsplit_once(':')).map(|(_, port)| port).filter(|p| p.parse::<u16>().is_ok());
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let named = host.map_or_else(|| "no Host header".to_owned(), |h| format!("Host {h:?}"));
        Err(ReadRefusal {
            status: 403,
            code: "host_not_local",
            message: format!(
                "this local server answers only requests that name it by address or as localhost, and this one has \
                 {named} (a web page of another site can point its own name at this machine); open \
                 http://127.0.0.1{port}/ or http://localhost{port}/ instead"
            ),
        })
    }

    /// Who may read the conversation record (`/v1/sessions`): an API key with
    /// `records=read`, or a JWT with the records scope ([`super::Jwt::with_records_scope`]), in
    /// the namespaces of its scope. Without credentials configured the record is readable
    /// only where [`Auth::with_open_records`] said so, and only by a request that names the
    /// server by address or as `localhost` ([`Auth::open_data`]).
    pub fn records_reader(&self, headers: &HeaderMap) -> Result<Arc<Scope>, ReadRefusal> {
        let refused = |status, code, message: String| ReadRefusal { status, code, message };
        if !self.requires_keys() {
            return if self.open_records {
                self.open_data(headers).map(|()| Arc::default())
            } else {
                Err(refused(
                    403,
                    "records_not_allowed",
                    "this gateway has no API keys, so nobody may read its conversation record; give it \
                     --api-keys-file with a key marked records=read"
                        .into(),
                ))
            };
        }
        let presented = bearer(headers).ok_or_else(|| {
            refused(
                401,
                "missing_key",
                "send an API key marked records=read (`Authorization: Bearer <key>` or `X-Api-Key: <key>`) or a \
                 token with the records scope (`Authorization: Bearer <JWT>`)"
                    .into(),
            )
        })?;
        if let Some(jwt) = &self.jwt
            && looks_like_jwt(presented)
        {
            let verified = jwt
                .verify(presented)
                .map_err(|why| refused(401, "invalid_token", format!("the token is not accepted: {why}")))?;
            return if verified.records && verified.scope.is_unrestricted() {
                // A reader names the namespaces it reads: no claim is not every namespace.
                Err(refused(
                    403,
                    "records_scope_missing",
                    format!(
                        "the token of {:?} has the records scope but no agents claim ({}) naming the namespaces it \
                         may read (`[\"bank/*\"]`, or `[\"*\"]` for every one)",
                        verified.subject,
                        jwt.agents_claim().unwrap_or("--jwt-agents-claim, not configured")
                    ),
                ))
            } else if verified.records {
                Ok(Arc::new(verified.scope))
            } else {
                Err(refused(
                    403,
                    "records_not_allowed",
                    format!(
                        "the token of {:?} may not read the conversation record: it lacks the scope {:?}",
                        verified.subject,
                        jwt.records_scope()
                    ),
                ))
            };
        }
        let entry =
            self.keys.as_ref().and_then(|keys| keys.get(&<[u8; 32]>::from(Sha256::digest(presented.as_bytes()))));
        match entry {
            Some(entry) => entry.records_scope().ok_or_else(|| {
                refused(
                    403,
                    "records_not_allowed",
                    format!(
                        "the API key {:?} may not read the conversation record (its line in the keys file needs records=read)",
                        entry.name()
                    ),
                )
            }),
            None => Err(refused(401, "unknown_key", "the API key is not valid here".into())),
        }
    }
}
