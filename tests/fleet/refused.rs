//! An endpoint that refuses connections: its tries fail before anything is sent, so they are
//! retried on another endpoint whatever the method, and it is ejected after
//! `consecutive_failures` of them. When no endpoint can be reached, the error never names one.

use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{dead_url, jsonrpc_echo, legacy_echo, Listening};
use crate::{authority, call, fleet, names_no_endpoint, TestGatewayExt};

#[tokio::test]
async fn a_refusing_endpoint_among_two_live_ones_costs_no_call_and_is_ejected() {
    const UP: &str = "refused-among-live";
    let (a, b) = (jsonrpc_echo().run().await, jsonrpc_echo().run().await);
    let dead = dead_url().await;
    let urls = vec![a.url(), dead.clone(), b.url()];
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.outlier.consecutive_failures = 3;
        u.outlier.base_ejection_ms = 30_000;
        // No method is safe to send twice: only a try never sent may be retried.
        u.retry.methods = Vec::new();
    })
    .start()
    .await;
    let dead_at = authority(&dead);
    for i in 0..30 {
        let a = gw
            .rpc(&call(json!(i), "write.thing", json!({"n": i})))
            .await;
        assert_eq!(a.status, 200, "call {i}: {}", a.text);
        assert_eq!(a.json()["id"], i, "{}", a.text);
        assert_eq!(a.json()["result"]["via"], "jsonrpc", "call {i}: {}", a.text);
    }
    // Each call reached a live endpoint exactly once.
    assert_eq!(a.calls() + b.calls(), 30);
    let mut ns: Vec<u64> = [&a, &b]
        .iter()
        .flat_map(|u: &&Listening| u.seen())
        .map(|s| s.body["params"]["n"].as_u64().unwrap())
        .collect();
    ns.sort();
    assert_eq!(ns, (0..30).collect::<Vec<_>>());

    let labels = |reason| [("upstream", UP), ("reason", reason)];
    assert_eq!(
        gw.metric("wiregate_upstream_retries_total", &labels("not_sent"))
            .await,
        3.0,
        "one retry per refused try, until the ejection"
    );
    assert_eq!(
        gw.metric("wiregate_upstream_retries_total", &labels("failed"))
            .await,
        0.0
    );
    let on_dead = [("upstream", UP), ("endpoint", dead_at.as_str())];
    assert_eq!(
        gw.metric("wiregate_upstream_ejections_total", &on_dead)
            .await,
        1.0
    );
    let refused = [
        ("upstream", UP),
        ("endpoint", dead_at.as_str()),
        ("outcome", "refused"),
    ];
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &refused)
            .await,
        3.0,
        "no try reaches it once ejected"
    );
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_up", &on_dead).await,
        0.0
    );
    assert_eq!(gw.state(UP, &dead_at).await, "ejected");
    for live in [&a, &b] {
        assert_eq!(gw.state(UP, &authority(&live.url())).await, "healthy");
    }
    let (status, body) = gw.readyz().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["upstreams"][UP], "reachable", "{body}");
}

#[tokio::test]
async fn an_unreachable_upstream_fails_with_32050_and_names_no_endpoint() {
    const UP: &str = "refused-all";
    let urls = vec![dead_url().await, dead_url().await];
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |_| {}).start().await;
    let a = gw.rpc(&call(json!("u-1"), "m", json!({}))).await;
    assert_eq!(a.status, 502, "{}", a.text);
    let v = a.json();
    assert_eq!(v["id"], "u-1");
    assert_eq!(v["error"]["code"], -32050, "{v}");
    assert_eq!(v["error"]["data"]["kind"], "upstream_unreachable", "{v}");
    assert_eq!(v["error"]["data"]["upstream"], UP, "{v}");
    names_no_endpoint(&a.text, &urls);
    // Both endpoints were tried: the first refused, the retry refused too.
    assert_eq!(
        gw.metric(
            "wiregate_upstream_retries_total",
            &[("upstream", UP), ("reason", "not_sent")]
        )
        .await,
        1.0
    );
    for u in &urls {
        let refused = [
            ("upstream", UP),
            ("endpoint", &authority(u)),
            ("outcome", "refused"),
        ];
        assert_eq!(
            gw.metric("wiregate_upstream_endpoint_requests_total", &refused)
                .await,
            1.0,
            "{u}"
        );
    }

    // A legacy client is told UPSTREAM_UNAVAILABLE, again without an address.
    let a = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": "lg-1", "operation": "m",
                     "params": {}, "auth": null}),
        )
        .await;
    let v = a.json();
    assert_eq!(v["request_id"], "lg-1", "{v}");
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["error"]["code"], "UPSTREAM_UNAVAILABLE", "{v}");
    names_no_endpoint(&a.text, &urls);
    let (status, body) = gw.readyz().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["upstreams"][UP], "unreachable", "{body}");
}

#[tokio::test]
async fn a_legacy_upstream_with_a_refusing_endpoint_answers_every_legacy_client() {
    const UP: &str = "refused-legacy";
    let live = legacy_echo().run().await;
    let dead = dead_url().await;
    let gw = fleet(UP, &[dead.clone(), live.url()], Dialect::Legacy, |u| {
        u.balance = Balance::RoundRobin;
    })
    .start()
    .await;
    for i in 0..4 {
        let rid = format!("lr-{i}");
        let a = gw
            .rpc(
                &json!({"a2a_version": "1.0", "request_id": rid, "operation": "plan.get",
                         "params": {"n": i}, "auth": null}),
            )
            .await;
        let v = a.json();
        assert_eq!(v["status"], "success", "{v}");
        assert_eq!(v["request_id"], rid, "{v}");
    }
    assert_eq!(live.calls(), 4);
}

#[tokio::test]
async fn a_refusing_endpoint_costs_no_call_on_pipelined_connections_either() {
    const UP: &str = "refused-pipelined";
    let live = jsonrpc_echo().run().await;
    let dead = dead_url().await;
    let gw = fleet(UP, &[dead.clone(), live.url()], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.pipeline = 4;
        u.retry.methods = Vec::new();
        u.outlier.consecutive_failures = 3;
        u.outlier.base_ejection_ms = 30_000;
    })
    .start()
    .await;
    for i in 0..10 {
        let a = gw.rpc(&call(json!(i), "write.thing", json!({}))).await;
        assert_eq!(a.status, 200, "call {i}: {}", a.text);
        assert_eq!(a.json()["result"]["via"], "jsonrpc", "{}", a.text);
    }
    assert_eq!(live.calls(), 10);
    assert_eq!(
        gw.metric(
            "wiregate_upstream_retries_total",
            &[("upstream", UP), ("reason", "not_sent")]
        )
        .await,
        3.0
    );
    assert_eq!(gw.state(UP, &authority(&dead)).await, "ejected");
}
