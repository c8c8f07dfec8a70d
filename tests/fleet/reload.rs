//! Reloads that change an upstream's endpoints: one added while calls run fails none and gets
//! calls after; one kept keeps its ejection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use wiregate::config::{Balance, Dialect};

use crate::support::{dead_url, jsonrpc_echo, GatewayBuilder, Listening};
use crate::{authority, call, fleet, until, TestGatewayExt, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_added_by_reload_under_load_fails_no_call_and_gets_calls() {
    const UP: &str = "reload-add";
    let mut ups = Vec::new();
    for _ in 0..3 {
        ups.push(jsonrpc_echo().delay(Duration::from_millis(15)).run().await);
    }
    let urls: Vec<String> = ups.iter().map(Listening::url).collect();
    let config = |urls: &[String]| -> GatewayBuilder {
        fleet(UP, urls, Dialect::Jsonrpc, |u| {
            u.balance = Balance::LeastRequest;
        })
    };
    let gw = config(&urls[..2]).start().await;
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<(u16, Value)>>> = Arc::default();
    let url = format!("{}/rpc", gw.base());
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let (http, url, stop, answers) =
                (gw.http.clone(), url.clone(), stop.clone(), answers.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let r = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(call(json!(format!("{w}-{i}")), "m", json!({})).to_string())
                        .send()
                        .await
                        .expect("the gateway answers");
                    let status = r.status().as_u16();
                    let v: Value = r.json().await.expect("JSON");
                    answers.lock().unwrap().push((status, v));
                }
            })
        })
        .collect();
    until("calls to flow", WAIT, || async {
        (answers.lock().unwrap().len() >= 40).then_some(())
    })
    .await;
    assert_eq!(ups[2].calls(), 0);
    let applied = gw
        .running
        .as_ref()
        .unwrap()
        .reload(&config(&urls).into_config());
    assert!(applied.reloaded, "{applied:?}");
    let at_reload = answers.lock().unwrap().len();
    until("the added endpoint's calls", WAIT, || async {
        (ups[2].calls() >= 20).then_some(())
    })
    .await;
    until("more calls after the reload", WAIT, || async {
        (answers.lock().unwrap().len() >= at_reload + 60).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    let answers = answers.lock().unwrap().clone();
    let failed: Vec<&(u16, Value)> = answers
        .iter()
        .filter(|(s, v)| *s != 200 || v["result"]["via"] != "jsonrpc")
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {failed:?}",
        failed.len(),
        answers.len()
    );
    // The endpoints kept still serve too.
    assert!(ups[0].calls() > 0 && ups[1].calls() > 0);
    let listed = gw.readyz().await.1["endpoints"][UP].clone();
    assert_eq!(listed.as_array().map(Vec::len), Some(3), "{listed}");
}

