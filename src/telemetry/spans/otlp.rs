//! Spans as OTLP's protobuf messages (`opentelemetry-proto`): one `ExportTraceServiceRequest`
//! per batch, the gateway as its one resource and instrumentation scope. Pure.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};

use crate::http::span::{SpanRecord, Value};

/// Who exports: the resource's `service.name` and `service.instance.id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Service {
    /// `service.name`.
    pub name: String,
    /// `service.instance.id`.
    pub instance: String,
}

/// The export request for `spans`.
pub(crate) fn request(service: &Service, spans: Vec<SpanRecord>) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![
            kv("service.name", Value::Str(service.name.clone().into())),
            kv(
                "service.instance.id",
                Value::Str(service.instance.clone().into()),
            ),
            kv("telemetry.sdk.language", Value::from("rust")),
            kv("telemetry.sdk.name", Value::from("wiregate")),
        ],
        ..Resource::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "wiregate".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                spans: spans.into_iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn span(s: SpanRecord) -> Span {
    let status = match &s.error {
        Some(e) => Status {
            message: e.to_string(),
            code: status::StatusCode::Error as i32,
        },
        None => Status::default(),
    };
    Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: if s.parent_id == [0; 8] {
            Vec::new()
        } else {
            s.parent_id.to_vec()
        },
        // Sampled, and (bits 8 and 9) whether the parent is known to be remote: a SERVER
        // span's parent, when it has one, is the client's.
        flags: 0x100
            | 1
            | if s.kind as i32 == 2 && s.parent_id != [0; 8] {
                0x200
            } else {
                0
            },
        name: s.name.into_owned(),
        kind: s.kind as i32,
        start_time_unix_nano: s.start_ns,
        end_time_unix_nano: s.end_ns.max(s.start_ns),
        attributes: s.attrs.into_iter().map(|(k, v)| kv(k, v)).collect(),
        status: Some(status),
        ..Span::default()
    }
}

fn kv(key: &'static str, value: Value) -> KeyValue {
    let value = match value {
        Value::Str(s) => any_value::Value::StringValue(s.into_owned()),
        Value::Int(i) => any_value::Value::IntValue(i),
        Value::Bool(b) => any_value::Value::BoolValue(b),
    };
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::span::Kind;
    use crate::http::trace::TraceContext;
    use prost::Message;

    #[test]
    fn a_span_is_encoded_with_its_ids_kind_status_and_attributes() {
        let ctx = TraceContext::for_parent(Some(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ))
        .0;
        let mut s = SpanRecord::start(&ctx, ctx.parent_id, Kind::Server, "POST /rpc");
        s.set("rpc.system", "jsonrpc");
        s.set("rpc.jsonrpc.error_code", -32601i64);
        s.fail("method_not_found");
        s.end();
        let service = Service {
            name: "wiregate".into(),
            instance: "node-1".into(),
        };
        let bytes = request(&service, vec![s.clone()]).encode_to_vec();
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        let rs = &back.resource_spans[0];
        let attrs = &rs.resource.as_ref().unwrap().attributes;
        assert!(attrs.iter().any(|a| a.key == "service.instance.id"));
        let got = &rs.scope_spans[0].spans[0];
        assert_eq!(got.trace_id, ctx.trace_id);
        assert_eq!(got.span_id, ctx.span_id);
        assert_eq!(
            got.parent_span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert_eq!(got.kind, 2);
        assert_eq!(got.name, "POST /rpc");
        assert_eq!(got.status.as_ref().unwrap().code, 2);
        assert_eq!(got.flags & 0x300, 0x300, "the parent is remote");
        let code = got
            .attributes
            .iter()
            .find(|a| a.key == "rpc.jsonrpc.error_code")
            .unwrap();
        assert_eq!(
            code.value.as_ref().unwrap().value,
            Some(any_value::Value::IntValue(-32601))
        );
    }
}
