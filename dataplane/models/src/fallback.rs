//! Model fallback: a [`TextModel`] that sends a call to the model it names and, when that
//! model is throttled or unavailable before any output, moves on to the Agent's fallback
//! models in order ([`ModelError::calls_for_fallback`]), each reached through its own
//! client (its region's). Validation errors, denied access, unknown models and broken
//! streams after output are surfaced at once: another model would not fix them.
//!
//! Each move yields a [`ModelEvent::FellBack`] before the next model's events, so the
//! caller can count and log it. Every call starts at the model the request names: a
//! throttled primary is tried again on the next call. Retries with backoff wrap the whole
//! chain ([`crate::retrying`]): a retry starts again at the first model.

use std::sync::Arc;

use futures_util::StreamExt;

use super::{ModelError, ModelEvent, ModelRequest, ModelStream, TextModel};
use switchboard_core::model::Fallback;

/// One model a call may go to.
#[derive(Clone, Debug)]
pub struct Route {
    /// The client that reaches it (a pool for its region).
    pub client: Arc<dyn TextModel>,
    /// The model id sent.
    pub model_id: String,
    /// Its region when it is not the agent's own, for logs and labels.
    pub region: Option<String>,
}

impl Route {
    /// `model` or `model@region`.
    pub fn label(&self) -> String {
        match &self.region {
            Some(region) => format!("{}@{region}", self.model_id),
            None => self.model_id.clone(),
        }
    }
}

/// A model with fallbacks: calls go to the request's model through `primary`, then to
/// `fallbacks` in order (a fallback naming the request's own model in the primary's
/// region is skipped).
#[derive(Debug)]
pub struct WithFallbacks {
    primary: Arc<dyn TextModel>,
    fallbacks: Arc<[Route]>,
}

impl WithFallbacks {
    /// `primary` (the agent's own client) with `fallbacks`, tried in order.
    pub fn new(primary: Arc<dyn TextModel>, fallbacks: Vec<Route>) -> Self {
        Self { primary, fallbacks: fallbacks.into() }
    }

    /// The routes of a call of `model_id`, in order.
    pub fn routes(&self, model_id: &str) -> Vec<Route> {
        let first = Route { client: self.primary.clone(), model_id: model_id.to_owned(), region: None };
        let rest = self.fallbacks.iter().filter(|r| !(r.region.is_none() && r.model_id == model_id)).cloned();
        std::iter::once(first).chain(rest).collect()
    }
}

impl TextModel for WithFallbacks {
    fn stream(&self, request: &ModelRequest) -> ModelStream {
        stream_routes(self.routes(&request.model_id), request.clone())
    }

    fn provider(&self) -> &'static str {
        self.primary.provider()
    }
}

struct State {
    routes: std::vec::IntoIter<Route>,
    current: Route,
    stream: ModelStream,
    request: ModelRequest,
    output_seen: bool,
}

