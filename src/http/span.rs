//! One span as the call path records it: ids, name, kind, times and attributes, handed when it
//! ends to the [`SpanSink`] of the gateway that started its trace. Pure data: the exporter
//! (`telemetry::spans`) owns batching and the wire; the call path owns nothing but this record,
//! so recording a span is a few stores and one push.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::trace::TraceContext;
use crate::wire::protobuf as pb;

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

/// An attribute's value, as it is set: text is borrowed for the moment it is written into the
/// span's encoded attributes, never kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value<'a> {
    /// Text.
    Str(&'a str),
    /// A whole number.
    Int(i64),
    /// A flag.
    Bool(bool),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(s)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(s: &'a String) -> Self {
        Value::Str(s)
    }
}

impl From<i64> for Value<'_> {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value<'_> {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// A span's attributes, written as they are set in the form the exporter sends: each one
/// OTLP's `Span.attributes` field (a `KeyValue`, protobuf). Setting one is a copy of its key
/// and value into one buffer, where a list of owned values cost an allocation a value and a
/// second pass to encode them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attributes(Vec<u8>);

/// `Span.attributes`' field number.
const SPAN_ATTRIBUTES: u32 = 9;

/// Room a span's attributes start with: a SERVER span of a call writes about 400 bytes.
const ROOM: usize = 512;
/// Buffers kept for reuse on each thread.
const SPARE_MAX: usize = 16;

thread_local! {
    /// Attribute buffers of submitted spans, cleared: a traced call takes two and gives two
    /// back, so the request path allocates none.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Attributes {
    /// A buffer with [`ROOM`] (a spare one when this thread has one) holding the span's name,
    /// the concatenation of `name`: `Span.name` is a field like the attributes, and fields
    /// may come in any order, so the name is written once here rather than kept as a string.
    fn fresh(name: &[&str]) -> Self {
        let spare = SPARE.with(|s| s.borrow_mut().pop());
        let mut b = spare.unwrap_or_else(|| Vec::with_capacity(ROOM));
        let len: usize = name.iter().map(|p| p.len()).sum();
        if len > 0 {
            // Span.name = 5
            pb::key(&mut b, 5, pb::LEN);
            pb::varint(&mut b, len as u64);
            for p in name {
                b.extend_from_slice(p.as_bytes());
            }
        }
        Attributes(b)
    }

    /// Gives the buffer back to this thread's spares (a grown one is let go).
    fn recycle(mut self) {
        if self.0.capacity() > 4 * ROOM {
            return;
        }
        self.0.clear();
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_MAX {
                s.push(self.0);
            }
        });
    }

    /// Appends attribute `key`.
    #[inline(always)]
    fn push(&mut self, key: &str, value: Value<'_>) {
        put_key_value(&mut self.0, SPAN_ATTRIBUTES, key, value);
    }

    /// The name and attributes as they are sent: `Span.name`, then `Span.attributes` fields.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Each attribute, in the order it was set, read back from its encoding.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, Value<'_>)> {
        let mut rest = self.0.as_slice();
        if rest.first() == Some(&(5 << 3 | pb::LEN as u8)) {
            rest = read_len(&rest[1..]).map_or(&[][..], |(name, n)| &rest[1 + n + name.len()..]);
        }
        std::iter::from_fn(move || {
            let (entry, tail) = read_key_value(rest)?;
            rest = tail;
            Some(entry)
        })
    }
}

