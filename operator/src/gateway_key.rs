//! The gateway's public key, which runtime pods verify the session context the gateway signs
//! with ([`switchboard_crds::gateway_key`]). The operator never holds the private key. The
//! public key is either fixed at start (`--gateway-public-key`; or none, and runtime pods
//! accept no session context), or followed in the ConfigMap the gateway publishes it in
//! when it starts (`--gateway-key-config-map`, beside the routing table): one watch on that
//! ConfigMap by name. Every change of what it says reconciles every Agent again, so a new
//! key reaches runtime pods by their usual rollout (the key is in their environment).
//!
//! The ConfigMap may list several keys as `--gateway-public-key` may (commas or newlines;
//! the gateway writes its one key): pods trust them all.
//!
//! Until the ConfigMap holds a well-formed key, Agents are not built, rather than run pods
//! that would refuse every context the gateway gives them: a new Agent waits with
//! `Accepted=False`, reason [`REASON_KEY_MISSING`]; an Agent whose pods already run keeps
//! them, its status and so its route (after an upgrade from a chart that gave the operator
//! the private key, say, while the new gateway starts), and its changes wait. Either way a
//! Warning Event says so, and the operator logs it. Once a key is known, a deleted ConfigMap
//! or a malformed value keeps it, and says so, as the gateway keeps its last routing table.

use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use prometheus::IntGauge;
use switchboard_crds::gateway_key::{CONFIG_MAP_KEY, PublicKeys};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controller::error::Error;
use crate::controller::status::Verdict;

/// `Accepted` reason: the operator has no gateway public key for the Agent's pods yet.
pub const REASON_KEY_MISSING: &str = "GatewayKeyMissing";

/// What the operator knows of a published key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyState {
    /// The ConfigMap has not been listed yet.
    Listing,
    /// No usable key, and why.
    Missing(String),
    /// The key(s) runtime pods get.
    Known(PublicKeys),
}

/// Where the gateway public key of runtime pods comes from.
#[derive(Clone, Debug)]
pub enum GatewayKey {
    /// Given at start (`--gateway-public-key`: one key, or the old and the new during a
    /// rotation), or none at all.
    Fixed(Option<PublicKeys>),
    /// Followed in a ConfigMap the gateway publishes.
    Published {
        /// `namespace/name` of the ConfigMap.
        location: String,
        /// The latest state, kept by the watch.
        state: watch::Receiver<KeyState>,
    },
}

impl GatewayKey {
    /// The key followed in ConfigMap `name` of `api`'s namespace (`namespace`, for
    /// messages) by the returned task, which runs until `stop`; `known` is set to 1 while
    /// a key is known.
    pub fn published(
        api: Api<ConfigMap>,
        namespace: &str,
        name: &str,
        known: IntGauge,
        stop: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let location = format!("{namespace}/{name}");
        let (tx, state) = watch::channel(KeyState::Listing);
        let task = follow(api, name.to_owned(), location.clone(), tx, known, stop);
        (GatewayKey::Published { location, state }, task)
    }

    /// The key to give runtime pods now (`None`: no key is configured), once the
    /// ConfigMap was listed; or why a published key is missing. Fails only when the watch
    /// ended (shutting down).
    pub async fn current(&self) -> Result<Result<Option<PublicKeys>, KeyMissing>, Error> {
        let (location, state) = match self {
            GatewayKey::Fixed(key) => return Ok(Ok(key.clone())),
            GatewayKey::Published { location, state } => (location, state),
        };
        let seen = state
            .clone()
            .wait_for(|s| *s != KeyState::Listing)
            .await
            .map(|s| s.clone())
            .map_err(|_| Error::Unexpected("the gateway key's watch ended (shutting down)".into()))?;
        let location = location.clone();
        Ok(match seen {
            KeyState::Known(key) => Ok(Some(key)),
            KeyState::Missing(why) => Err(KeyMissing { location, why }),
            KeyState::Listing => Err(KeyMissing { location, why: "not read yet".into() }),
        })
    }

    /// Yields on every change of a published key's state (never for a fixed key): what
    /// reconciles every Agent again.
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let state = match self {
            GatewayKey::Fixed(_) => None,
            GatewayKey::Published { state, .. } => Some(state.clone()),
        };
        stream::unfold(state, |state| async move {
            let mut state = state?;
            state.changed().await.ok()?;
            Some(((), Some(state)))
        })
    }
}

/// A published key the operator does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyMissing {
    /// `namespace/name` of the ConfigMap it is awaited in.
    pub location: String,
    /// Why there is none.
    pub why: String,
}