/// Streams `request` through `routes` in order (see the module docs). `routes` must not be
/// empty; an empty list yields a configuration error.
pub fn stream_routes(routes: Vec<Route>, mut request: ModelRequest) -> ModelStream {
    let mut routes = routes.into_iter();
    let Some(current) = routes.next() else {
        let error = ModelError::Config { message: "a model call was given no model to go to".into() };
        return Box::pin(futures_util::stream::iter([Err(error)]));
    };
    request.model_id = current.model_id.clone();
    let stream = current.client.stream(&request);
    let state = State { routes, current, stream, request, output_seen: false };
    Box::pin(futures_util::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        match state.stream.next().await {
            Some(Ok(event)) => {
                state.output_seen |= event.is_output();
                Some((Ok(event), Some(state)))
            }
            Some(Err(error)) if !state.output_seen && error.calls_for_fallback() => {
                let Some(next) = state.routes.next() else {
                    return Some((Err(error), None));
                };
                let fallback = Fallback {
                    from: state.current.label(),
                    to: next.label(),
                    reason: error.metric_label(),
                    message: error.to_string(),
                };
                state.request.model_id = next.model_id.clone();
                state.stream = next.client.stream(&state.request);
                state.current = next;
                Some((Ok(ModelEvent::FellBack(fallback)), Some(state)))
            }
            Some(Err(error)) => Some((Err(error), None)),
            None => None,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StopReason;
    use std::sync::Mutex;

    /// A model id and the error it fails with.
    type Failing = (&'static str, fn() -> ModelError);

    /// A model that answers from a script per model id and records the ids it was asked for.
    #[derive(Debug, Default)]
    struct Scripted {
        asked: Mutex<Vec<String>>,
        failing: Vec<Failing>,
    }

    impl TextModel for Scripted {
        fn stream(&self, request: &ModelRequest) -> ModelStream {
            self.asked.lock().expect("lock").push(request.model_id.clone());
            let item = match self.failing.iter().find(|(id, _)| *id == request.model_id) {
                Some((_, error)) => vec![Err(error())],
                None => vec![
                    Ok(ModelEvent::TextDelta(format!("from {}", request.model_id))),
                    Ok(ModelEvent::Stop(StopReason::EndTurn)),
                ],
            };
            Box::pin(futures_util::stream::iter(item))
        }

        fn provider(&self) -> &'static str {
            "test"
        }
    }

    fn chain(model: &Arc<Scripted>, fallbacks: &[&str]) -> WithFallbacks {
        let client: Arc<dyn TextModel> = model.clone();
        let routes = fallbacks
            .iter()
            .map(|id| Route { client: client.clone(), model_id: (*id).to_owned(), region: None })
            .collect();
        WithFallbacks::new(client, routes)
    }

    async fn events(model: &WithFallbacks, id: &str) -> Vec<Result<ModelEvent, ModelError>> {
        model.stream(&ModelRequest::new(id, Vec::new())).collect().await
    }

    #[tokio::test]
    async fn a_throttled_model_falls_back_in_order_and_says_so() {
        let throttled = || ModelError::Throttled { message: "slow down".into() };
        let unavailable =
            || ModelError::ServiceUnavailable { code: "ModelNotReadyException".into(), message: "x".into() };
        let model = Arc::new(Scripted { failing: vec![("a", throttled), ("b", unavailable)], ..Default::default() });
        let events = events(&chain(&model, &["b", "c"]), "a").await;
        let fell: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Ok(ModelEvent::FellBack(f)) => Some((f.from.as_str(), f.to.as_str(), f.reason)),
                _ => None,
            })
            .collect();
        assert_eq!(fell, [("a", "b", "throttled"), ("b", "c", "service_unavailable")]);
        assert!(events.iter().any(|e| matches!(e, Ok(ModelEvent::TextDelta(t)) if t == "from c")), "{events:?}");
        assert_eq!(*model.asked.lock().expect("lock"), ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn invalid_requests_and_denied_access_never_fall_back() {
        let denied = || ModelError::AccessDenied { message: "no".into() };
        let invalid = || ModelError::Validation { message: "bad".into() };
        for error in [denied as fn() -> ModelError, invalid] {
            let model = Arc::new(Scripted { failing: vec![("a", error)], ..Default::default() });
            let events = events(&chain(&model, &["b"]), "a").await;
            assert!(matches!(events.as_slice(), [Err(e)] if !e.calls_for_fallback()), "{events:?}");
            assert_eq!(*model.asked.lock().expect("lock"), ["a"]);
        }
    }

    #[tokio::test]
    async fn the_last_models_error_is_surfaced_and_a_fallback_naming_the_asked_model_is_skipped() {
        let throttled = || ModelError::Throttled { message: "slow down".into() };
        let model = Arc::new(Scripted { failing: vec![("a", throttled), ("b", throttled)], ..Default::default() });
        let events = events(&chain(&model, &["a", "b"]), "a").await;
        assert!(matches!(events.last(), Some(Err(ModelError::Throttled { .. }))), "{events:?}");
        assert_eq!(*model.asked.lock().expect("lock"), ["a", "b"], "the fallback equal to the asked model is skipped");
        let answered = self::events(&chain(&model, &["a", "b"]), "c").await;
        assert!(answered.iter().all(Result::is_ok), "a session's own model answers first: {answered:?}");
    }
}