/// Writes field `tag` holding the `KeyValue` of `key` and `value` (key = 1, value = 2, an
/// `AnyValue`: string_value = 1, bool_value = 2, int_value = 3). A short one (nearly every
/// attribute: a key and a value of a few dozen bytes, every length one byte) is room reserved
/// once and four copies, two of them four bytes: a push a byte checked the buffer's room each
/// time, a zeroed stack buffer would pay its zeroing (both measured dearer: docs/performance.md).
///
/// Inlined: at each call site the key is a constant, so its copy and most of the lengths fold
/// to a few stores.
#[inline(always)]
pub(crate) fn put_key_value(out: &mut Vec<u8>, tag: u32, key: &str, value: Value<'_>) {
    let any = match value {
        Value::Str(s) => pb::field_len(s.len()),
        Value::Bool(_) => 2,
        Value::Int(i) => 1 + pb::varint_len(i as u64),
    };
    let kv = pb::field_len(key.len()) + pb::field_len(any);
    if kv < 0x80 && tag < 16 {
        // Every length is one byte: kv < 128 holds the key's, the value's and its text's.
        out.reserve(2 + kv);
        out.extend_from_slice(&[(tag << 3 | pb::LEN) as u8, kv as u8, 0x0a, key.len() as u8]);
        out.extend_from_slice(key.as_bytes());
        match value {
            Value::Str(s) => {
                out.extend_from_slice(&[0x12, any as u8, 0x0a, s.len() as u8]);
                out.extend_from_slice(s.as_bytes());
            }
            Value::Bool(b) => out.extend_from_slice(&[0x12, 2, 0x10, u8::from(b)]),
            Value::Int(i) => {
                out.extend_from_slice(&[0x12, any as u8, 0x18]);
                pb::varint(out, i as u64);
            }
        }
        return;
    }
    put_long_key_value(out, tag, key, value, kv, any);
}

/// [`put_key_value`] for a pair whose lengths take more than a byte.
#[inline(never)]
fn put_long_key_value(
    out: &mut Vec<u8>,
    tag: u32,
    key: &str,
    value: Value<'_>,
    kv: usize,
    any: usize,
) {
    pb::key(out, tag, pb::LEN);
    pb::varint(out, kv as u64);
    pb::put_bytes(out, 1, key.as_bytes());
    pb::key(out, 2, pb::LEN);
    pb::varint(out, any as u64);
    match value {
        Value::Str(s) => pb::put_bytes(out, 1, s.as_bytes()),
        Value::Bool(b) => {
            pb::key(out, 2, pb::VARINT);
            out.push(u8::from(b));
        }
        Value::Int(i) => {
            pb::key(out, 3, pb::VARINT);
            pb::varint(out, i as u64);
        }
    }
}

