//! Active health checks: an endpoint whose `GET /health` fails `unhealthy_after` times in a row
//! takes no calls, `/readyz` says "unhealthy" and its `up` gauge is 0; `healthy_after` good
//! checks bring it back to its share of the calls.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use serde_json::json;
use wiregate::config::{Balance, Dialect, Health};

use crate::support::{jsonrpc_echo, Listening};
use crate::{authority, call, fleet, until, TestGatewayExt, WAIT};

/// Three JSON-RPC upstreams whose `/health` answers the status of its switch (200 at first).
pub async fn checked_three() -> (Vec<Listening>, Vec<Arc<AtomicU16>>) {
    let mut ups = Vec::new();
    let mut switches = Vec::new();
    for _ in 0..3 {
        let s = Arc::new(AtomicU16::new(200));
        ups.push(jsonrpc_echo().health(s.clone()).run().await);
        switches.push(s);
    }
    (ups, switches)
}

/// Checks of `/health` every 50 ms.
pub fn quick_checks(unhealthy_after: u32, healthy_after: u32) -> Health {
    Health {
        path: "/health".into(),
        interval_ms: 50,
        timeout_ms: 500,
        unhealthy_after,
        healthy_after,
    }
}

#[tokio::test]
async fn failed_checks_take_an_endpoint_out_and_good_ones_bring_it_back() {
    const UP: &str = "health-out-and-back";
    let (ups, switches) = checked_three().await;
    let urls: Vec<String> = ups.iter().map(Listening::url).collect();
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.health = quick_checks(3, 2);
    })
    .start()
    .await;
    let sick = authority(&urls[1]);
    let up_gauge = [("upstream", UP), ("endpoint", sick.as_str())];
    until("the first checks", WAIT, || async {
        (ups.iter().all(|u| u.health_checks() >= 1)).then_some(())
    })
    .await;
    assert_eq!(gw.state(UP, &sick).await, "healthy");
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_up", &up_gauge).await,
        1.0
    );

    // Its checks fail: out after 3 of them.
    let checks_before = ups[1].health_checks();
    switches[1].store(503, Ordering::SeqCst);
    until("the endpoint taken out", WAIT, || async {
        (gw.state(UP, &sick).await == "unhealthy").then_some(())
    })
    .await;
    let failed_checks = ups[1].health_checks() - checks_before;
    assert!(
        failed_checks >= 3,
        "out after {failed_checks} failed checks (unhealthy_after = 3)"
    );
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_up", &up_gauge).await,
        0.0
    );
    let (status, body) = gw.readyz().await;
    assert_eq!(status, 200, "two endpoints still take calls: {body}");
    assert_eq!(body["upstreams"][UP], "reachable");

    let seen_before = ups[1].calls();
    let others_before = ups[0].calls() + ups[2].calls();
    for i in 0..21 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(
        ups[1].calls(),
        seen_before,
        "an unhealthy endpoint got calls"
    );
    assert_eq!(ups[0].calls() + ups[2].calls(), others_before + 21);

    // Good again: back after 2 good checks, and takes its turn.
    let checks_before = ups[1].health_checks();
    switches[1].store(200, Ordering::SeqCst);
    until("the endpoint back", WAIT, || async {
        (gw.state(UP, &sick).await == "healthy").then_some(())
    })
    .await;
    let good_checks = ups[1].health_checks() - checks_before;
    assert!(
        good_checks >= 2,
        "back after {good_checks} good checks (healthy_after = 2)"
    );
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_up", &up_gauge).await,
        1.0
    );
    for i in 0..21 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(
        ups[1].calls(),
        seen_before + 7,
        "round robin: a third of the calls"
    );
}

#[tokio::test]
async fn a_check_that_times_out_or_is_refused_counts_as_failed() {
    const UP: &str = "health-refused";
    let (ups, _switches) = checked_three().await;
    // The third endpoint listens nowhere: its checks are refused.
    let dead = crate::support::dead_url().await;
    let urls = vec![ups[0].url(), ups[1].url(), dead.clone()];
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |u| {
        u.health = quick_checks(2, 2);
        // Only the checks may take it out here.
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;
    until("the refusing endpoint taken out", WAIT, || async {
        (gw.state(UP, &authority(&dead)).await == "unhealthy").then_some(())
    })
    .await;
    let dead_at = authority(&dead);
    let labels = [
        ("upstream", UP),
        ("endpoint", dead_at.as_str()),
        ("outcome", "refused"),
    ];
    let before = gw
        .metric("wiregate_upstream_endpoint_requests_total", &labels)
        .await;
    for i in 0..12 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &labels)
            .await,
        before,
        "no call tried the unhealthy endpoint"
    );
    assert_eq!(ups[0].calls() + ups[1].calls(), 12);
}

#[tokio::test]
async fn the_demo_legacy_server_passes_the_checks() {
    const UP: &str = "health-demo";
    let mut urls = Vec::new();
    for _ in 0..2 {
        let (addr, _task) = wiregate::demo::legacy_upstream("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        urls.push(format!("http://{addr}/a2a"));
    }
    // One failed check would take an endpoint out.
    let gw = fleet(UP, &urls, Dialect::Legacy, |u| {
        u.health = quick_checks(1, 1);
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;
    // Ten rounds of checks.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for url in &urls {
        assert_eq!(gw.state(UP, &authority(url)).await, "healthy", "{url}");
    }
    let a = gw.rpc(&call(json!(1), "echo", json!({"x": 1}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json()["result"], json!({"x": 1}), "{}", a.text);
}
