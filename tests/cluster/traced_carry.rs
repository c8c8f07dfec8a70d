//! A call carried to its context's owner is one trace across the replicas: the carrying
//! replica's CLIENT span is the owner's SERVER span's parent, and the owner's sid turn hangs
//! from that.

use serde_json::json;

use crate::replicas::{advertised_from, context_on, with_context, WAIT};
use crate::support::otlp::{Collector, Mode};
use crate::support::redis_server::RedisServer;
use crate::support::{gateway, until_true, SseReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_carried_stream_is_one_trace_across_the_replicas() {
    let redis = RedisServer::start().await;
    let collector = Collector::start(Mode::Accept).await;
    let traced = || {
        let endpoint = collector.http();
        gateway().with(move |c| {
            c.tracing.otlp_endpoint = endpoint;
            c.tracing.export_interval_ms = 50;
        })
    };
    let (a, b) = tokio::join!(
        advertised_from(traced(), &redis, "cluster-traced-a", "a"),
        advertised_from(traced(), &redis, "cluster-traced-b", "b"),
    );
    for g in [&a, &b] {
        until_true("the replica sees Redis", WAIT, || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    let (ctx, _) = context_on(&a).await;
    let trace = "9bf92f3577b34da6a3ce929d0e0e4736";
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream",
                      "params": with_context("hello", &ctx)});
    let resp = b
        .http
        .post(format!("{}/rpc", b.base()))
        .header("content-type", "application/json")
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let events = SseReader::new(resp).until_final(WAIT).await;
    assert_eq!(events.last().unwrap().data["params"]["state"], "completed");
    let spans = collector.trace(trace, 4).await;
    let on = |node: &str| {
        spans
            .iter()
            .filter(|s| s.resource_attr("service.instance.id").as_deref() == Some(node))
            .collect::<Vec<_>>()
    };
    let (on_a, on_b) = (on("a"), on("b"));
    let b_server = on_b
        .iter()
        .find(|s| s.kind() == 2)
        .expect("b's SERVER span");
    assert_eq!(b_server.parent(), "00f067aa0ba902b7");
    let carry = on_b.iter().find(|s| s.kind() == 3).expect("b's carry span");
    assert_eq!(carry.parent(), b_server.id());
    assert_eq!(carry.attr("wiregate.cluster.owner").as_deref(), Some("a"));
    let a_server = on_a
        .iter()
        .find(|s| s.kind() == 2)
        .expect("a's SERVER span");
    assert_eq!(
        a_server.parent(),
        carry.id(),
        "the owner continues the carry's span"
    );
    let turn = on_a
        .iter()
        .find(|s| s.span.name == "sid turn")
        .expect("a's turn span");
    assert_eq!(turn.parent(), a_server.id());
    assert_eq!(turn.attr("wiregate.context_id"), Some(ctx));
}