#[tokio::test]
async fn an_ejected_endpoint_stays_ejected_across_a_reload_that_keeps_it() {
    const UP: &str = "reload-keep-ejected";
    let (a, b) = (jsonrpc_echo().run().await, jsonrpc_echo().run().await);
    let dead = dead_url().await;
    let urls = vec![a.url(), b.url(), dead.clone()];
    let config = |attempts: u32| -> GatewayBuilder {
        fleet(UP, &urls, Dialect::Jsonrpc, move |u| {
            u.balance = Balance::RoundRobin;
            u.outlier.consecutive_failures = 2;
            u.outlier.base_ejection_ms = 30_000;
            u.retry.attempts = attempts;
        })
    };
    let gw = config(2).start().await;
    let dead_at = authority(&dead);
    let mut i = 0;
    until("the refusing endpoint's ejection", WAIT, || {
        i += 1;
        let gw = &gw;
        let dead_at = &dead_at;
        let id = i;
        async move {
            let a = gw.rpc(&call(json!(id), "m", json!({}))).await;
            assert_eq!(a.status, 200, "{}", a.text);
            (gw.state(UP, dead_at).await == "ejected").then_some(())
        }
    })
    .await;
    let refused = [
        ("upstream", UP),
        ("endpoint", dead_at.as_str()),
        ("outcome", "refused"),
    ];
    let tries_before = gw
        .metric("wiregate_upstream_endpoint_requests_total", &refused)
        .await;
    assert_eq!(tries_before, 2.0);

    // A reload that changes the upstream (its retries) and keeps the endpoint.
    reload(&gw, config(3));
    assert_eq!(
        gw.running.as_ref().unwrap().gateway().upstreams()[0]
            .config()
            .retry
            .attempts,
        3,
        "the reload applied"
    );
    assert_eq!(gw.state(UP, &dead_at).await, "ejected", "after the reload");
    for j in 0..12 {
        let a = gw.rpc(&call(json!(j), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(
        gw.metric("wiregate_upstream_endpoint_requests_total", &refused)
            .await,
        tries_before,
        "the ejected endpoint got tries after the reload"
    );
    assert_eq!(
        gw.metric(
            "wiregate_upstream_ejections_total",
            &[("upstream", UP), ("endpoint", &dead_at)]
        )
        .await,
        1.0
    );
    assert_eq!(gw.state(UP, &dead_at).await, "ejected");
}

#[tokio::test]
async fn a_reload_keeps_an_endpoints_health_and_runs_one_checker() {
    const UP: &str = "reload-keep-health";
    let (ups, switches) = crate::health::checked_three().await;
    let urls: Vec<String> = ups.iter().map(Listening::url).collect();
    let config = |attempts: u32| -> GatewayBuilder {
        fleet(UP, &urls, Dialect::Jsonrpc, move |u| {
            u.balance = Balance::RoundRobin;
            u.health = crate::health::quick_checks(2, 2);
            u.retry.attempts = attempts;
        })
    };
    let gw = config(2).start().await;
    let sick = authority(&urls[0]);
    switches[0].store(503, Ordering::SeqCst);
    until("the endpoint taken out", WAIT, || async {
        (gw.state(UP, &sick).await == "unhealthy").then_some(())
    })
    .await;
    reload(&gw, config(3));
    assert_eq!(
        gw.state(UP, &sick).await,
        "unhealthy",
        "right after the reload"
    );
    let before = ups[0].calls();
    for i in 0..9 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(
        ups[0].calls(),
        before,
        "the unhealthy endpoint got calls after the reload"
    );

    // One checker after the reload, not the old one beside the new: 20 checks take about
    // 20 intervals of 50 ms.
    let from = ups[1].health_checks();
    let began = std::time::Instant::now();
    until("20 more checks", WAIT, || async {
        (ups[1].health_checks() >= from + 20).then_some(())
    })
    .await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(800),
        "20 checks in {took:?}: more than one checker runs"
    );

    // The checks go on after the reload: good again, it comes back.
    switches[0].store(200, Ordering::SeqCst);
    until("the endpoint back", WAIT, || async {
        (gw.state(UP, &sick).await == "healthy").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_reload_that_turns_the_checks_off_stops_them_and_brings_the_endpoint_back() {
    const UP: &str = "reload-checks-off";
    let (ups, switches) = crate::health::checked_three().await;
    let urls: Vec<String> = ups.iter().map(Listening::url).collect();
    let config = |checked: bool| -> GatewayBuilder {
        fleet(UP, &urls, Dialect::Jsonrpc, move |u| {
            if checked {
                u.health = crate::health::quick_checks(2, 2);
            }
        })
    };
    let gw = config(true).start().await;
    let sick = authority(&urls[0]);
    switches[0].store(503, Ordering::SeqCst);
    until("the endpoint taken out", WAIT, || async {
        (gw.state(UP, &sick).await == "unhealthy").then_some(())
    })
    .await;
    reload(&gw, config(false));
    assert_eq!(
        gw.state(UP, &sick).await,
        "healthy",
        "right after the reload"
    );
    // The old checker stops: no check reaches any endpoint any more.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let counts: Vec<usize> = ups.iter().map(Listening::health_checks).collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let later: Vec<usize> = ups.iter().map(Listening::health_checks).collect();
    assert_eq!(
        counts, later,
        "checks went on after the reload turned them off"
    );
}

#[tokio::test]
async fn an_endpoint_removed_by_reload_finishes_its_call_and_gets_no_more() {
    const UP: &str = "reload-remove";
    let leaving = jsonrpc_echo().delay(Duration::from_millis(400)).run().await;
    let staying = jsonrpc_echo().run().await;
    let both = vec![leaving.url(), staying.url()];
    let config = |urls: &[String]| -> GatewayBuilder {
        fleet(UP, urls, Dialect::Jsonrpc, |u| {
            u.balance = Balance::RoundRobin
        })
    };
    let gw = config(&both).start().await;
    // Turn 0: in flight on the endpoint about to leave.
    let pending = crate::support::spawn_post(
        &gw.http,
        format!("{}/rpc", gw.base()),
        call(json!("in-flight"), "m", json!({})),
    );
    until("the call in flight", WAIT, || async {
        (leaving.calls() == 1).then_some(())
    })
    .await;
    let applied = gw
        .running
        .as_ref()
        .unwrap()
        .reload(&config(&both[1..]).into_config());
    assert!(applied.reloaded, "{applied:?}");
    for i in 0..10 {
        let a = gw.rpc(&call(json!(i), "m", json!({}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    let v = pending.await.unwrap();
    assert_eq!(v["id"], "in-flight");
    assert_eq!(v["result"]["via"], "jsonrpc", "{v}");
    assert_eq!(leaving.calls(), 1);
    assert_eq!(staying.calls(), 10);
    let listed = gw.readyz().await.1["endpoints"][UP].clone();
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "only the staying endpoint is listed: {listed}"
    );
    assert_eq!(listed[0]["endpoint"], authority(&staying.url()));
}

/// Reloads `gw` with `next`, which must apply.
fn reload(gw: &crate::support::TestGateway, next: crate::support::GatewayBuilder) {
    let applied = gw.running.as_ref().unwrap().reload(&next.into_config());
    assert!(applied.reloaded, "{applied:?}");
}
