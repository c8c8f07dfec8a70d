//! The direct encoding against the official message structs: what is written decodes, with
//! `opentelemetry-proto`, to exactly the request built field by field from the same spans.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::http::span::Kind;
use crate::http::trace::TraceContext;

/// The request the long way: the structs, each id, key and value copied in.
fn by_structs(service: &Service, spans: &[SpanRecord]) -> ExportTraceServiceRequest {
    let kv = |k: &str, v: &Value| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(match v {
                Value::Str(s) => any_value::Value::StringValue(s.to_string()),
                Value::Int(i) => any_value::Value::IntValue(*i),
                Value::Bool(b) => any_value::Value::BoolValue(*b),
            }),
        }),
        ..KeyValue::default()
    };
    let resource = Resource {
        attributes: vec![
            kv("service.name", &Value::from(service.name.clone())),
            kv(
                "service.instance.id",
                &Value::from(service.instance.clone()),
            ),
            kv("telemetry.sdk.language", &Value::from("rust")),
            kv("telemetry.sdk.name", &Value::from("wiregate")),
        ],
        ..Resource::default()
    };
    let spans = spans
        .iter()
        .map(|s| Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: if s.parent_id == [0; 8] {
                Vec::new()
            } else {
                s.parent_id.to_vec()
            },
            flags: flags(s),
            name: s.name.to_string(),
            kind: s.kind as i32,
            start_time_unix_nano: s.start_ns,
            end_time_unix_nano: s.end_ns.max(s.start_ns),
            attributes: s.attrs.iter().map(|(k, v)| kv(k, v)).collect(),
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
    let mut s = SpanRecord::start(&ctx, ctx.parent_id, Kind::Server, "POST /rpc");
    s.set("rpc.system", "jsonrpc");
    s.set("rpc.jsonrpc.error_code", -32601i64);
    s.set("wiregate.passthrough", false);
    s.fail("method_not_found");
    s.end();
    let bytes = encode(&service(), std::slice::from_ref(&s));
    let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
    assert_eq!(back, by_structs(&service(), &[s]));
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

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,300}".prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

fn span() -> impl Strategy<Value = SpanRecord> {
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
            |(trace_id, span_id, parent_id, name, kind, (start, end), attrs, error)| SpanRecord {
                trace_id,
                span_id,
                parent_id,
                name: name.into(),
                kind: [Kind::Internal, Kind::Server, Kind::Client][kind],
                start_ns: start,
                end_ns: end,
                attrs: attrs.into_iter().map(|(k, v)| (KEYS[k], v)).collect(),
                error: error.map(Into::into),
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
        let bytes = encode(&service, &spans);
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        prop_assert_eq!(back, by_structs(&service, &spans));
    }
}