/// Reads the field [`put_key_value`] wrote at the start of `b`, and what follows it.
fn read_key_value(b: &[u8]) -> Option<((&str, Value<'_>), &[u8])> {
    let (_, n) = pb::read_varint(b)?;
    let (kv, m) = read_len(&b[n..])?;
    let rest = &b[n + m + kv.len()..];
    // key = 1
    let (k, used) = read_len(kv.strip_prefix(&[0x0a])?)?;
    let key = std::str::from_utf8(k).ok()?;
    // value = 2
    let (any, _) = read_len(kv[1 + used + k.len()..].strip_prefix(&[0x12])?)?;
    let (tag, n) = pb::read_varint(any)?;
    let value = match tag {
        0x0a => Value::Str(std::str::from_utf8(read_len(&any[n..])?.0).ok()?),
        0x10 => Value::Bool(pb::read_varint(&any[n..])?.0 != 0),
        0x18 => Value::Int(pb::read_varint(&any[n..])?.0 as i64),
        _ => return None,
    };
    Some(((key, value), rest))
}

/// A length-prefixed run at the start of `b`: its bytes and how many the length took.
fn read_len(b: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = pb::read_varint(b)?;
    Some((b.get(n..n + usize::try_from(len).ok()?)?, n))
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
    /// What it is to the trace.
    pub kind: Kind,
    /// When it started and ended, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// Zero until it ends.
    pub end_ns: u64,
    /// Its name (`POST /rpc`, a method name, `POST` for an upstream try) and attributes (by
    /// OpenTelemetry's semantic conventions' names), encoded as they were given.
    pub attrs: Attributes,
    /// Whether it failed (OTLP status `ERROR`), and why.
    pub error: Option<Cow<'static, str>>,
}

/// How long a thread goes on from one read of the wall clock: the time-stamp counter's drift
/// from it over that long stays within microseconds.
const REANCHOR_NS: u64 = 100_000_000;

thread_local! {
    /// The wall clock's last read on this thread, and `quanta`'s instant then.
    static ANCHOR: std::cell::Cell<Option<(u64, quanta::Instant)>> = const { std::cell::Cell::new(None) };
}

/// Nanoseconds since the Unix epoch, as a span's start and end are stamped: the wall clock read
/// at most every 100 ms on each thread, advanced between by `quanta`'s clock (the CPU's
/// time-stamp counter where it has one): measured cheaper than four wall clock reads a traced
/// call (docs/performance.md).
pub(crate) fn now_ns() -> u64 {
    let now = quanta::Instant::now();
    ANCHOR.with(|anchor| {
        if let Some((wall, at)) = anchor.get() {
            let since = now.saturating_duration_since(at).as_nanos() as u64;
            if since < REANCHOR_NS {
                return wall + since;
            }
        }
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        anchor.set(Some((wall, now)));
        wall
    })
}

impl SpanRecord {
    /// A span of `ctx`'s trace with `ctx`'s span id and `parent_id` for parent, started now.
    pub(crate) fn start(ctx: &TraceContext, parent_id: [u8; 8], kind: Kind, name: &[&str]) -> Self {
        SpanRecord {
            trace_id: ctx.trace_id,
            span_id: ctx.span_id,
            parent_id,
            kind,
            start_ns: now_ns(),
            end_ns: 0,
            attrs: Attributes::fresh(name),
            error: None,
        }
    }

    /// A placeholder, what a span's slot holds once the span has left it.
    pub(crate) fn empty() -> Self {
        SpanRecord {
            trace_id: [0; 16],
            span_id: [0; 8],
            parent_id: [0; 8],
            kind: Kind::Internal,
            start_ns: 0,
            end_ns: 0,
            attrs: Attributes::default(),
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
    /// set twice is exported twice), which keeps a call's dozen attributes a dozen copies.
    #[inline(always)]
    pub(crate) fn set<'a>(&mut self, key: &str, value: impl Into<Value<'a>>) {
        self.attrs.push(key, value.into());
    }

    /// Whether attribute `key` is set.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.attrs.iter().any(|(k, _)| k == key)
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

    /// The peer a CLIENT span went to: `server.address` and `server.port`, and its
    /// `host:port` label (how logs and metrics name it) as `wiregate.endpoint`.
    pub(crate) fn set_server(&mut self, (host, port): (&str, u16), label: &str) {
        self.set("server.address", host);
        self.set("server.port", i64::from(port));
        self.set("wiregate.endpoint", label);
    }

    /// Marks the span failed with `error.type` `kind`; the first failure named stays.
    pub(crate) fn fail(&mut self, kind: impl Into<Cow<'static, str>>) {
        if self.error.is_some() {
            return;
        }
        let kind = kind.into();
        self.set("error.type", &*kind);
        self.error = Some(kind);
    }

    /// Lets the span go once it is written out: its attribute buffer serves the next span.
    pub(crate) fn recycle(self) {
        self.attrs.recycle();
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
    pub(crate) fn child(&self, kind: Kind, name: &str) -> SpanRecord {
        let ctx = TraceContext {
            span_id: super::trace::new_span_id(),
            parent_id: self.ctx.span_id,
            ..self.ctx
        };
        SpanRecord::start(&ctx, self.ctx.span_id, kind, &[name])
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
    fn span_times_follow_the_wall_clock() {
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        };
        let before = wall();
        let first = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let second = now_ns();
        let after = wall();
        assert!(second > first, "time goes on between reads");
        // Within a millisecond of the wall clock on either side.
        assert!(first + 1_000_000 >= before && second <= after + 1_000_000);
        assert!(second - first >= 29_000_000, "{}", second - first);
    }

    #[test]
    fn a_child_keeps_the_trace_and_names_its_parent() {
        let ctx = TraceContext::for_parent(None).0;
        let root = SpanRecord::start(&ctx, [0; 8], Kind::Server, &["POST /rpc"]);
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
        child.set("url.path", "/a");
        child.set("wiregate.passthrough", false);
        assert_eq!(
            child.attrs.iter().collect::<Vec<_>>(),
            [
                ("wiregate.retry", Value::Int(1)),
                ("url.path", Value::Str("/a")),
                ("wiregate.passthrough", Value::Bool(false))
            ]
        );
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
