//! Panic mode: with every endpoint out, calls still go to one of them (the least recently
//! failed), `/readyz` answers 503 naming the upstream "unreachable", and a call that fails then
//! says every endpoint is out.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use serde_json::json;
use wiregate::config::Dialect;

use crate::health::{checked_three, quick_checks};
use crate::support::{dead_url, Listening};
use crate::{authority, call, fleet, names_no_endpoint, until, TestGatewayExt, WAIT};

#[tokio::test]
async fn with_every_endpoint_unhealthy_calls_still_reach_one_and_readyz_is_503() {
    const UP: &str = "panic-all-out";
    let (ups, switches) = checked_three().await;
    let urls: Vec<String> = ups.iter().map(Listening::url).collect();
    let gw = fleet(UP, &urls, Dialect::Jsonrpc, |u| {
        u.health = quick_checks(2, 2);
    })
    .start()
    .await;
    for s in &switches {
        s.store(503, Ordering::SeqCst);
    }
    for u in &urls {
        until("every endpoint taken out", WAIT, || async {
            (gw.state(UP, &authority(u)).await == "unhealthy").then_some(())
        })
        .await;
    }
    let (status, body) = gw.readyz().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false, "{body}");
    assert_eq!(body["upstreams"][UP], "unreachable", "{body}");

    let before: Vec<usize> = ups.iter().map(Listening::calls).collect();
    for i in 0..10 {
        let a = gw.rpc(&call(json!(i), "m", json!({"n": i}))).await;
        assert_eq!(a.status, 200, "call {i} in panic mode: {}", a.text);
        assert_eq!(a.json()["result"]["params"]["n"], i, "{}", a.text);
    }
    let got: Vec<usize> = ups
        .iter()
        .zip(&before)
        .map(|(u, b)| u.calls() - b)
        .collect();
    assert_eq!(got.iter().sum::<usize>(), 10, "{got:?}");
    let reached: HashSet<usize> = (0..3).filter(|i| got[*i] > 0).collect();
    assert_eq!(
        reached.len(),
        1,
        "calls in panic mode went to one endpoint: {got:?}"
    );
}

#[tokio::test]
async fn a_failure_in_panic_mode_says_every_endpoint_is_out() {
    const UP: &str = "panic-failure";
    let urls = vec![dead_url().await, dead_url().await];
    let gw = every_endpoint_unhealthy(UP, &urls).await;
    let a = gw.rpc(&call(json!(5), "m", json!({}))).await;
    assert_eq!(a.status, 502, "{}", a.text);
    let v = a.json();
    assert_eq!(v["error"]["code"], -32050, "{v}");
    assert_eq!(v["error"]["data"]["kind"], "upstream_unreachable", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("every endpoint is out"), "{message}");
    names_no_endpoint(&a.text, &urls);
}

#[tokio::test]
async fn panic_mode_sends_to_the_least_recently_failed_endpoint() {
    const UP: &str = "panic-least-failed";
    let status = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(503));
    let alive = crate::support::jsonrpc_echo()
        .health(status.clone())
        .run()
        .await;
    let dead = dead_url().await;
    // Both out by their checks: the dead one's are refused, the live one's answer 503.
    let urls = vec![dead.clone(), alive.url()];
    let gw = every_endpoint_unhealthy(UP, &urls).await;
    let refused = [
        ("upstream", UP),
        ("endpoint", &authority(&dead)),
        ("outcome", "refused"),
    ];
    // Neither has failed a call yet: the first is tried, refuses, and the call goes on to the
    // other (nothing was sent).
    for i in 0..8 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "call {i}: {}", a.text);
    }
    assert_eq!(alive.calls(), 8);
    // From then on the dead one is the more recently failed: no call tries it again.
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &refused)
            .await,
        1.0
    );
}

/// A gateway whose upstream `up` has `urls`, checked every few milliseconds and never ejected,
/// once every endpoint is out by its checks.
async fn every_endpoint_unhealthy(up: &str, urls: &[String]) -> crate::support::TestGateway {
    let gw = fleet(up, urls, Dialect::Jsonrpc, |u| {
        u.health = quick_checks(1, 1);
        u.outlier.consecutive_failures = 0;
    })
    .start()
    .await;
    for u in urls {
        until("every endpoint taken out", WAIT, || async {
            (gw.state(up, &authority(u)).await == "unhealthy").then_some(())
        })
        .await;
    }
    gw
}
