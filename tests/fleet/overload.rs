//! `max_concurrent`: with the limit's calls in flight, one more fails at once (HTTP 503,
//! -32050 naming the key) while those in flight are answered; the overflow is counted.

use std::time::{Duration, Instant};

use serde_json::json;
use wiregate::config::{Dialect, Upstream};

use crate::support::{jsonrpc_echo, spawn_post};
use crate::{call, fleet_upstream, until, TestGatewayExt, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_refuses_the_call_beyond_it_at_once_with_503() {
    const UP: &str = "overload-two";
    let slow = jsonrpc_echo().delay(Duration::from_secs(1)).run().await;
    let other = jsonrpc_echo().run().await;
    // The limited upstream is the second entry: its key is `upstreams[1].max_concurrent`.
    let gw = crate::support::gateway()
        .with(|c| {
            c.upstreams.push(Upstream::new(
                "overload-other",
                &other.url(),
                Dialect::Jsonrpc,
                2000,
            ));
            c.upstreams.push(fleet_upstream(
                UP,
                &[slow.url(), slow.url().replace("127.0.0.1", "localhost")],
                Dialect::Jsonrpc,
                |u| u.max_concurrent = 2,
            ));
        })
        .route(&["other.*"], "overload-other")
        .route(&["*"], UP)
        .start()
        .await;
    let url = format!("{}/rpc", gw.base());
    let first = spawn_post(&gw.http, url.clone(), call(json!(1), "m", json!({"n": 1})));
    let second = spawn_post(&gw.http, url.clone(), call(json!(2), "m", json!({"n": 2})));
    until("two calls in flight at the upstream", WAIT, || async {
        (slow.calls() == 2).then_some(())
    })
    .await;

    let started = Instant::now();
    let third = gw.rpc(&call(json!("third"), "m", json!({"n": 3}))).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(300),
        "refused in {took:?}, not at once"
    );
    assert_eq!(third.status, 503, "{}", third.text);
    let v = third.json();
    assert_eq!(v["id"], "third");
    assert_eq!(v["error"]["code"], -32050, "{v}");
    assert_eq!(v["error"]["data"]["kind"], "upstream_overloaded", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("upstreams[1].max_concurrent"), "{message}");

    // A legacy client is refused the same way, in its own terms.
    let started = Instant::now();
    let legacy = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": "over-1", "operation": "m",
                     "params": {}, "auth": null}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_millis(300));
    let l = legacy.json();
    assert_eq!(l["status"], "error", "{l}");
    assert_eq!(l["request_id"], "over-1", "{l}");
    assert_eq!(l["error"]["code"], "UPSTREAM_UNAVAILABLE", "{l}");

    // Another upstream is not limited by this one's calls.
    let a = gw.call("other.thing", json!({})).await;
    assert_eq!(a["result"]["via"], "jsonrpc", "{a}");

    assert_eq!(
        slow.calls(),
        2,
        "the refused calls never reached the upstream"
    );
    for (h, n) in [(first, 1), (second, 2)] {
        let v = h.await.unwrap();
        assert_eq!(v["id"], n, "{v}");
        assert_eq!(
            v["result"]["params"]["n"], n,
            "the calls in flight are answered: {v}"
        );
    }
    assert_eq!(
        gw.metric("wiregate_upstream_overflow_total", &[("upstream", UP)])
            .await,
        2.0
    );
    assert_eq!(
        gw.metric(
            "wiregate_upstream_overflow_total",
            &[("upstream", "overload-other")]
        )
        .await,
        0.0
    );
    // The slots are given back: a call goes through again.
    let a = gw.call("m", json!({"n": 4})).await;
    assert_eq!(a["result"]["params"]["n"], 4, "{a}");
}
