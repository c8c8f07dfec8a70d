//! Outlier ejection from real calls: HTTP 5xx answers count as failures, never more than
//! `max_ejected_percent` of the endpoints are out at once (none of a single endpoint), the n-th
//! ejection lasts n × `base_ejection_ms`, and the `up` gauge follows the endpoint back.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{dead_url, jsonrpc_echo, upstream, TestGateway};
use crate::{authority, call, fleet, until, TestGatewayExt, WAIT};

#[tokio::test]
async fn an_endpoint_answering_5xx_is_ejected_and_the_others_serve() {
    const UP: &str = "outlier-5xx";
    let broken = upstream(|req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
                          "error": {"code": -32603, "message": "broken endpoint"}});
        (StatusCode::INTERNAL_SERVER_ERROR, body.to_string())
    })
    .run()
    .await;
    let (a, b) = (jsonrpc_echo().run().await, jsonrpc_echo().run().await);
    let gw = fleet(
        UP,
        &[broken.url(), a.url(), b.url()],
        Dialect::Jsonrpc,
        |u| {
            u.balance = Balance::RoundRobin;
            u.outlier.consecutive_failures = 3;
            u.outlier.base_ejection_ms = 30_000;
        },
    )
    .start()
    .await;
    let broken_at = authority(&broken.url());
    let mut i = 0;
    until("the 5xx endpoint's ejection", WAIT, || {
        i += 1;
        let (gw, broken_at, id) = (&gw, &broken_at, i);
        async move {
            gw.rpc(&call(json!(id), "m", json!({}))).await;
            (gw.state(UP, broken_at).await == "ejected").then_some(())
        }
    })
    .await;
    assert_eq!(broken.calls(), 3, "ejected after 3 answers of 500");
    let five = [
        ("upstream", UP),
        ("endpoint", broken_at.as_str()),
        ("outcome", "5xx"),
    ];
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &five)
            .await,
        3.0
    );
    for j in 0..12 {
        let a = gw.rpc(&call(json!(j), "m", json!({}))).await;
        assert_eq!(a.json()["result"]["via"], "jsonrpc", "{}", a.text);
    }
    assert_eq!(broken.calls(), 3, "an ejected endpoint got calls");
}

#[tokio::test]
async fn no_more_than_max_ejected_percent_of_the_endpoints_are_ejected() {
    const UP: &str = "outlier-percent";
    let live = jsonrpc_echo().run().await;
    let dead = [dead_url().await, dead_url().await];
    let urls = vec![dead[0].clone(), dead[1].clone(), live.url()];
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.outlier.consecutive_failures = 2;
        u.outlier.base_ejection_ms = 30_000;
        u.outlier.max_ejected_percent = 50;
        u.retry.attempts = 3;
    })
    .start()
    .await;
    // Some calls may fail here (a refusing endpoint that may not be ejected spends the retry
    // budget); what counts is which endpoints are out.
    for i in 0..30 {
        gw.rpc(&call(json!(i), "m", json!({}))).await;
    }
    let ejections = gw
        .metric("wiregate_upstream_ejections_total", &[("upstream", UP)])
        .await;
    assert_eq!(ejections, 1.0, "3 endpoints at 50 %: one may be out");
    let mut states = Vec::new();
    let mut refused = Vec::new();
    for d in &dead {
        let at = authority(d);
        states.push(gw.state(UP, &at).await);
        let labels = [
            ("upstream", UP),
            ("endpoint", at.as_str()),
            ("outcome", "refused"),
        ];
        refused.push(
            gw.metric("wiregate_upstream_endpoint_requests_total", &labels)
                .await,
        );
    }
    let (out, kept) = match states[0].as_str() {
        "ejected" => (0, 1),
        _ => (1, 0),
    };
    assert_eq!(states[out], "ejected", "{states:?}");
    assert_eq!(states[kept], "unreachable", "{states:?}");
    // The other kept failing and was tried on: kept in by the cap, not for want of tries.
    assert!(
        refused[kept] >= 4.0,
        "the endpoint over the cap refused only {} tries: {refused:?}",
        refused[kept]
    );
}

