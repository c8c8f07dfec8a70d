//! Spans as OTLP's protobuf (`ExportTraceServiceRequest`): one request per batch, the gateway
//! as its one resource and instrumentation scope. Written straight from the spans, field by
//! field, in the official definitions' tags: building `opentelemetry-proto`'s message structs
//! first cost a copy of every id, key and value (an allocation each). The tests decode what is
//! written with those structs (`prost`), and compare it with the structs built the long way.
//! Pure.

use crate::http::span::{SpanRecord, Value};

/// Who exports: the resource's `service.name` and `service.instance.id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Service {
    /// `service.name`.
    pub name: String,
    /// `service.instance.id`.
    pub instance: String,
}

// Protobuf wire types.
const VARINT: u32 = 0;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// The export request for `spans`, encoded. Each message's length is computed once (a span's,
/// then its attributes' while it is written) and written before it, as protobuf asks.
pub(crate) fn encode(service: &Service, spans: &[SpanRecord]) -> Vec<u8> {
    let resource = [
        ("service.name", Str(&service.name)),
        ("service.instance.id", Str(&service.instance)),
        ("telemetry.sdk.language", Str("rust")),
        ("telemetry.sdk.name", Str("wiregate")),
    ];
    let resource_len: usize = resource.iter().map(|(k, v)| field(kv_len(k, v))).sum();
    let scope_len = field("wiregate".len()) + field(env!("CARGO_PKG_VERSION").len());
    let lens: Vec<usize> = spans.iter().map(span_len).collect();
    let spans_len: usize = lens.iter().map(|l| field(*l)).sum();
    // ResourceSpans: resource = 1, scope_spans = 2.
    let scope_spans_len = field(scope_len) + spans_len;
    let resource_spans_len = field(resource_len) + field(scope_spans_len);
    let mut out = Vec::with_capacity(field(resource_spans_len));
    // ExportTraceServiceRequest.resource_spans = 1
    key(&mut out, 1, LEN);
    varint(&mut out, resource_spans_len as u64);
    key(&mut out, 1, LEN);
    varint(&mut out, resource_len as u64);
    for (k, v) in &resource {
        // Resource.attributes = 1
        key(&mut out, 1, LEN);
        put_kv(&mut out, k, v, kv_len(k, v));
    }
    key(&mut out, 2, LEN);
    varint(&mut out, scope_spans_len as u64);
    // ScopeSpans.scope = 1: InstrumentationScope name = 1, version = 2
    key(&mut out, 1, LEN);
    varint(&mut out, scope_len as u64);
    put_str(&mut out, 1, "wiregate");
    put_str(&mut out, 2, env!("CARGO_PKG_VERSION"));
    for (s, len) in spans.iter().zip(lens) {
        // ScopeSpans.spans = 2
        key(&mut out, 2, LEN);
        varint(&mut out, len as u64);
        put_span(&mut out, s);
    }
    debug_assert_eq!(out.len(), field(resource_spans_len));
    out
}

/// A value as it is written: text borrowed, numbers and flags as they are.
#[derive(Clone, Copy)]
enum Val<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
}
use Val::Str;

impl<'a> From<&'a Value> for Val<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Str(s) => Val::Str(s),
            Value::Int(i) => Val::Int(*i),
            Value::Bool(b) => Val::Bool(*b),
        }
    }
}

/// Sampled, and (bits 8 and 9) whether the parent is known to be remote: a SERVER span's
/// parent, when it has one, is the client's.
fn flags(s: &SpanRecord) -> u32 {
    let remote = s.kind as i32 == 2 && s.parent_id != [0; 8];
    0x100 | 1 | if remote { 0x200 } else { 0 }
}

fn span_len(s: &SpanRecord) -> usize {
    let parent = if s.parent_id == [0; 8] { 0 } else { field(8) };
    let name = if s.name.is_empty() {
        0
    } else {
        field(s.name.len())
    };
    let attrs: usize = s
        .attrs
        .iter()
        .map(|(k, v)| field(kv_len(k, &v.into())))
        .sum();
    // trace_id, span_id, the parent; flags (tag 16: a two-byte key, four bytes); the name;
    // kind; start and end (a key and eight bytes each); attributes; status.
    field(16)
        + field(8)
        + parent
        + 6
        + name
        + 1
        + varint_len(s.kind as u64)
        + 18
        + attrs
        + field(status_len(s))
}

fn status_len(s: &SpanRecord) -> usize {
    match &s.error {
        // Status.message = 2, code = 3 (ERROR = 2)
        Some(e) => field(e.len()) + 2,
        None => 0,
    }
}

