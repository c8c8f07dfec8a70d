//! When a failed try is sent again: a timed-out try only for a method in `retry.methods`, and
//! never beyond the retry budget (a share of the upstream's calls, at least 10 a window).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{black_hole, jsonrpc_echo, upstream};
use crate::{authority, call, fleet, TestGatewayExt};

#[tokio::test]
async fn a_timed_out_try_is_retried_only_for_a_listed_method() {
    const UP: &str = "retries-timeout";
    let hole = black_hole().await;
    let live = jsonrpc_echo().run().await;
    let gw = fleet(UP, &[hole.clone(), live.url()], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.timeout_ms = 300;
        u.retry.methods = vec!["get.*".into()];
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;
    // Turn 0: the black hole, then the live one.
    let started = Instant::now();
    let a = gw.rpc(&call(json!("t-1"), "get.thing", json!({}))).await;
    let took = started.elapsed();
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json()["id"], "t-1");
    assert_eq!(a.json()["result"]["method"], "get.thing", "{}", a.text);
    assert!(
        took >= Duration::from_millis(290),
        "the first try waited its timeout: {took:?}"
    );
    assert_eq!(
        gw.metric(
            "wiregate_upstream_retries_total",
            &[("upstream", UP), ("reason", "failed")]
        )
        .await,
        1.0
    );
    let timeouts = [
        ("upstream", UP),
        ("endpoint", &authority(&hole)),
        ("outcome", "timeout"),
    ];
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &timeouts)
            .await,
        1.0
    );
    // Turn 2: the black hole again; not a listed method, so its timeout is the answer.
    let a = gw.rpc(&call(json!("t-2"), "set.thing", json!({}))).await;
    let v = a.json();
    assert_eq!(a.status, 504, "{}", a.text);
    assert_eq!(v["id"], "t-2");
    assert_eq!(v["error"]["code"], -32051, "{v}");
    assert_eq!(v["error"]["data"]["kind"], "upstream_timeout", "{v}");
    assert!(
        live.seen().iter().all(|s| s.body["method"] != "set.thing"),
        "a method not safe to repeat was sent twice"
    );
}

#[tokio::test]
async fn retries_stop_at_the_budget_floor_of_ten_a_window() {
    const UP: &str = "retries-budget";
    let busy = upstream(|req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
                          "error": {"code": -32000, "message": "busy endpoint"}});
        (StatusCode::SERVICE_UNAVAILABLE, body.to_string())
    })
    .run()
    .await;
    let good = jsonrpc_echo().run().await;
    let gw = fleet(UP, &[busy.url(), good.url()], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.retry.methods = vec!["*".into()];
        u.retry.budget_percent = 20;
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;
    // 30 calls in a window: 20 % is 6, so the floor of 10 retries applies.
    let mut busy_answers = 0;
    for i in 0..30 {
        let v = gw.rpc(&call(json!(i), "m", json!({}))).await.json();
        assert_eq!(v["id"], i, "{v}");
        if v["error"]["message"] == "busy endpoint" {
            busy_answers += 1;
        } else {
            assert_eq!(v["result"]["via"], "jsonrpc", "{v}");
        }
    }
    assert_eq!(
        gw.metric(
            "wiregate_upstream_retries_total",
            &[("upstream", UP), ("reason", "status")]
        )
        .await,
        10.0
    );
    // The first 10 calls were retried; of the 20 after, every other one met the busy endpoint.
    assert_eq!(busy_answers, 10);
    assert_eq!(good.calls(), 20);
}
