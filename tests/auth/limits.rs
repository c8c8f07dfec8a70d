//! `[[rate_limits]]`, local: a caller past its burst is answered 429 with `Retry-After` and
//! the RateLimit headers (-32072, `data.retryAfterMs`; legacy `RATE_LIMITED`), another caller
//! keeps its own bucket, and the bucket refills on time.

use std::time::Duration;

use serde_json::json;
use wiregate::config::{Dialect, RateLimit};

use crate::call;
use crate::support::{self, jsonrpc_echo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_burst_gets_429_with_headers_and_the_bucket_refills() {
    let up = jsonrpc_echo().run().await;
    let gw = support::routing_all_to(&up.url(), Dialect::Jsonrpc)
        .with(|c| {
            c.rate_limits = vec![RateLimit {
                name: "per-tenant".into(),
                matches: vec!["plans.*".into()],
                key: "header:x-tenant".into(),
                rate_per_s: 2.0,
                burst: 3,
                shared: false,
            }]
        })
        .start()
        .await;
    let as_tenant = |t: &'static str, id: i64| {
        let gw = &gw;
        async move {
            gw.rpc_with(&call(json!(id), "plans.get"), &[("x-tenant", t)])
                .await
        }
    };
    for i in 0..3 {
        assert_eq!(as_tenant("acme", i).await.status, 200, "within the burst");
    }
    let limited = as_tenant("acme", 9).await;
    assert_eq!(limited.status, 429, "{}", limited.text);
    let v = limited.json();
    assert_eq!(v["id"], 9);
    assert_eq!(v["error"]["code"], -32072, "{v}");
    let wait = v["error"]["data"]["retryAfterMs"].as_u64().unwrap();
    assert!((1..=500).contains(&wait), "a token every 500 ms: {wait}");
    assert_eq!(limited.header("retry-after").as_deref(), Some("1"));
    let policy = limited.header("ratelimit-policy").unwrap();
    assert!(policy.starts_with("\"per-tenant\";q=3"), "{policy}");
    let now = limited.header("ratelimit").unwrap();
    assert!(now.starts_with("\"per-tenant\";r=0"), "{now}");

    // Another tenant has its own bucket; a method no limit matches is never limited.
    assert_eq!(as_tenant("globex", 10).await.status, 200);
    let other = gw
        .rpc_with(&call(json!(11), "echo"), &[("x-tenant", "acme")])
        .await;
    assert_eq!(other.status, 200);

    // A legacy client is limited in its own terms.
    let legacy = json!({"a2a_version": "1.0", "request_id": "r", "operation": "plans.get",
                        "params": {}});
    let a = gw.rpc_with(&legacy, &[("x-tenant", "acme")]).await;
    assert_eq!(a.status, 429);
    assert_eq!(a.json()["error"]["code"], "RATE_LIMITED");

    // Refilled: one token after 500 ms.
    tokio::time::sleep(Duration::from_millis(wait + 520)).await;
    assert_eq!(as_tenant("acme", 12).await.status, 200, "refilled on time");
    let metrics = gw.get("/metrics").await.text;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wiregate_rate_limited_total{")
                && l.contains(r#"limit="per-tenant""#)),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_client_keeps_its_own_ip_bucket() {
    let up = jsonrpc_echo().run().await;
    let limited = |trusted: Vec<String>| {
        support::routing_all_to(&up.url(), Dialect::Jsonrpc).with(move |c| {
            c.server.trusted_proxies = trusted;
            c.rate_limits = vec![RateLimit {
                name: "per-ip".into(),
                matches: vec!["*".into()],
                key: "ip".into(),
                rate_per_s: 0.001,
                burst: 2,
                shared: false,
            }]
        })
    };
    // The load balancer (loopback here) is trusted: each client it names has its own budget,
    // and an address a client wrote left of the balancer's entry is not believed.
    let gw = limited(vec!["127.0.0.1".into()]).start().await;
    assert_eq!(from_client(&gw, "203.0.113.1", 1).await, 200);
    assert_eq!(from_client(&gw, "203.0.113.1", 2).await, 200);
    assert_eq!(from_client(&gw, "203.0.113.1", 3).await, 429);
    assert_eq!(
        from_client(&gw, "203.0.113.2", 4).await,
        200,
        "another client's own bucket"
    );
    assert_eq!(
        from_client(&gw, "203.0.113.9, 203.0.113.1", 5).await,
        429,
        "the right-most counts"
    );

    // Untrusted, the same headers are ignored: one bucket for the peer.
    let gw = limited(Vec::new()).start().await;
    assert_eq!(from_client(&gw, "203.0.113.1", 1).await, 200);
    assert_eq!(from_client(&gw, "203.0.113.2", 2).await, 200);
    assert_eq!(
        from_client(&gw, "203.0.113.3", 3).await,
        429,
        "one bucket: the peer's"
    );
}

/// The status of a call a proxy says came from `client` (`X-Forwarded-For`).
async fn from_client(gw: &support::TestGateway, client: &str, id: i64) -> u16 {
    gw.rpc_with(&call(json!(id), "m"), &[("x-forwarded-for", client)])
        .await
        .status
}