fn put_span(out: &mut Vec<u8>, s: &SpanRecord) {
    // The fixed-size fields in one copy: trace_id = 1, span_id = 2, parent_span_id = 4.
    let mut ids = [0u8; 18 + 10 + 10];
    ids[0] = 0x0a;
    ids[1] = 16;
    ids[2..18].copy_from_slice(&s.trace_id);
    ids[18] = 0x12;
    ids[19] = 8;
    ids[20..28].copy_from_slice(&s.span_id);
    let n = if s.parent_id == [0; 8] {
        28
    } else {
        ids[28] = 0x22;
        ids[29] = 8;
        ids[30..38].copy_from_slice(&s.parent_id);
        38
    };
    out.extend_from_slice(&ids[..n]);
    key(out, 16, FIXED32);
    out.extend_from_slice(&flags(s).to_le_bytes());
    if !s.name.is_empty() {
        put_str(out, 5, &s.name);
    }
    // kind = 6, start = 7, end = 8.
    let mut times = [0u8; 2 + 18];
    times[0] = 0x30;
    times[1] = s.kind as u8;
    times[2] = 0x39;
    times[3..11].copy_from_slice(&s.start_ns.to_le_bytes());
    times[11] = 0x41;
    times[12..20].copy_from_slice(&s.end_ns.max(s.start_ns).to_le_bytes());
    out.extend_from_slice(&times);
    for (k, v) in &s.attrs {
        let v = v.into();
        key(out, 9, LEN);
        put_kv(out, k, &v, kv_len(k, &v));
    }
    // Status = 15, always present (empty: UNSET).
    key(out, 15, LEN);
    varint(out, status_len(s) as u64);
    if let Some(e) = &s.error {
        put_str(out, 2, e);
        key(out, 3, VARINT);
        varint(out, 2);
    }
}

/// A KeyValue's length: key = 1, value = 2 (an AnyValue).
fn kv_len(k: &str, v: &Val<'_>) -> usize {
    field(k.len()) + field(any_len(v))
}

fn any_len(v: &Val<'_>) -> usize {
    match *v {
        // AnyValue string_value = 1, bool_value = 2, int_value = 3
        Val::Str(s) => field(s.len()),
        Val::Bool(_) => 2,
        Val::Int(i) => 1 + varint_len(i as u64),
    }
}

/// A KeyValue of length `len` (its [`kv_len`]), with its length first. A short one (nearly
/// every attribute: a key and a value of a few dozen bytes) is laid out on the stack and copied
/// in once, where a push per byte checked the buffer's room each time.
fn put_kv(out: &mut Vec<u8>, k: &str, v: &Val<'_>, len: usize) {
    const SHORT: usize = 126;
    if len <= SHORT {
        let mut b = [0u8; SHORT + 1];
        b[0] = len as u8;
        b[1] = 0x0a; // key = 1
        b[2] = k.len() as u8;
        b[3..3 + k.len()].copy_from_slice(k.as_bytes());
        let mut i = 3 + k.len();
        b[i] = 0x12; // value = 2
        b[i + 1] = any_len(v) as u8;
        i += 2;
        match *v {
            Val::Str(s) => {
                b[i] = 0x0a; // string_value = 1
                b[i + 1] = s.len() as u8;
                b[i + 2..i + 2 + s.len()].copy_from_slice(s.as_bytes());
                i += 2 + s.len();
            }
            Val::Bool(x) => {
                b[i] = 0x10; // bool_value = 2
                b[i + 1] = u8::from(x);
                i += 2;
            }
            Val::Int(n) => {
                b[i] = 0x18; // int_value = 3
                i += 1;
                let mut n = n as u64;
                while n >= 0x80 {
                    b[i] = n as u8 | 0x80;
                    n >>= 7;
                    i += 1;
                }
                b[i] = n as u8;
                i += 1;
            }
        }
        out.extend_from_slice(&b[..i]);
        return;
    }
    varint(out, len as u64);
    put_str(out, 1, k);
    key(out, 2, LEN);
    varint(out, any_len(v) as u64);
    match *v {
        Val::Str(s) => put_str(out, 1, s),
        Val::Bool(b) => {
            key(out, 2, VARINT);
            out.push(u8::from(b));
        }
        Val::Int(i) => {
            key(out, 3, VARINT);
            varint(out, i as u64);
        }
    }
}

/// The length of a length-delimited field of `len` bytes: its key (one byte: every such tag
/// here is below 16), its length, its content.
fn field(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

#[inline]
fn key(out: &mut Vec<u8>, tag: u32, wire: u32) {
    varint(out, u64::from(tag << 3 | wire));
}

fn put_str(out: &mut Vec<u8>, tag: u32, s: &str) {
    put_bytes(out, tag, s.as_bytes());
}

fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    key(out, tag, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[inline]
fn varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x80 {
        // Keys and most lengths: one byte.
        out.push(v as u8);
        return;
    }
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests;
