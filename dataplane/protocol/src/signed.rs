//! The gateway's signed session context as it travels: the signing and checking are the
//! core's (`switchboard_core::grant`).

use serde::{Deserialize, Serialize};

/// A session context (the core's `grant::SessionContext`) as sent: its JSON text and the MAC over it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignedContext {
    /// The context's JSON text, exactly as signed.
    pub payload: String,
    /// The gateway's Ed25519 signature of `payload`, lower-case hex.
    pub signature: String,
}
