//! The pass-through over a fleet: `balance = "hash"` keeps a caller on one endpoint by the
//! header `hash_key` names, on the HTTP/1 loop's path and on hyper's (the access log on), and
//! `max_concurrent` bounds its exchanges as it bounds calls.

use std::time::{Duration, Instant};

use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{jsonrpc_echo, Listening};
use crate::{fleet_upstream, until, WAIT};

/// A gateway passing `/files` through to upstream `name` over `ups`, hashing on `x-tenant`.
async fn hashed(name: &str, ups: &[Listening], access: bool) -> crate::TestGateway {
    let urls: Vec<String> = ups.iter().map(|u| u.url()).collect();
    crate::support::gateway()
        .with(|c| {
            c.upstreams
                .push(fleet_upstream(name, &urls, Dialect::Jsonrpc, |u| {
                    u.balance = Balance::Hash;
                    u.hash_key = "header:x-tenant".into();
                }));
            c.log.access = access;
        })
        .passthrough(&[("/files", name)])
        .start()
        .await
}

async fn send(gw: &crate::TestGateway, tenant: &str) {
    let answer = gw
        .http
        .post(format!("{}/files/report", gw.base()))
        .header("x-tenant", tenant)
        .header("content-type", "application/json")
        .body(json!({"n": 1}).to_string())
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_through_caller_stays_on_one_endpoint_by_its_header() {
    for (name, access) in [("pass-hash-loop", false), ("pass-hash-hyper", true)] {
        let ups = [
            jsonrpc_echo().run().await,
            jsonrpc_echo().run().await,
            jsonrpc_echo().run().await,
        ];
        let gw = hashed(name, &ups, access).await;
        // Twelve tenants: all on one of three endpoints by chance once in 177 000 runs.
        for t in 0..12 {
            let tenant = format!("tenant-{t}");
            let tenant = tenant.as_str();
            let before: Vec<usize> = ups.iter().map(|u| u.calls()).collect();
            for _ in 0..6 {
                send(&gw, tenant).await;
            }
            let took: Vec<usize> = ups
                .iter()
                .zip(&before)
                .map(|(u, b)| u.calls() - b)
                .collect();
            assert_eq!(
                took.iter().filter(|n| **n > 0).count(),
                1,
                "{name}: tenant {tenant}'s requests spread as {took:?}"
            );
        }
        let spread = ups.iter().filter(|u| u.calls() > 0).count();
        assert!(spread >= 2, "{name}: twelve tenants all on one endpoint");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_bounds_the_pass_through_with_a_short_503() {
    const UP: &str = "pass-overload";
    let slow = jsonrpc_echo().delay(Duration::from_secs(1)).run().await;
    let gw = crate::support::gateway()
        .with(|c| {
            c.upstreams
                .push(fleet_upstream(UP, &[slow.url()], Dialect::Jsonrpc, |u| {
                    u.max_concurrent = 1
                }))
        })
        .passthrough(&[("/files", UP)])
        .start()
        .await;
    let url = format!("{}/files/a", gw.base());
    let first = {
        let (http, url) = (gw.http.clone(), url.clone());
        tokio::spawn(async move { http.post(url).body("{}").send().await.unwrap().status() })
    };
    until("one exchange in flight at the upstream", WAIT, || async {
        (slow.calls() == 1).then_some(())
    })
    .await;
    let started = Instant::now();
    let second = gw.http.post(&url).body("{}").send().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "refused at once"
    );
    assert_eq!(second.status(), 503);
    let text = second.text().await.unwrap();
    assert!(text.contains("max_concurrent"), "{text}");
    let first = first.await.unwrap();
    assert!(
        first.is_success(),
        "the exchange in flight is answered: {first}"
    );
    let third = gw.http.post(&url).body("{}").send().await.unwrap();
    assert!(third.status().is_success(), "a slot is free again");
}
