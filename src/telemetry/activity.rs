//! Whether a connection is idle: its calls in flight, and since when it has had none.
//!
//! hyper times an idle HTTP/1 connection itself (the next request's head must come within the
//! header read timeout) but has no idle timeout for HTTP/2, where a peer that answers PINGs and
//! sends nothing else would hold its slot forever. A call counts as in flight from its request
//! until its answer's body has been sent or dropped, so a long SSE stream is never idle.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::Frame;
use tokio::time::Instant;

/// One connection's calls in flight.
#[derive(Debug)]
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    /// When the last call ended (or the connection opened).
    idle_since: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    /// A connection just opened: idle, since now.
    pub(crate) fn new() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    fn idle_since(&self) -> Instant {
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once the connection has had no call in flight for `timeout`.
    pub(crate) async fn idle_for(&self, timeout: Duration) {
        loop {
            let deadline = self.idle_since() + timeout;
            if self.in_flight.load(Ordering::Acquire) == 0 && deadline <= Instant::now() {
                return;
            }
            // Busy, or idle for less than `timeout`: look again when it could first be due.
            tokio::time::sleep_until(deadline.max(Instant::now() + timeout / 4)).await;
        }
    }
}

/// A call in flight; it ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Call(Arc<Activity>);

impl Call {
    /// Counts a call in flight on `activity`.
    pub(crate) fn begin(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Call(activity)
    }

    /// `body`, keeping the call in flight until it is done or dropped.
    pub(crate) fn guard_body(self, body: Body) -> GuardedBody<Self> {
        GuardedBody::new(body, self)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body that holds a guard (its [`Call`], its SERVER span) until it is done or
/// dropped.
#[derive(Debug)]
pub(crate) struct GuardedBody<G> {
    body: Body,
    _guard: G,
}

impl<G> GuardedBody<G> {
    /// `body` holding `guard`.
    pub(crate) fn new(body: Body, guard: G) -> Self {
        GuardedBody {
            body,
            _guard: guard,
        }
    }
}

impl<G: Unpin> hyper::body::Body for GuardedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_only_without_calls_and_after_the_timeout() {
        let a = Arc::new(Activity::new());
        let call = Call::begin(a.clone());
        let t = Duration::from_secs(2);
        let idle = tokio::time::timeout(Duration::from_secs(10), a.idle_for(t)).await;
        assert!(idle.is_err(), "a call in flight keeps the connection busy");
        drop(call);
        let started = Instant::now();
        a.idle_for(t).await;
        assert!(
            started.elapsed() >= t,
            "idle is counted from the last call's end"
        );
        assert!(started.elapsed() <= t + t / 4 + Duration::from_millis(1));
    }
}