impl KeyMissing {
    /// The `Accepted=False` verdict of an Agent that has no pods yet.
    pub fn verdict(&self) -> Verdict {
        let why = &self.why;
        Verdict {
            ok: false,
            reason: REASON_KEY_MISSING.into(),
            message: format!(
                "the operator has no gateway public key yet ({why}), so it runs no pods for this Agent: they \
                 would refuse the session context the gateway signs. {}",
                self.remedy()
            ),
        }
    }

    /// The Warning Event of an Agent whose pods already run: they stay as they are.
    pub fn held(&self) -> String {
        let why = &self.why;
        format!(
            "the operator has no gateway public key ({why}): this Agent's pods keep running as they are and it \
             stays routed, but changes to it wait for the key. {}",
            self.remedy()
        )
    }

    fn remedy(&self) -> String {
        let location = &self.location;
        format!(
            "The gateway writes its key to ConfigMap {location} (key `{CONFIG_MAP_KEY}`) when it starts: check \
             that it runs and may patch that ConfigMap, or give the key with --gateway-public-key (chart value \
             runtime.gatewayPublicKey)"
        )
    }
}

/// The key state a ConfigMap gives.
pub fn read(cm: &ConfigMap, location: &str) -> KeyState {
    match cm.data.as_ref().and_then(|d| d.get(CONFIG_MAP_KEY)) {
        None => KeyState::Missing(format!("ConfigMap {location} has no `{CONFIG_MAP_KEY}`")),
        Some(text) => match text.parse() {
            Ok(key) => KeyState::Known(key),
            Err(e) => KeyState::Missing(format!("`{CONFIG_MAP_KEY}` in ConfigMap {location} is not a public key: {e}")),
        },
    }
}

/// Moves `state` to `next`, except from a known key to a missing one (the key stays);
/// true when it changed.
pub fn advance(state: &mut KeyState, next: KeyState) -> bool {
    if *state == next || (matches!(state, KeyState::Known(_)) && !matches!(next, KeyState::Known(_))) {
        return false;
    }
    *state = next;
    true
}

async fn follow(
    api: Api<ConfigMap>,
    name: String,
    location: String,
    tx: watch::Sender<KeyState>,
    known: IntGauge,
    stop: CancellationToken,
) {
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, by_name).default_backoff().boxed();
    let mut listing: Option<KeyState> = None;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        let next = match event {
            None => return,
            Some(Ok(watcher::Event::Init)) => {
                listing = Some(KeyState::Missing(format!("ConfigMap {location} does not exist")));
                continue;
            }
            Some(Ok(watcher::Event::InitApply(cm))) => {
                listing = Some(read(&cm, &location));
                continue;
            }
            Some(Ok(watcher::Event::InitDone)) => match listing.take() {
                Some(next) => next,
                None => continue,
            },
            Some(Ok(watcher::Event::Apply(cm))) => read(&cm, &location),
            Some(Ok(watcher::Event::Delete(_))) => KeyState::Missing(format!("ConfigMap {location} was deleted")),
            Some(Err(e)) => KeyState::Missing(format!("cannot read ConfigMap {location}: {e}")),
        };
        let held = tx.borrow().clone();
        match (&held, &next) {
            (KeyState::Known(key), KeyState::Missing(why)) => {
                tracing::warn!(public_key = %key, "{why}; runtime pods keep the gateway public key they have");
            }
            (_, KeyState::Known(key)) if held != next => {
                tracing::info!(public_key = %key, configmap = %location, "runtime pods get this gateway public key; reconciling every Agent");
                known.set(1);
            }
            (_, KeyState::Missing(why)) if held != next => tracing::warn!(
                "no gateway public key: {why}; Agents wait with Accepted=False ({REASON_KEY_MISSING}) until the \
                 gateway publishes it"
            ),
            _ => {}
        }
        tx.send_if_modified(|state| advance(state, next));
    }
}

#[cfg(test)]
mod tests {
    use switchboard_crds::gateway_key::PublicKey;

    use super::*;

    const KEY: &str = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";

    fn cm(data: Option<(&str, &str)>) -> ConfigMap {
        ConfigMap { data: data.map(|(k, v)| [(k.to_owned(), v.to_owned())].into()), ..Default::default() }
    }

