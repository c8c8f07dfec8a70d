//! OpenTelemetry spans over real sockets, read back by an OTLP collector on loopback that decodes
//! them with the official protobuf definitions: the spans of a translated call, a batch, a
//! retried call (`rpc`), a split and a shadowed call (`migration`), a pass-through request
//! (`passthrough`), an A2A streamed turn through sid (`sid`); and the exporter itself: sampling,
//! gRPC, a collector that is down, slow or refusing, reload (`export`).
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod export;
mod migration;
mod passthrough;
mod rpc;
mod sid;

use support::otlp::{Collector, Exported};
use support::GatewayBuilder;

/// `gw` exporting every span to `collector` over OTLP/HTTP, every 50 ms.
pub fn traced(gw: GatewayBuilder, collector: &Collector) -> GatewayBuilder {
    let endpoint = collector.http();
    gw.with(move |c| {
        c.tracing.otlp_endpoint = endpoint;
        c.tracing.export_interval_ms = 50;
    })
}

/// The one span named `name` of kind `kind` among `spans`.
pub fn one<'a>(spans: &'a [Exported], kind: i32, name: &str) -> &'a Exported {
    let found: Vec<&Exported> = spans
        .iter()
        .filter(|s| s.kind() == kind && s.span.name == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} of kind {kind} in {:#?}",
        support::otlp::summary(spans)
    );
    found[0]
}

/// The spans of kind `kind` among `spans`.
pub fn of_kind(spans: &[Exported], kind: i32) -> Vec<&Exported> {
    spans.iter().filter(|s| s.kind() == kind).collect()
}

/// SpanKind numbers.
pub const INTERNAL: i32 = 1;
/// SpanKind numbers.
pub const SERVER: i32 = 2;
/// SpanKind numbers.
pub const CLIENT: i32 = 3;
