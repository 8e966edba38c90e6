//! Why a reconcile failed: transient failures, retried with backoff (an invalid spec is no
//! error: it gets `Accepted=False`), each with a bounded label for metrics and logs.

/// Why a reconcile failed (transient: it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What the operator was doing, e.g. `applying Deployment bank/triage`.
        action: String,
        /// The cause.
        source: kube::Error,
    },
    /// An object the API returned could not be used.
    #[error("{0}")]
    Unexpected(String),
    /// A child's name is taken by an object the Agent does not own (not retried with
    /// backoff: the Agent gets `Accepted=False`, see `policy.rs`).
    #[error("{kind} {namespace}/{name} exists and is not owned by this Agent")]
    NotOwned {
        /// The child's kind.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Error {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { source: kube::Error::Api(s), .. } if s.code == 409 => "conflict",
            Error::Kube { source: kube::Error::Api(s), .. } if s.code == 403 => "forbidden",
            Error::Kube { source: kube::Error::Api(s), .. } if s.code == 404 => "not_found",
            Error::Kube { source: kube::Error::Api(s), .. } if s.code == 422 => "invalid",
            Error::Kube { source: kube::Error::Api(_), .. } => "api",
            Error::Kube { .. } => "transport",
            Error::Unexpected(_) => "unexpected",
            Error::NotOwned { .. } => "name_taken",
        }
    }

    /// An error from `source` while doing `action`.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube { action: action.into(), source }
    }
}