    #[test]
    fn a_config_map_gives_a_key_or_says_what_is_missing() {
        let key: PublicKeys = KEY.parse().expect("a key");
        assert_eq!(read(&cm(Some((CONFIG_MAP_KEY, KEY))), "sb/k"), KeyState::Known(key.clone()));
        let other = PublicKey::from_bytes([7; 32]);
        let two = format!("{KEY},\n{other}\n");
        let KeyState::Known(both) = read(&cm(Some((CONFIG_MAP_KEY, &two))), "sb/k") else { panic!("two keys") };
        assert_eq!(both.to_string(), format!("{KEY},{other}"), "pods trust both");
        let KeyState::Missing(why) = read(&cm(Some((CONFIG_MAP_KEY, &format!("{KEY},abcd")))), "sb/k") else {
            panic!("one malformed key")
        };
        assert!(why.contains("key 2 of 2: 2 bytes"), "{why}");
        let KeyState::Missing(why) = read(&cm(None), "sb/k") else { panic!("no data is no key") };
        assert_eq!(why, "ConfigMap sb/k has no `public-key`");
        let KeyState::Missing(why) = read(&cm(Some((CONFIG_MAP_KEY, "abcd"))), "sb/k") else { panic!("malformed") };
        assert!(why.contains("is not a public key: 2 bytes"), "{why}");
    }

    #[test]
    fn a_known_key_stays_until_another_replaces_it() {
        let (a, b): (PublicKeys, PublicKeys) = (KEY.parse().expect("a"), PublicKey::from_bytes([7; 32]).into());
        let mut state = KeyState::Listing;
        assert!(advance(&mut state, KeyState::Missing("none".into())));
        assert!(!advance(&mut state, KeyState::Missing("none".into())), "no change, no trigger");
        assert!(advance(&mut state, KeyState::Missing("other".into())), "a new reason is a change (status follows)");
        assert!(advance(&mut state, KeyState::Known(a.clone())));
        assert!(!advance(&mut state, KeyState::Missing("deleted".into())), "kept");
        assert!(!advance(&mut state, KeyState::Listing), "kept");
        assert_eq!(state, KeyState::Known(a));
        assert!(advance(&mut state, KeyState::Known(b.clone())), "a new key replaces it");
        assert_eq!(state, KeyState::Known(b));
    }

    #[test]
    fn the_verdict_and_the_event_say_where_the_key_comes_from_and_what_to_do() {
        let missing = KeyMissing {
            location: "sb/sb-switchboard-gateway-public-key".into(),
            why: "ConfigMap sb/sb-switchboard-gateway-public-key does not exist".into(),
        };
        let v = missing.verdict();
        assert!(!v.ok);
        assert_eq!(v.reason, REASON_KEY_MISSING);
        for text in [&v.message, &missing.held()] {
            for needle in
                ["sb/sb-switchboard-gateway-public-key", "does not exist", "runtime.gatewayPublicKey", "patch"]
            {
                assert!(text.contains(needle), "{needle}: {text}");
            }
        }
        assert!(v.message.contains("runs no pods for this Agent"), "{}", v.message);
        assert!(missing.held().contains("keep running as they are"), "{}", missing.held());
    }

    #[tokio::test]
    async fn a_fixed_key_is_there_at_once_and_never_changes() {
        let key: PublicKeys = KEY.parse().expect("a key");
        let fixed = GatewayKey::Fixed(Some(key.clone()));
        assert_eq!(fixed.current().await.ok(), Some(Ok(Some(key))));
        assert_eq!(GatewayKey::Fixed(None).current().await.ok(), Some(Ok(None)));
        assert_eq!(fixed.changes().collect::<Vec<()>>().await.len(), 0);
    }

    #[tokio::test]
    async fn a_published_key_is_awaited_until_listed_and_its_changes_are_streamed() {
        let (tx, state) = watch::channel(KeyState::Listing);
        let published = GatewayKey::Published { location: "sb/k".into(), state };
        let mut changes = Box::pin(published.changes());
        let waiting = tokio::spawn({
            let published = published.clone();
            async move { published.current().await.ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no answer before the ConfigMap was listed");
        tx.send_replace(KeyState::Missing("ConfigMap sb/k does not exist".into()));
        let answer = waiting.await.expect("task").expect("not shut down");
        assert_eq!(answer, Err(KeyMissing { location: "sb/k".into(), why: "ConfigMap sb/k does not exist".into() }));
        assert_eq!(changes.next().await, Some(()));
        let key: PublicKeys = KEY.parse().expect("a key");
        tx.send_replace(KeyState::Known(key.clone()));
        assert_eq!(changes.next().await, Some(()));
        assert_eq!(published.current().await.ok(), Some(Ok(Some(key))));
        drop(tx);
        assert_eq!(changes.next().await, None, "the stream ends with the watch");
        assert!(published.current().await.is_ok(), "the last state stays readable");
    }
}
