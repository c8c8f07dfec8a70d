//! The spans of `POST /rpc`: a translated call is a SERVER span with a CLIENT child per upstream
//! try, a batch an INTERNAL span per call, a retried call one CLIENT span per try; a client's
//! `traceparent` is continued and the upstream sees the CLIENT span's id.

use serde_json::json;
use wiregate::config::{Balance, Dialect, Upstream};

use crate::support::{dead_url, gateway, jsonrpc_echo, legacy_echo, otlp::Collector, otlp::Mode};
use crate::{of_kind, one, traced, CLIENT, INTERNAL, SERVER};

const CLIENT_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_translated_call_is_a_server_span_and_a_client_span_the_upstream_sees() {
    let collector = Collector::start(Mode::Accept).await;
    let up = legacy_echo().run().await;
    let gw = traced(
        gateway()
            .upstream("old", &up.url(), Dialect::Legacy, 2000)
            .route(&["*"], "old"),
        &collector,
    )
    .with(|c| c.tracing.service_name = "edge-gw".into())
    .start()
    .await;
    let a = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "plan.get", "params": {"p": 1}}),
            &[
                ("traceparent", CLIENT_PARENT),
                ("authorization", "Bearer s3cret"),
            ],
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let spans = collector.trace("4bf92f3577b34da6a3ce929d0e0e4736", 2).await;
    let server = one(&spans, SERVER, "POST /rpc");
    assert_eq!(
        server.parent(),
        "00f067aa0ba902b7",
        "the client's span is the parent"
    );
    assert_eq!(server.attr("rpc.system").as_deref(), Some("jsonrpc"));
    assert_eq!(server.attr("rpc.method").as_deref(), Some("plan.get"));
    assert_eq!(server.attr("rpc.jsonrpc.request_id").as_deref(), Some("7"));
    assert_eq!(server.attr("http.request.method").as_deref(), Some("POST"));
    assert_eq!(
        server.attr("http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(server.attr("url.path").as_deref(), Some("/rpc"));
    assert_eq!(
        server.attr("wiregate.client_dialect").as_deref(),
        Some("jsonrpc")
    );
    assert_eq!(
        server.attr("wiregate.upstream_dialect").as_deref(),
        Some("legacy")
    );
    assert_eq!(
        server.resource_attr("service.name").as_deref(),
        Some("edge-gw")
    );
    assert!(server.resource_attr("service.instance.id").is_some());
    assert!(!server.failed());
    let client = one(&spans, CLIENT, "POST");
    assert_eq!(client.parent(), server.id());
    assert_eq!(client.attr("server.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(client.attr("server.port"), Some(up.addr.port().to_string()));
    assert_eq!(client.attr("wiregate.retry").as_deref(), Some("0"));
    assert_eq!(
        client.attr("http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(client.attr("wiregate.upstream").as_deref(), Some("old"));
    // The upstream's `traceparent` names the exported CLIENT span.
    let seen = up.seen();
    let sent = seen[0].headers["traceparent"].to_str().unwrap();
    assert_eq!(
        sent,
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", client.id())
    );
    // No credential or body anywhere in what was exported.
    let all = format!("{:?}", spans);
    assert!(!all.contains("s3cret") && !all.contains("\"p\""), "{all}");
}

#[tokio::test]
async fn a_batch_is_an_internal_span_per_call_each_with_its_tries() {
    let collector = Collector::start(Mode::Accept).await;
    let up = jsonrpc_echo().run().await;
    let gw = traced(
        gateway()
            .upstream("modern", &up.url(), Dialect::Jsonrpc, 2000)
            .route(&["plan.*"], "modern"),
        &collector,
    )
    .start()
    .await;
    let a = gw
        .rpc_with(
            &json!([
                {"jsonrpc": "2.0", "id": 1, "method": "plan.get"},
                {"jsonrpc": "2.0", "id": "two", "method": "plan.list"},
                {"jsonrpc": "2.0", "id": 3, "method": "nowhere"}
            ]),
            &[("traceparent", CLIENT_PARENT)],
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let spans = collector.trace("4bf92f3577b34da6a3ce929d0e0e4736", 6).await;
    let server = one(&spans, SERVER, "POST /rpc");
    let internal = of_kind(&spans, INTERNAL);
    assert_eq!(
        internal.len(),
        3,
        "{:#?}",
        crate::support::otlp::summary(&spans)
    );
    assert!(internal.iter().all(|s| s.parent() == server.id()));
    let get = one(&spans, INTERNAL, "plan.get");
    assert_eq!(get.attr("rpc.jsonrpc.request_id").as_deref(), Some("1"));
    let list = one(&spans, INTERNAL, "plan.list");
    assert_eq!(list.attr("rpc.jsonrpc.request_id").as_deref(), Some("two"));
    let missing = one(&spans, INTERNAL, "nowhere");
    assert_eq!(
        missing.attr("rpc.jsonrpc.error_code").as_deref(),
        Some("-32601")
    );
    assert!(missing.failed());
    let clients = of_kind(&spans, CLIENT);
    assert_eq!(clients.len(), 2);
    let parents: Vec<String> = clients.iter().map(|c| c.parent()).collect();
    assert!(
        parents.contains(&get.id()) && parents.contains(&list.id()),
        "{parents:?}"
    );
}

#[tokio::test]
async fn a_retried_call_has_one_client_span_per_try_and_endpoint() {
    let collector = Collector::start(Mode::Accept).await;
    let dead = dead_url().await;
    let live = jsonrpc_echo().run().await;
    let mut u = Upstream::new("fleet-traced", "", Dialect::Jsonrpc, 2000);
    u.url = String::new();
    u.endpoints = vec![dead.clone(), live.url()];
    u.balance = Balance::RoundRobin;
    u.outlier.consecutive_failures = 0;
    let gw = traced(
        gateway()
            .with(move |c| c.upstreams.push(u))
            .route(&["*"], "fleet-traced"),
        &collector,
    )
    .start()
    .await;
    // Round robin starts at the dead endpoint; a refused connection is retried elsewhere.
    let a = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "m"}),
            &[("traceparent", CLIENT_PARENT)],
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let spans = collector.trace("4bf92f3577b34da6a3ce929d0e0e4736", 3).await;
    let server = one(&spans, SERVER, "POST /rpc");
    let mut tries = of_kind(&spans, CLIENT);
    tries.sort_by_key(|s| s.attr("wiregate.retry"));
    assert_eq!(
        tries.len(),
        2,
        "{:#?}",
        crate::support::otlp::summary(&spans)
    );
    assert!(tries.iter().all(|t| t.parent() == server.id()));
    let dead_host = crate::support::otlp::authority(&dead);
    assert_eq!(tries[0].attr("wiregate.retry").as_deref(), Some("0"));
    assert_eq!(tries[0].attr("wiregate.endpoint"), Some(dead_host));
    assert!(tries[0].failed());
    assert!(tries[0].attr("error.type").is_some());
    assert_eq!(tries[1].attr("wiregate.retry").as_deref(), Some("1"));
    assert_eq!(
        tries[1].attr("wiregate.endpoint"),
        Some(crate::support::otlp::authority(&live.url()))
    );
    assert!(!tries[1].failed());
    let seen = live.seen();
    assert!(seen[0].headers["traceparent"]
        .to_str()
        .unwrap()
        .contains(&tries[1].id()));
}

#[tokio::test]
async fn a_legacy_client_and_a_failed_call_are_marked() {
    let collector = Collector::start(Mode::Accept).await;
    let dead = dead_url().await;
    let gw = traced(
        gateway()
            .upstream("gone", &dead, Dialect::Jsonrpc, 2000)
            .route(&["*"], "gone"),
        &collector,
    )
    .start()
    .await;
    let a = gw
        .rpc_with(
            &json!({"a2a_version": "1.0", "request_id": "r-9", "operation": "plan.get", "params": {}}),
            &[("traceparent", CLIENT_PARENT)],
        )
        .await;
    assert_eq!(a.status, 502, "{}", a.text);
    let spans = collector.trace("4bf92f3577b34da6a3ce929d0e0e4736", 2).await;
    let server = one(&spans, SERVER, "POST /rpc");
    assert_eq!(
        server.attr("wiregate.client_dialect").as_deref(),
        Some("legacy")
    );
    assert_eq!(
        server.attr("rpc.jsonrpc.error_code").as_deref(),
        Some("-32050")
    );
    assert_eq!(
        server.attr("http.response.status_code").as_deref(),
        Some("502")
    );
    assert!(server.failed());
    let client = one(&spans, CLIENT, "POST");
    assert!(client.failed());
}
