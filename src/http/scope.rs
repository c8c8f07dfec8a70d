//! What one request carries through the call path without every function taking it: its
//! trace context and the client's `tracestate` (sent to every upstream it reaches, whatever
//! the dialect's code path) and, for the access log, which client dialect and upstreams its
//! calls had.
//!
//! A tokio task-local, set around a request's handling; code outside a request (tests of
//! pure parts, background tasks) simply finds none.

use std::cell::{Cell, RefCell};
use std::future::Future;

use axum::http::HeaderValue;

use crate::http::span::{Kind, Parent, SpanRecord, SpanSink};
use crate::http::trace::TraceContext;

/// One request's scope.
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
    /// The request's SERVER span, when its trace is sampled and tracing is on; else recording
    /// costs nothing. Boxed for the same reason as the notes.
    span: Cell<Option<Box<Recording>>>,
}

/// A span being recorded and where it goes when it ends.
#[derive(Debug)]
pub(crate) struct Recording {
    /// The gateway's exporter.
    pub sink: std::sync::Arc<dyn SpanSink>,
    /// The span.
    pub span: RefCell<SpanRecord>,
}

impl Recording {
    /// Ends the span and hands it to the sink.
    pub(crate) fn submit(self) {
        let mut span = self.span.into_inner();
        span.end();
        self.sink.submit(span);
    }

    /// The answer's `status` set on the span ([`SpanRecord::set_status`]), and the guard that
    /// ends it: held by whatever sends the answer, so a stream's span ends with the stream.
    pub(crate) fn answered(self: Box<Self>, status: u16) -> EndsSpan {
        self.span.borrow_mut().set_status(status);
        EndsSpan(Some(self))
    }
}

/// A SERVER span ended when this is dropped: held by an answer's body, so a stream's span ends
/// with the stream.
#[derive(Debug)]
pub(crate) struct EndsSpan(pub Option<Box<Recording>>);

impl Drop for EndsSpan {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.submit();
        }
    }
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
    /// The INTERNAL span of one call of a batch, inside its request's scope: the span the
    /// call's upstream tries hang from, and the one its attributes go to.
    static CALL: RefCell<SpanRecord>;
}

/// Runs `f` as the request with trace context `trace` and the client's `tracestate` `state`;
/// returns its output, what its calls noted when `noting`, and its SERVER span (`span`, with
/// what the calls wrote on it), for the caller to end once the answer is sent.
pub(crate) async fn run<F: Future>(
    trace: TraceContext,
    state: Option<HeaderValue>,
    noting: bool,
    span: Option<Box<Recording>>,
    f: F,
) -> (F::Output, Note, Option<Box<Recording>>) {
    let scope = Scope {
        trace,
        state,
        note: noting.then(Box::default),
        span: Cell::new(span),
    };
    SCOPE
        .scope(scope, async move {
            let out = f.await;
            SCOPE.with(|s| {
                let note = s.note.as_ref().map(|n| n.take()).unwrap_or_default();
                (out, note, s.span.take())
            })
        })
        .await
}

/// `f` of the current request's SERVER span (`None`: no request, or one that records none).
/// The span is taken out of its cell for `f` and put back: the one way the calls below read it.
fn with_recording<T>(f: impl FnOnce(Option<&Recording>) -> T) -> Option<T> {
    SCOPE
        .try_with(|s| {
            let r = s.span.take();
            let out = f(r.as_deref());
            s.span.set(r);
            out
        })
        .ok()
}

/// Whether the current request records spans.
pub(crate) fn recording() -> bool {
    with_recording(|r| r.is_some()).unwrap_or(false)
}

/// Writes on the current call's span: a batch call's INTERNAL span, else the request's SERVER
/// span. Nothing when the request records none.
pub(crate) fn annotate(f: impl FnOnce(&mut SpanRecord)) {
    let mut f = Some(f);
    if CALL
        .try_with(|c| f.take().map(|f| f(&mut c.borrow_mut())))
        .is_ok()
    {
        return;
    }
    with_recording(|r| {
        if let (Some(r), Some(f)) = (r, f.take()) {
            f(&mut r.span.borrow_mut());
        }
    });
}

/// The current call's span as a parent for work that records spans of its own (an upstream
/// try, a shadow's exchange, a sid turn), with the sink they go to; `None` when the request
/// records none.
pub(crate) fn parent() -> Option<Parent> {
    with_recording(|r| {
        r.map(|r| Parent {
            sink: r.sink.clone(),
            ctx: CALL
                .try_with(|c| c.borrow().context())
                .unwrap_or_else(|_| r.span.borrow().context()),
        })
    })
    .flatten()
}

/// The INTERNAL span of one call of a batch, named `name`, under the request's SERVER span,
/// started now: `None` when the request records no spans.
pub(crate) fn call_span(name: &str) -> Option<(Parent, SpanRecord)> {
    parent().map(|p| {
        let span = p.child(Kind::Internal, name);
        (p, span)
    })
}

/// Runs `f`, one call of a batch, in its span (from [`call_span`]), when it has one.
pub(crate) async fn in_call<F: Future>(span: Option<(Parent, SpanRecord)>, f: F) -> F::Output {
    let Some((parent, span)) = span else {
        return f.await;
    };
    let (out, span) = CALL
        .scope(RefCell::new(span), async move {
            let out = f.await;
            (out, CALL.with(|c| c.replace(SpanRecord::empty())))
        })
        .await;
    parent.submit(span);
    out
}

/// Runs `f` as span `name` of kind `kind`, a child of `parent`, in a scope of its own: work
/// done off the request's task (a shadow's exchange, a sid turn) whose upstream tries are then
/// CLIENT spans under it and carry its trace. `f` writes its attributes with [`annotate`].
pub(crate) async fn run_as<F: Future>(parent: Parent, kind: Kind, name: &str, f: F) -> F::Output {
    let span = parent.child(kind, name);
    let trace = span.context();
    let recording = Box::new(Recording {
        sink: parent.sink,
        span: RefCell::new(span),
    });
    let (out, _, recording) = run(trace, None, false, Some(recording), f).await;
    if let Some(r) = recording {
        r.submit();
    }
    out
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
        let ((), note, _) = run(ctx, Some(state.clone()), true, None, async {
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
