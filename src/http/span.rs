//! One span as the call path records it: ids, name, kind, times and attributes, handed when it
//! ends to the [`SpanSink`] of the gateway that started its trace. Pure data: the exporter
//! (`telemetry::spans`) owns batching and the wire; the call path owns nothing but this record,
//! so recording a span is a few stores and one push.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::trace::TraceContext;

/// What a span is to its trace (OpenTelemetry's `SpanKind`, by its OTLP numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Work inside the gateway: one call of a batch, a shadow's exchange, a sid turn.
    Internal = 1,
    /// A client's request to the gateway.
    Server = 2,
    /// A request the gateway makes: an upstream try, a webhook POST, a carry to an owner.
    Client = 3,
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// Text.
    Str(Cow<'static, str>),
    /// A whole number.
    Int(i64),
    /// A flag.
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Cow::Owned(s))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// One span.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpanRecord {
    /// The trace.
    pub trace_id: [u8; 16],
    /// This span.
    pub span_id: [u8; 8],
    /// Its parent; all zeros for a root.
    pub parent_id: [u8; 8],
    /// Its name (`POST /rpc`, a method name, `POST` for an upstream try).
    pub name: Cow<'static, str>,
    /// What it is to the trace.
    pub kind: Kind,
    /// When it started and ended, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// Zero until it ends.
    pub end_ns: u64,
    /// Its attributes, by OpenTelemetry's semantic conventions' names.
    pub attrs: Vec<(&'static str, Value)>,
    /// Whether it failed (OTLP status `ERROR`), and why.
    pub error: Option<Cow<'static, str>>,
}

/// Nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl SpanRecord {
    /// A span of `ctx`'s trace with `ctx`'s span id and `parent_id` for parent, started now.
    pub(crate) fn start(
        ctx: &TraceContext,
        parent_id: [u8; 8],
        kind: Kind,
        name: impl Into<Cow<'static, str>>,
    ) -> Self {
        SpanRecord {
            trace_id: ctx.trace_id,
            span_id: ctx.span_id,
            parent_id,
            name: name.into(),
            kind,
            start_ns: now_ns(),
            end_ns: 0,
            // A SERVER span of a call has about a dozen attributes, a CLIENT span ten.
            attrs: Vec::with_capacity(16),
            error: None,
        }
    }

    /// A placeholder, what a span's slot holds once the span has left it.
    pub(crate) fn empty() -> Self {
        SpanRecord {
            trace_id: [0; 16],
            span_id: [0; 8],
            parent_id: [0; 8],
            name: Cow::Borrowed(""),
            kind: Kind::Internal,
            start_ns: 0,
            end_ns: 0,
            attrs: Vec::new(),
            error: None,
        }
    }

    /// This span's context, what a request it makes carries in its `traceparent`.
    pub(crate) fn context(&self) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id,
            span_id: self.span_id,
            flags: 1,
            parent_id: self.parent_id,
        }
    }

    /// Adds attribute `key`. Appended, not looked up: the call path sets each key once (a key
    /// set twice is exported twice), which keeps a call's dozen attributes a dozen stores.
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.attrs.push((key, value.into()));
    }

    /// Whether attribute `key` is set.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.attrs.iter().any(|(k, _)| *k == key)
    }

    /// An HTTP answer's status: `http.response.status_code`, and a failure for a 5xx (a 4xx
    /// is the client's error, not the span's, by the HTTP conventions). Every span of an HTTP
    /// exchange, server or client, says it so.
    pub(crate) fn set_status(&mut self, status: u16) {
        self.set("http.response.status_code", i64::from(status));
        if status >= 500 {
            self.fail(status.to_string());
        }
    }

    /// The peer a CLIENT span went to, from its `host:port` label: `server.address` (an IPv6
    /// address without its brackets) and `server.port`, and the label as `wiregate.endpoint`.
    pub(crate) fn set_server(&mut self, label: &str) {
        let (host, port) = match label.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<i64>().ok()),
            None => (label, None),
        };
        self.set("server.address", host.trim_matches(['[', ']']).to_owned());
        if let Some(port) = port {
            self.set("server.port", port);
        }
        self.set("wiregate.endpoint", label.to_owned());
    }

    /// Marks the span failed with `error.type` `kind`; the first failure named stays.
    pub(crate) fn fail(&mut self, kind: impl Into<Cow<'static, str>>) {
        if self.error.is_some() {
            return;
        }
        let kind = kind.into();
        self.set("error.type", Value::Str(kind.clone()));
        self.error = Some(kind);
    }

    /// Ends the span now, unless it has ended.
    pub(crate) fn end(&mut self) {
        if self.end_ns == 0 {
            self.end_ns = now_ns().max(self.start_ns);
        }
    }
}

/// Where ended spans go: the exporter of the gateway whose request started them. Recording
/// must never wait: a full queue drops the span and counts it.
pub(crate) trait SpanSink: Send + Sync + std::fmt::Debug {
    /// Takes an ended span.
    fn submit(&self, span: SpanRecord);
}

/// A sink and the span its children hang from: what work done off the request's task (a
/// shadow's exchange, a sid turn, a webhook) carries to record its spans in the same trace.
#[derive(Clone, Debug)]
pub(crate) struct Parent {
    /// Where the spans go.
    pub sink: Arc<dyn SpanSink>,
    /// The span to hang them from (its trace and span id).
    pub ctx: TraceContext,
}

impl Parent {
    /// A child of the parent span, started now.
    pub(crate) fn child(&self, kind: Kind, name: impl Into<Cow<'static, str>>) -> SpanRecord {
        let ctx = TraceContext {
            span_id: super::trace::new_span_id(),
            parent_id: self.ctx.span_id,
            ..self.ctx
        };
        SpanRecord::start(&ctx, self.ctx.span_id, kind, name)
    }

    /// Ends `span` and hands it to the sink.
    pub(crate) fn submit(&self, mut span: SpanRecord) {
        span.end();
        self.sink.submit(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_keeps_the_trace_and_names_its_parent() {
        let ctx = TraceContext::for_parent(None).0;
        let root = SpanRecord::start(&ctx, [0; 8], Kind::Server, "POST /rpc");
        #[derive(Debug)]
        struct Nowhere;
        impl SpanSink for Nowhere {
            fn submit(&self, _: SpanRecord) {}
        }
        let parent = Parent {
            sink: Arc::new(Nowhere),
            ctx: root.context(),
        };
        let mut child = parent.child(Kind::Client, "POST");
        assert_eq!(child.trace_id, root.trace_id);
        assert_eq!(child.parent_id, root.span_id);
        assert_ne!(child.span_id, root.span_id);
        assert_eq!(child.context().span_id, child.span_id);
        child.set("wiregate.retry", 1i64);
        assert_eq!(child.attrs, vec![("wiregate.retry", Value::Int(1))]);
        assert!(child.has("wiregate.retry") && !child.has("error.type"));
        child.fail("timeout");
        child.fail("502");
        assert_eq!(
            child.error.as_deref(),
            Some("timeout"),
            "the first failure stays"
        );
        assert_eq!(
            child
                .attrs
                .iter()
                .filter(|(k, _)| *k == "error.type")
                .count(),
            1
        );
        child.end();
        let ended = child.end_ns;
        assert!(ended >= child.start_ns && ended > 0);
        child.end();
        assert_eq!(child.end_ns, ended, "ends once");
    }
}
