//! Publishes the gateway's public key — no secret — in a ConfigMap beside the routing table,
//! where the operator reads it and hands it to runtime pods, so the operator never holds the
//! private key ([`switchboard_crds::gateway_key`]). The gateway writes the one data key
//! when it starts, by server-side apply under its own field manager, retrying with backoff
//! until that succeeds; it never rewrites it later, so during a key rotation replicas with
//! the old and the new key do not take turns (the last to start wins, as in any rollout).
//! The Helm chart creates the ConfigMap and lets the gateway patch that one object only.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use switchboard_crds::gateway_key::{CONFIG_MAP_KEY, PublicKey};
use tokio::task::JoinHandle;

/// The field manager of what the gateway writes.
pub const FIELD_MANAGER: &str = "switchboard-gateway";
/// The first delay before publishing again after a failure; it doubles up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest delay between two attempts.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// The key could not be published.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot publish the gateway's public key in ConfigMap {namespace}/{name}: {source}; the gateway's \
     ServiceAccount needs `patch` on it (the Helm chart creates it and grants that)"
)]
pub struct PublishError {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The cause.
    pub source: kube::Error,
}

/// What the gateway applies: only the public key, under [`CONFIG_MAP_KEY`] (labels and the
/// rest belong to whoever created the ConfigMap).
pub fn config_map(namespace: &str, name: &str, key: &PublicKey) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        data: Some([(CONFIG_MAP_KEY.to_owned(), key.to_string())].into()),
        ..Default::default()
    }
}

/// Writes `key` to ConfigMap `namespace/name` once.
pub async fn publish(client: Client, namespace: &str, name: &str, key: &PublicKey) -> Result<(), PublishError> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let cm = config_map(namespace, name, key);
    match api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&cm)).await {
        Ok(_) => Ok(()),
        Err(source) => Err(PublishError { namespace: namespace.to_owned(), name: name.to_owned(), source }),
    }
}

/// Publishes `key` in the background until it succeeds: at once, then after
/// [`FIRST_RETRY`], doubling up to [`MAX_RETRY`]. Each failure is logged.
pub fn spawn(client: Client, namespace: String, name: String, key: PublicKey) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut delay = FIRST_RETRY;
        loop {
            match publish(client.clone(), &namespace, &name, &key).await {
                Ok(()) => {
                    tracing::info!(public_key = %key, configmap = %format!("{namespace}/{name}"), "published the gateway's public key for runtime pods");
                    return;
                }
                Err(error) => tracing::warn!("{error}; trying again in {delay:?}"),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_RETRY);
        }
    })
}

#[cfg(test)]
mod tests {
    use switchboard_core::grant::GatewaySigner;

    use super::*;

    #[test]
    fn the_config_map_holds_the_signers_public_key_and_nothing_else() {
        let signer = GatewaySigner::from_seed(&[7; 32]);
        let key: PublicKey = signer.public().to_string().parse().expect("the core's key text is well-formed");
        let cm = config_map("sb", "sb-switchboard-gateway-public-key", &key);
        assert_eq!(cm.metadata.name.as_deref(), Some("sb-switchboard-gateway-public-key"));
        assert_eq!((cm.metadata.labels, cm.metadata.annotations), (None, None), "the creator's, not the gateway's");
        let data = cm.data.expect("data");
        assert_eq!(data.len(), 1);
        assert_eq!(data[CONFIG_MAP_KEY], signer.public().to_string(), "what runtimes parse, as the gateway logs it");
    }
}
