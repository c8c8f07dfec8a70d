//! Spans as OTLP's protobuf (`ExportTraceServiceRequest`): one request per batch, the gateway
//! as its one resource and instrumentation scope. Written straight from the spans, field by
//! field, in the official definitions' tags: building `opentelemetry-proto`'s message structs
//! first would cost a copy of every id, key and value (an allocation each). The tests decode
//! what is written with those structs (`prost`), and compare it with the structs built the
//! long way. Pure.

use bytes::Bytes;

use crate::http::span::{put_key_value, SpanRecord, Value::Str};
use crate::wire::protobuf::{field_len, key, put_bytes, varint, varint_len, FIXED32, LEN, VARINT};

/// Who exports: the resource's `service.name` and `service.instance.id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Service {
    /// `service.name`.
    pub name: String,
    /// `service.instance.id`.
    pub instance: String,
}

/// Appends span `s` as one `ScopeSpans.spans` field: what the tracer does as a span is
/// submitted, so a batch waits already encoded and its export is one copy.
pub(crate) fn put_span(out: &mut Vec<u8>, s: &SpanRecord) {
    let len = span_len(s);
    out.reserve(field_len(len));
    // ScopeSpans.spans = 2
    key(out, 2, LEN);
    varint(out, len as u64);
    let at = out.len();
    put_span_fields(out, s);
    debug_assert_eq!(out.len() - at, len);
}

/// Bytes a batch keeps free before its spans for the request's envelope (and gRPC's frame):
/// the request is then written around the spans where they lie, where copying a batch's
/// bytes into a new buffer measured dearer per call (docs/performance.md).
pub(crate) const HEAD_ROOM: usize = 256;

/// The export request around the spans in `batch`, written by [`put_span`] after
/// [`HEAD_ROOM`] bytes; with `framed`, in gRPC's length-prefixed frame. Each message's length
/// is written before it, as protobuf asks.
pub(crate) fn request(service: &Service, mut batch: Vec<u8>, framed: bool) -> Bytes {
    let spans_len = batch.len() - HEAD_ROOM;
    let resource = [
        ("service.name", Str(&service.name)),
        ("service.instance.id", Str(&service.instance)),
        ("telemetry.sdk.language", Str("rust")),
        ("telemetry.sdk.name", Str("wiregate")),
    ];
    let mut resource_bytes = Vec::with_capacity(128);
    for (k, v) in resource {
        // Resource.attributes = 1
        put_key_value(&mut resource_bytes, 1, k, v);
    }
    let scope_len = field_len("wiregate".len()) + field_len(env!("CARGO_PKG_VERSION").len());
    // ResourceSpans: resource = 1, scope_spans = 2.
    let scope_spans_len = field_len(scope_len) + spans_len;
    let resource_spans_len = field_len(resource_bytes.len()) + field_len(scope_spans_len);
    let total = field_len(resource_spans_len);
    let mut head = Vec::with_capacity(HEAD_ROOM);
    if framed {
        // gRPC: uncompressed, then the message's length.
        head.push(0);
        head.extend_from_slice(&(total as u32).to_be_bytes());
    }
    // ExportTraceServiceRequest.resource_spans = 1
    key(&mut head, 1, LEN);
    varint(&mut head, resource_spans_len as u64);
    put_bytes(&mut head, 1, &resource_bytes);
    key(&mut head, 2, LEN);
    varint(&mut head, scope_spans_len as u64);
    // ScopeSpans.scope = 1: InstrumentationScope name = 1, version = 2
    key(&mut head, 1, LEN);
    varint(&mut head, scope_len as u64);
    put_bytes(&mut head, 1, b"wiregate");
    put_bytes(&mut head, 2, env!("CARGO_PKG_VERSION").as_bytes());
    debug_assert_eq!(head.len() + spans_len, total + if framed { 5 } else { 0 });
    if head.len() <= HEAD_ROOM {
        let at = HEAD_ROOM - head.len();
        batch[at..HEAD_ROOM].copy_from_slice(&head);
        return Bytes::from(batch).slice(at..);
    }
    // A service name too long for the room: copied once.
    head.extend_from_slice(&batch[HEAD_ROOM..]);
    Bytes::from(head)
}

/// Sampled, and (bits 8 and 9) whether the parent is known to be remote: a SERVER span's
/// parent, when it has one, is the client's.
fn flags(s: &SpanRecord) -> u32 {
    let remote = s.kind as i32 == 2 && s.parent_id != [0; 8];
    0x100 | 1 | if remote { 0x200 } else { 0 }
}

fn span_len(s: &SpanRecord) -> usize {
    let parent = if s.parent_id == [0; 8] {
        0
    } else {
        field_len(8)
    };
    // trace_id, span_id, the parent; flags (tag 16: a two-byte key, four bytes); kind; start
    // and end (a key and eight bytes each); the name and attributes; status.
    field_len(16)
        + field_len(8)
        + parent
        + 6
        + 1
        + varint_len(s.kind as u64)
        + 18
        + s.attrs.as_bytes().len()
        + field_len(status_len(s))
}

fn status_len(s: &SpanRecord) -> usize {
    match &s.error {
        // Status.message = 2, code = 3 (ERROR = 2)
        Some(e) => field_len(e.len()) + 2,
        None => 0,
    }
}

fn put_span_fields(out: &mut Vec<u8>, s: &SpanRecord) {
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
    // kind = 6, start = 7, end = 8.
    let mut times = [0u8; 2 + 18];
    times[0] = 0x30;
    times[1] = s.kind as u8;
    times[2] = 0x39;
    times[3..11].copy_from_slice(&s.start_ns.to_le_bytes());
    times[11] = 0x41;
    times[12..20].copy_from_slice(&s.end_ns.max(s.start_ns).to_le_bytes());
    out.extend_from_slice(&times);
    // name = 5 and attributes = 9, written when they were given.
    out.extend_from_slice(s.attrs.as_bytes());
    // Status = 15, always present (empty: UNSET).
    key(out, 15, LEN);
    varint(out, status_len(s) as u64);
    if let Some(e) = &s.error {
        put_bytes(out, 2, e.as_bytes());
        key(out, 3, VARINT);
        varint(out, 2);
    }
}

#[cfg(test)]
mod tests;
