//! A call retried on another endpoint keeps its id: the first endpoint answers 503 to a method
//! in `retry.methods`, the second answers, and the client gets the second's answer under its
//! own id (a JSON-RPC string or number, a legacy `request_id`). A method not in the list is not
//! sent twice.

use axum::http::StatusCode;
use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{jsonrpc_echo, legacy_echo, upstream, Listening};
use crate::{call, fleet, TestGatewayExt};

/// A JSON-RPC endpoint that answers every call 503 (with a JSON-RPC error body).
async fn busy_jsonrpc() -> Listening {
    upstream(|req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
                          "error": {"code": -32000, "message": "busy endpoint"}});
        (StatusCode::SERVICE_UNAVAILABLE, body.to_string())
    })
    .run()
    .await
}

/// A legacy endpoint that answers every call 503 (with a legacy error body).
async fn busy_legacy() -> Listening {
    upstream(|req| {
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"], "status": "error",
                          "error": {"code": "UPSTREAM_UNAVAILABLE", "message": "busy endpoint"}});
        (StatusCode::SERVICE_UNAVAILABLE, body.to_string())
    })
    .run()
    .await
}

#[tokio::test]
async fn a_retried_call_keeps_its_id_to_a_jsonrpc_upstream() {
    const UP: &str = "retry-ids-jsonrpc";
    let busy = busy_jsonrpc().await;
    let good = jsonrpc_echo().run().await;
    // Round robin over two: each call's first try is the busy one, its retry the good one.
    let gw = fleet(UP, &[busy.url(), good.url()], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.retry.methods = vec!["get*".into()];
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;

    for id in [json!("str-id-1"), json!(42)] {
        let a = gw.rpc(&call(id.clone(), "getThing", json!({"k": 1}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let v = a.json();
        assert_eq!(v["id"], id, "{v}");
        assert_eq!(
            v["result"]["via"], "jsonrpc",
            "the second endpoint's answer: {v}"
        );
        assert_eq!(v["result"]["method"], "getThing", "{v}");
    }
    let rid = "legacy-rid-7";
    let a = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": rid, "operation": "getThing",
                     "params": {"k": 2}, "auth": null}),
        )
        .await;
    let v = a.json();
    assert_eq!(v["status"], "success", "{v}");
    assert_eq!(v["request_id"], rid, "{v}");
    assert_eq!(v["data"]["via"], "jsonrpc", "{v}");

    // Each call went to both, with the same id upstream both times.
    let (b, g) = (busy.seen(), good.seen());
    assert_eq!((b.len(), g.len()), (3, 3));
    for (x, y) in b.iter().zip(&g) {
        assert_eq!(x.body["id"], y.body["id"], "{} / {}", x.body, y.body);
        assert_eq!(x.body["params"], y.body["params"]);
    }
    assert_eq!(
        gw.metric(
            "wiregate_upstream_retries_total",
            &[("upstream", UP), ("reason", "status")]
        )
        .await,
        3.0
    );

    // Not in `retry.methods`: the 503 answer stands, and the good endpoint never sees it.
    let a = gw.rpc(&call(json!(9), "setThing", json!({}))).await;
    let v = a.json();
    assert_eq!(v["id"], 9, "{v}");
    assert!(v.get("result").is_none(), "{v}");
    assert!(
        good.seen().iter().all(|s| s.body["method"] != "setThing"),
        "a method not safe to repeat was sent twice"
    );
    assert_eq!(busy.calls(), 4);
}

#[tokio::test]
async fn a_retried_call_keeps_its_request_id_to_a_legacy_upstream() {
    const UP: &str = "retry-ids-legacy";
    let busy = busy_legacy().await;
    let good = legacy_echo().run().await;
    let gw = fleet(UP, &[busy.url(), good.url()], Dialect::Legacy, |u| {
        u.balance = Balance::RoundRobin;
        u.retry.methods = vec!["plan.get".into()];
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;

    let rid = "lg-req-11";
    let a = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": rid, "operation": "plan.get",
                     "params": {"plan_id": "P1"}, "auth": null}),
        )
        .await;
    let v = a.json();
    assert_eq!(v["status"], "success", "{v}");
    assert_eq!(v["request_id"], rid, "{v}");
    assert_eq!(v["data"]["via"], "legacy", "{v}");
    for id in [json!("js-9"), json!(77)] {
        let v = gw
            .rpc(&call(id.clone(), "plan.get", json!({"plan_id": "P1"})))
            .await
            .json();
        assert_eq!(v["id"], id, "{v}");
        assert_eq!(v["result"]["op"], "plan.get", "{v}");
    }
    let (b, g) = (busy.seen(), good.seen());
    assert_eq!((b.len(), g.len()), (3, 3));
    for (x, y) in b.iter().zip(&g) {
        assert_eq!(x.body["request_id"], y.body["request_id"]);
    }
    assert_eq!(
        b[0].body["request_id"], rid,
        "the legacy client's id goes upstream"
    );
}
