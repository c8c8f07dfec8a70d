//! The direct encoding against the official message structs: what is written decodes, with
//! `opentelemetry-proto`, to exactly the request built field by field from the same spans.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::http::span::{Kind, Value};
use crate::http::trace::TraceContext;

/// An attribute as a test sets it.
#[derive(Clone, Debug)]
enum Owned {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl Owned {
    fn value(&self) -> Value<'_> {
        match self {
            Owned::Str(s) => Value::Str(s),
            Owned::Int(i) => Value::Int(*i),
            Owned::Bool(b) => Value::Bool(*b),
        }
    }
}

fn kv(k: &str, v: &Owned) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(match v {
                Owned::Str(s) => any_value::Value::StringValue(s.clone()),
                Owned::Int(i) => any_value::Value::IntValue(*i),
                Owned::Bool(b) => any_value::Value::BoolValue(*b),
            }),
        }),
        ..KeyValue::default()
    }
}

/// What a test gave a span: its name and attributes.
type Given = (String, Vec<(&'static str, Owned)>);

/// The request the long way: the structs, each id, key and value copied in; each span's name
/// and attributes are the ones the test gave it (`given`, span by span), not read back.
fn by_structs(
    service: &Service,
    spans: &[SpanRecord],
    given: &[Given],
) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![
            kv("service.name", &Owned::Str(service.name.clone())),
            kv("service.instance.id", &Owned::Str(service.instance.clone())),
            kv("telemetry.sdk.language", &Owned::Str("rust".into())),
            kv("telemetry.sdk.name", &Owned::Str("wiregate".into())),
        ],
        ..Resource::default()
    };
    let spans = spans
        .iter()
        .zip(given)
        .map(|(s, (name, attrs))| Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: if s.parent_id == [0; 8] {
                Vec::new()
            } else {
                s.parent_id.to_vec()
            },
            flags: flags(s),
            name: name.clone(),
            kind: s.kind as i32,
            start_time_unix_nano: s.start_ns,
            end_time_unix_nano: s.end_ns.max(s.start_ns),
            attributes: attrs.iter().map(|(k, v)| kv(k, v)).collect(),
            status: Some(match &s.error {
                Some(e) => Status {
                    message: e.to_string(),
                    code: status::StatusCode::Error as i32,
                },
                None => Status::default(),
            }),
            ..Span::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "wiregate".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The request for `spans`, as the tracer builds it: each span as it is submitted, then the
/// envelope.
fn encode(service: &Service, spans: &[SpanRecord]) -> Vec<u8> {
    framed(service, spans, false).to_vec()
}

fn framed(service: &Service, spans: &[SpanRecord], framed: bool) -> bytes::Bytes {
    let mut batch = vec![0; HEAD_ROOM];
    for s in spans {
        put_span(&mut batch, s);
    }
    request(service, batch, framed)
}

#[test]
fn a_grpc_frame_and_a_name_too_long_for_the_room_are_written_too() {
    let ctx = TraceContext::for_parent(None).0;
    let spans = [SpanRecord::start(&ctx, [0; 8], Kind::Client, &["POST"])];
    let given = [("POST".to_owned(), Vec::new())];
    for name in ["wiregate".to_owned(), "n".repeat(300)] {
        let service = Service {
            name,
            instance: "node-1".into(),
        };
        let plain = encode(&service, &spans);
        let back = ExportTraceServiceRequest::decode(plain.as_slice()).unwrap();
        assert_eq!(back, by_structs(&service, &spans, &given));
        let frame = framed(&service, &spans, true);
        assert_eq!(frame[0], 0, "uncompressed");
        assert_eq!(
            u32::from_be_bytes(frame[1..5].try_into().unwrap()) as usize,
            plain.len()
        );
        assert_eq!(&frame[5..], plain.as_slice());
    }
}

fn service() -> Service {
    Service {
        name: "wiregate".into(),
        instance: "node-1".into(),
    }
}

#[test]
fn a_span_is_written_with_its_ids_kind_status_and_attributes() {
    let ctx = TraceContext::for_parent(Some(
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ))
    .0;
    let mut s = SpanRecord::start(&ctx, ctx.parent_id, Kind::Server, &["POST", " /rpc"]);
    let attrs = vec![
        ("rpc.system", Owned::Str("jsonrpc".into())),
        ("rpc.jsonrpc.error_code", Owned::Int(-32601)),
        ("wiregate.passthrough", Owned::Bool(false)),
        ("error.type", Owned::Str("method_not_found".into())),
    ];
    for (k, v) in &attrs[..3] {
        s.set(k, v.value());
    }
    s.fail("method_not_found");
    s.end();
    let bytes = encode(&service(), std::slice::from_ref(&s));
    let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
    assert_eq!(
        back,
        by_structs(&service(), &[s], &[("POST /rpc".into(), attrs)])
    );
    let got = &back.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(got.trace_id, ctx.trace_id);
    assert_eq!(
        got.parent_span_id,
        [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
    );
    assert_eq!(
        (got.kind, got.flags & 0x300),
        (2, 0x300),
        "a server span, its parent remote"
    );
    assert_eq!(got.status.as_ref().unwrap().code, 2);
}

fn value() -> impl Strategy<Value = Owned> {
    prop_oneof![
        ".{0,300}".prop_map(Owned::Str),
        any::<i64>().prop_map(Owned::Int),
        any::<bool>().prop_map(Owned::Bool),
    ]
}

/// A span with the attributes set on it, and those attributes.
fn span() -> impl Strategy<Value = (SpanRecord, Given)> {
    const KEYS: [&str; 4] = ["rpc.method", "url.path", "wiregate.retry", "a"];
    (
        any::<[u8; 16]>(),
        any::<[u8; 8]>(),
        prop_oneof![Just([0u8; 8]), any::<[u8; 8]>()],
        ".{0,200}",
        0..3usize,
        any::<(u64, u64)>(),
        proptest::collection::vec((0..4usize, value()), 0..12),
        proptest::option::of(".{0,100}"),
    )
        .prop_map(
            |(trace_id, span_id, parent_id, name, kind, (start, end), attrs, error)| {
                let ctx = TraceContext {
                    trace_id,
                    span_id,
                    flags: 1,
                    parent_id,
                };
                let kind = [Kind::Internal, Kind::Server, Kind::Client][kind];
                let mut s = SpanRecord::start(&ctx, parent_id, kind, &[&name]);
                (s.start_ns, s.end_ns) = (start, end);
                let attrs: Vec<_> = attrs.into_iter().map(|(k, v)| (KEYS[k], v)).collect();
                for (k, v) in &attrs {
                    s.set(k, v.value());
                }
                s.error = error.map(Into::into);
                (s, (name, attrs))
            },
        )
}

proptest! {
    #[test]
    fn any_batch_decodes_to_the_structs_built_from_it(
        spans in proptest::collection::vec(span(), 0..20),
        name in ".{0,50}",
        instance in ".{0,50}",
    ) {
        let service = Service { name, instance };
        let (spans, attrs): (Vec<_>, Vec<_>) = spans.into_iter().unzip();
        let bytes = encode(&service, &spans);
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        prop_assert_eq!(back, by_structs(&service, &spans, &attrs));
        for (s, (_, set)) in spans.iter().zip(&attrs) {
            let read: Vec<_> = s.attrs.iter().collect();
            let set: Vec<_> = set.iter().map(|(k, v)| (*k, v.value())).collect();
            prop_assert_eq!(read, set, "read back as set");
        }
    }
}
