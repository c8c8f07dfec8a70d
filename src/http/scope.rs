//! What one request carries through the call path without every function taking it: its
//! trace context and the client's `tracestate` (sent to every upstream it reaches, whatever
//! the dialect's code path) and, for the access log, which client dialect and upstreams its
//! calls had.
//!
//! A tokio task-local, set around a request's handling; code outside a request (tests of
//! pure parts, background tasks) simply finds none.

use std::cell::RefCell;
use std::future::Future;

use axum::http::HeaderValue;

use crate::http::trace::TraceContext;

/// One request's scope.
#[derive(Debug)]
pub(crate) struct Scope {
    /// The hop's trace context.
    pub trace: TraceContext,
    /// The client's `tracestate`, passed to upstreams with the `traceparent` (see
    /// [`TraceContext::for_call_with_state`]). Held here, not boxed with the notes: sharing
    /// the head's bytes, it costs no allocation, where a box would cost one per traced call.
    pub state: Option<HeaderValue>,
    /// The calls' notes, when they are wanted (the access log is on); else noting costs
    /// nothing. Boxed: tokio swaps the scope in and out of its slot on every poll of the
    /// request, so it is kept small (the trace context, the `tracestate` handle and a pointer).
    note: Option<Box<RefCell<Note>>>,
}

/// What the request's calls said of themselves.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// The client's dialect (`legacy`, `jsonrpc`, `a2a-1.0`, …), the first call's.
    pub dialect: &'static str,
    /// The upstreams called, each once, comma-separated.
    pub upstreams: String,
    /// The endpoint (`host:port`) of each try, in order, comma-separated: a retried call shows
    /// each endpoint it went to.
    pub endpoints: String,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` as the request with trace context `trace` and the client's `tracestate` `state`;
/// returns its output and, when `noting`, what its calls noted.
pub(crate) async fn run<F: Future>(
    trace: TraceContext,
    state: Option<HeaderValue>,
    noting: bool,
    f: F,
) -> (F::Output, Note) {
    let scope = Scope {
        trace,
        state,
        note: noting.then(Box::default),
    };
    SCOPE
        .scope(scope, async move {
            let out = f.await;
            let note = SCOPE.with(|s| s.note.as_ref().map(|n| n.take()).unwrap_or_default());
            (out, note)
        })
        .await
}

/// The current request's trace context, if there is a request.
pub(crate) fn trace() -> Option<TraceContext> {
    SCOPE.try_with(|s| s.trace).ok()
}

/// The current request's trace context and `tracestate`, what an upstream request carries.
/// The `tracestate` is shared, not copied.
pub(crate) fn upstream_trace() -> Option<(TraceContext, Option<HeaderValue>)> {
    SCOPE.try_with(|s| (s.trace, s.state.clone())).ok()
}

/// Notes that a call of the current request (if any) spoke `dialect` and went to `upstream`.
pub(crate) fn note_call(dialect: &'static str, upstream: &str) {
    let _ = SCOPE.try_with(|s| {
        let Some(note) = &s.note else {
            return;
        };
        let mut n = note.borrow_mut();
        if n.dialect.is_empty() {
            n.dialect = dialect;
        }
        if !upstream.is_empty() && !n.upstreams.split(',').any(|u| u == upstream) {
            if !n.upstreams.is_empty() {
                n.upstreams.push(',');
            }
            n.upstreams.push_str(upstream);
        }
    });
}

/// Notes that a try of a call of the current request (if any) went to `endpoint`.
pub(crate) fn note_try(endpoint: &str) {
    let _ = SCOPE.try_with(|s| {
        let Some(note) = &s.note else {
            return;
        };
        let mut n = note.borrow_mut();
        if !n.endpoints.is_empty() {
            n.endpoints.push(',');
        }
        n.endpoints.push_str(endpoint);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notes_each_upstream_once_and_the_first_dialect() {
        let ctx = TraceContext::for_call(&axum::http::HeaderMap::new());
        let state = HeaderValue::from_static("a=1");
        let ((), note) = run(ctx, Some(state.clone()), true, async {
            assert_eq!(trace(), Some(ctx));
            assert_eq!(upstream_trace(), Some((ctx, Some(state))));
            note_call("legacy", "a");
            note_call("jsonrpc", "b");
            note_call("legacy", "a");
        })
        .await;
        assert_eq!(note.dialect, "legacy");
        assert_eq!(note.upstreams, "a,b");
        assert_eq!(trace(), None);
        assert_eq!(upstream_trace(), None);
        note_call("legacy", "ignored outside a request");
    }
}