#[tokio::test]
async fn the_only_endpoint_of_an_upstream_is_never_ejected() {
    const UP: &str = "outlier-single";
    let dead = dead_url().await;
    let gw = fleet(UP, std::slice::from_ref(&dead), Dialect::Jsonrpc, |u| {
        u.outlier.consecutive_failures = 1;
        u.outlier.max_ejected_percent = 50;
    })
    .start()
    .await;
    for i in 0..5 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 502, "{}", a.text);
    }
    assert_eq!(
        gw.metric("wiregate_upstream_ejections_total", &[("upstream", UP)])
            .await,
        0.0
    );
    assert_eq!(gw.state(UP, &authority(&dead)).await, "unreachable");
}

/// A gateway in front of upstream `up`: two live endpoints and, last, a dead one (round robin),
/// ejected after two failed calls for n × `base_ejection_ms`; and the dead one's `host:port`.
async fn two_live_one_dead(up: &str, base_ejection_ms: u64) -> (TestGateway, String) {
    let (a, b) = (jsonrpc_echo().run().await, jsonrpc_echo().run().await);
    let dead = dead_url().await;
    let dead_at = authority(&dead);
    let gw = fleet(up, &[a.url(), b.url(), dead], Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
        u.outlier.consecutive_failures = 2;
        u.outlier.base_ejection_ms = base_ejection_ms;
    })
    .start()
    .await;
    (gw, dead_at)
}

/// Calls until `endpoint` is ejected; the instant the last call returned.
async fn eject(gw: &TestGateway, up: &str, endpoint: &str) -> Instant {
    let mut i = 0;
    until("an ejection", WAIT, || {
        i += 1;
        let id = i;
        async move {
            gw.rpc(&call(json!(id), "m", json!({}))).await;
            let at = Instant::now();
            (gw.state(up, endpoint).await == "ejected").then_some(at)
        }
    })
    .await
}

#[tokio::test]
async fn the_nth_ejection_lasts_n_times_the_base() {
    const UP: &str = "outlier-duration";
    const BASE: u64 = 300;
    let (gw, dead_at) = two_live_one_dead(UP, BASE).await;
    let mut lasted = Vec::new();
    for n in 1..=2u64 {
        let began = eject(&gw, UP, &dead_at).await;
        let ended = until("the ejection's end", WAIT, || async {
            (gw.state(UP, &dead_at).await != "ejected").then_some(Instant::now())
        })
        .await;
        let took = ended - began;
        assert!(
            took >= Duration::from_millis(n * BASE - 20),
            "ejection {n} lasted {took:?}, not {n} x {BASE} ms"
        );
        lasted.push(took);
        // Back: takes calls again (and, refusing, is ejected anew).
        assert_eq!(
            gw.metric(
                "wiregate_upstream_ejections_total",
                &[("upstream", UP), ("endpoint", &dead_at)]
            )
            .await,
            n as f64
        );
    }
    assert!(
        lasted[1] > lasted[0] + Duration::from_millis(BASE / 2),
        "the second ejection is longer: {lasted:?}"
    );
}

#[tokio::test]
async fn the_up_gauge_returns_to_1_when_an_ejection_ends() {
    const UP: &str = "outlier-gauge";
    let (gw, dead_at) = two_live_one_dead(UP, 200).await;
    eject(&gw, UP, &dead_at).await;
    let gauge = [("upstream", UP), ("endpoint", dead_at.as_str())];
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_up", &gauge).await,
        0.0
    );
    // No call and no `/readyz` meanwhile: only the scrape looks.
    let began = Instant::now();
    let back = until(
        "the gauge back at 1 after a 200 ms ejection",
        WAIT,
        || async {
            (gw.metric("wiregate_upstream_endpoint_up", &gauge).await == 1.0).then_some(())
        },
    );
    // Bounded well below WAIT: the gauge should follow within a few scrapes.
    let bounded = tokio::time::timeout(Duration::from_secs(2), back).await;
    let waited = began.elapsed();
    // What brings it back otherwise: a look at the endpoint's state (`/readyz`, a call).
    let state = gw.state(UP, &dead_at).await;
    let after_look = gw.metric("wiregate_upstream_endpoint_up", &gauge).await;
    assert!(
        bounded.is_ok(),
        "wiregate_upstream_endpoint_up still 0 {waited:?} after an ejection of 200 ms ended; \
         /readyz then said {state:?} and the gauge became {after_look}"
    );
}
