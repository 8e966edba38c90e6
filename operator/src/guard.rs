//! Every API request the operator sends goes through here: it gets a deadline, and a write
//! from a replica that is not sure it still leads is never sent (fencing).
//!
//! - **Deadlines.** A request must produce its response head within `--api-timeout-seconds`
//!   (which covers connecting), and — unless it is a watch — its whole body by the same
//!   deadline. Watches only get the head deadline: kube's watcher already drops a watch that
//!   stays idle longer than its server-side timeout. A black-holed API server therefore
//!   costs a bounded wait, never a request that hangs on.
//! - **Fencing.** A [`Fence`] holds the instant until which this replica may write: the
//!   leader elector moves it forward on every successful renewal, to a point well before
//!   any standby may take the Lease over (see `leader.rs`). A write (any method but GET, HEAD
//!   and OPTIONS) is refused locally, without touching the network, once that instant has
//!   passed, and a write that is sent gets the fence as its deadline too, so none is still
//!   in flight when the fence closes. The check reads the monotonic clock at the moment the
//!   request leaves, so a process that was frozen (SIGSTOP, a VM pause) past its fence
//!   writes nothing when it resumes, whatever task happens to run first.
//!
//! What fencing cannot do: Kubernetes has no fencing tokens, so a write already on the wire
//! when the process froze may still arrive late. The margin between the fence and the
//! earliest takeover (a third of the Lease) is what covers it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use kube::Client;
use kube::client::Body;
use tokio::time::{Instant, Sleep};
use tower::BoxError;

/// Until when this replica may write. Cheap to clone; clones share the instant.
#[derive(Clone, Debug, Default)]
pub struct Fence(Arc<Mutex<FenceState>>);

#[derive(Debug, Default)]
struct FenceState {
    until: Option<Instant>,
    closed: bool,
}

impl Fence {
    /// A closed fence: no write passes until [`Fence::open_until`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets writes pass until `until` (never moves the instant back).
    pub fn open_until(&self, until: Instant) {
        let mut state = self.lock();
        if !state.closed && state.until.is_none_or(|u| u < until) {
            state.until = Some(until);
        }
    }

    /// Closes the fence for good (leadership lost or given up).
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.until = None;
    }

    /// The instant until which writes pass, if they pass now.
    pub fn open(&self) -> Option<Instant> {
        self.lock().until.filter(|u| *u > Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FenceState> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Why the guard refused or ended a request.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// A write from a replica whose fence is closed.
    #[error("not sent: {method} {path} is a write and this replica no longer holds the leader Lease")]
    Fenced {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
    },
    /// No response (head, or the whole body) by the deadline.
    #[error("{method} {path}: no response within {after:?}; the API server is unreachable or overloaded")]
    Timeout {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
        /// How long the request was given.
        after: Duration,
    },
}

/// Whether `method` changes anything on the server.
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn is_watch(req: &Request<Body>) -> bool {
    req.uri().query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// `client` with a deadline of `timeout` on every request and, with a `fence`, no write
/// once the fence is closed.
pub fn guarded(client: Client, timeout: Duration, fence: Option<Fence>) -> Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |req: Request<Body>| {
        let (client, fence) = (client.clone(), fence.clone());
        send(client, fence, timeout, req)
    });
    Client::new(service, namespace)
}

fn send(
    client: Client,
    fence: Option<Fence>,
    timeout: Duration,
    req: Request<Body>,
) -> impl Future<Output = Result<Response<DeadlineBody>, BoxError>> + Send + 'static {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let watch = is_watch(&req);
    let start = Instant::now();
    let mut deadline = start + timeout;
    let fenced = match (&fence, is_write(&method)) {
        (Some(fence), true) => match fence.open() {
            Some(until) => {
                deadline = deadline.min(until);
                false
            }
            None => true,
        },
        _ => false,
    };
    async move {
        if fenced {
            return Err(BoxError::from(GuardError::Fenced { method, path }));
        }
        let timed_out = |method, path| GuardError::Timeout { method, path, after: deadline - start };
        // The deadline is looked at first: a process resumed after its fence closed drops
        // the request here if it is still queued (kube's buffer then never sends it).
        let response = tokio::select! {
            biased;
            _ = tokio::time::sleep_until(deadline) => return Err(BoxError::from(timed_out(method, path))),
            response = client.send(req) => response.map_err(BoxError::from)?,
        };
        let limit = (!watch).then(|| (Box::pin(tokio::time::sleep_until(deadline)), timed_out(method, path)));
        Ok(response.map(|body| DeadlineBody { body, limit }))
    }
}

/// A response body that fails once its deadline passes (none for watches).
pub struct DeadlineBody {
    body: Body,
    limit: Option<(Pin<Box<Sleep>>, GuardError)>,
}

impl std::fmt::Debug for DeadlineBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineBody").field("deadline", &self.limit.as_ref().map(|(s, _)| s.deadline())).finish()
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        if let Some((sleep, _)) = self.limit.as_mut()
            && sleep.as_mut().poll(cx).is_ready()
            && let Some((_, error)) = self.limit.take()
        {
            return Poll::Ready(Some(Err(BoxError::from(error))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fence_opens_until_an_instant_and_never_moves_back() {
        let fence = Fence::new();
        assert!(fence.open().is_none(), "closed until opened");
        let until = Instant::now() + Duration::from_millis(200);
        fence.open_until(until);
        fence.open_until(until - Duration::from_millis(100));
        assert_eq!(fence.open(), Some(until));
        tokio::time::sleep_until(until).await;
        assert!(fence.open().is_none(), "closed once the instant has passed");
        fence.open_until(Instant::now() + Duration::from_secs(4));
        fence.close();
        assert!(fence.open().is_none(), "closed for good");
    }

    #[test]
    fn reads_are_not_writes() {
        assert!(!is_write(&Method::GET));
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(is_write(&m), "{m}");
        }
    }
}
