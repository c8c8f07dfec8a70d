//! Three endpoints share the calls: `round_robin` in turn, `least_request` by load, `hash` by
//! caller.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use wiregate::config::{Balance, Dialect};

use crate::support::{jsonrpc_echo, Listening};
use crate::{call, fleet};

async fn three(delays_ms: [u64; 3]) -> Vec<Listening> {
    let mut ups = Vec::new();
    for d in delays_ms {
        ups.push(jsonrpc_echo().delay(Duration::from_millis(d)).run().await);
    }
    ups
}

fn urls(ups: &[Listening]) -> Vec<String> {
    ups.iter().map(Listening::url).collect()
}

#[tokio::test]
async fn round_robin_gives_each_of_three_endpoints_ten_of_thirty_calls() {
    let ups = three([0, 0, 0]).await;
    let gw = fleet("rr-three", &urls(&ups), Dialect::Jsonrpc, |u| {
        u.balance = Balance::RoundRobin;
    })
    .start()
    .await;
    for i in 0..30 {
        let a = gw.rpc(&call(json!(i), "m", json!({"n": i}))).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"]["via"], "jsonrpc", "{}", a.text);
    }
    let counts: Vec<usize> = ups.iter().map(Listening::calls).collect();
    assert_eq!(counts, [10, 10, 10]);
    // In turn: each endpoint saw every third call.
    for (k, up) in ups.iter().enumerate() {
        let ns: Vec<u64> = up
            .seen()
            .iter()
            .map(|s| s.body["params"]["n"].as_u64().unwrap())
            .collect();
        let first = ns[0];
        assert!(first < 3, "endpoint {k} began at call {first}");
        assert_eq!(
            ns,
            (0..10).map(|j| first + 3 * j).collect::<Vec<_>>(),
            "endpoint {k}"
        );
    }
}

#[tokio::test]
async fn least_request_sends_most_calls_to_the_fast_endpoints_under_load() {
    // Two endpoints answer in 10 ms, one in 100 ms.
    let ups = three([10, 100, 10]).await;
    let gw = fleet("lr-three", &urls(&ups), Dialect::Jsonrpc, |u| {
        u.balance = Balance::LeastRequest;
    })
    .start()
    .await;
    let workers = crate::workers(
        &gw.http,
        &format!("{}/rpc", gw.base()),
        12,
        |w, i| (i < 25).then(|| call(json!(format!("{w}-{i}")), "m", json!({}))),
        |_, r| async move { assert_eq!(r.status(), 200) },
    );
    for w in workers {
        w.await.unwrap();
    }
    let counts: Vec<usize> = ups.iter().map(Listening::calls).collect();
    assert_eq!(counts.iter().sum::<usize>(), 300, "{counts:?}");
    let slow = counts[1];
    assert!(
        counts[0] > 2 * slow && counts[2] > 2 * slow,
        "the fast endpoints get clearly more than the slow one: {counts:?}"
    );
}

#[tokio::test]
async fn hash_keeps_each_caller_on_one_endpoint_and_spreads_the_callers() {
    let ups = three([0, 0, 0]).await;
    let gw = fleet("hash-three", &urls(&ups), Dialect::Jsonrpc, |u| {
        u.balance = Balance::Hash;
        u.hash_key = "auth".into();
    })
    .start()
    .await;
    let callers: Vec<String> = (0..16).map(|c| format!("caller-token-{c}")).collect();
    // Interleaved, so a caller's calls are not simply consecutive.
    for round in 0..6 {
        for token in &callers {
            let bearer = format!("Bearer {token}");
            let a = gw
                .rpc_with(
                    &call(json!(round), "m", json!({})),
                    &[("authorization", &bearer)],
                )
                .await;
            assert_eq!(a.status, 200, "{}", a.text);
        }
    }
    // The same credential in a legacy envelope's `auth` is the same caller.
    for token in &callers {
        let a = gw
            .rpc(
                &json!({"a2a_version": "1.0", "request_id": "h", "operation": "m",
                         "params": {}, "auth": {"scheme": "bearer", "token": token}}),
            )
            .await;
        assert_eq!(a.json()["status"], "success", "{}", a.text);
    }
    // Which endpoints each caller's calls reached, and how many.
    let mut placed: HashMap<String, HashMap<usize, usize>> = HashMap::new();
    for (k, up) in ups.iter().enumerate() {
        for s in up.seen() {
            let auth = s.headers["authorization"].to_str().unwrap().to_owned();
            *placed.entry(auth).or_default().entry(k).or_default() += 1;
        }
    }
    assert_eq!(placed.len(), callers.len(), "{placed:?}");
    for (auth, on) in &placed {
        assert_eq!(on.len(), 1, "{auth} went to several endpoints: {on:?}");
        assert_eq!(on.values().sum::<usize>(), 7, "{auth}: {on:?}");
    }
    let used: HashSet<usize> = placed.values().flat_map(|on| on.keys().copied()).collect();
    assert!(used.len() > 1, "16 callers all on one endpoint: {placed:?}");
}

#[tokio::test]
async fn hash_by_header_keeps_a_tenant_on_one_endpoint() {
    let ups = three([0, 0, 0]).await;
    let gw = fleet("hash-header", &urls(&ups), Dialect::Jsonrpc, |u| {
        u.balance = Balance::Hash;
        u.hash_key = "header:x-tenant".into();
    })
    .start()
    .await;
    let tenants: Vec<String> = (0..12).map(|t| format!("tenant-{t}")).collect();
    for round in 0..4 {
        for t in &tenants {
            let a = gw
                .rpc_with(
                    &call(json!(round), "m", json!({"tenant": t})),
                    &[("x-tenant", t)],
                )
                .await;
            assert_eq!(a.status, 200, "{}", a.text);
        }
    }
    let mut placed: HashMap<String, HashSet<usize>> = HashMap::new();
    for (k, up) in ups.iter().enumerate() {
        for s in up.seen() {
            let t = s.body["params"]["tenant"].as_str().unwrap().to_owned();
            placed.entry(t).or_default().insert(k);
        }
    }
    assert_eq!(placed.len(), tenants.len());
    assert!(
        placed.values().all(|on| on.len() == 1),
        "a tenant moved: {placed:?}"
    );
    let used: HashSet<usize> = placed.values().flatten().copied().collect();
    assert!(used.len() > 1, "every tenant on one endpoint: {placed:?}");
}

#[tokio::test]
async fn hash_moves_only_the_callers_of_an_endpoint_taken_out() {
    const UP: &str = "hash-out";
    let (ups, switches) = crate::health::checked_three().await;
    let gw = fleet(UP, &urls(&ups), Dialect::Jsonrpc, |u| {
        u.balance = Balance::Hash;
        u.health = crate::health::quick_checks(1, 1);
    })
    .start()
    .await;
    let callers: Vec<String> = (0..24).map(|c| format!("Bearer mover-{c}")).collect();
    // Where each caller lands: the endpoint that saw its latest call.
    let place = |ups: &[Listening], auth: &str| -> usize {
        let mut latest = None;
        for (k, up) in ups.iter().enumerate() {
            if let Some(j) = up
                .seen()
                .iter()
                .rposition(|s| s.headers["authorization"] == auth)
            {
                let at = up.seen()[j].body["params"]["round"].as_u64().unwrap();
                if latest.is_none_or(|(r, _)| at > r) {
                    latest = Some((at, k));
                }
            }
        }
        latest.expect("the caller was seen").1
    };
    let round = |r: u64| {
        let gw = &gw;
        let callers = &callers;
        async move {
            for c in callers {
                let a = gw
                    .rpc_with(
                        &call(json!(r), "m", json!({"round": r})),
                        &[("authorization", c)],
                    )
                    .await;
                assert_eq!(a.status, 200, "{}", a.text);
            }
        }
    };
    round(1).await;
    let before: Vec<usize> = callers.iter().map(|c| place(&ups, c)).collect();
    // Take out the endpoint with the most callers.
    let out = (0..3)
        .max_by_key(|k| before.iter().filter(|b| *b == k).count())
        .unwrap();
    switches[out].store(503, Ordering::SeqCst);
    let out_at = crate::authority(&ups[out].url());
    crate::until("the endpoint taken out", crate::WAIT, || async {
        use crate::TestGatewayExt;
        (gw.state(UP, &out_at).await == "unhealthy").then_some(())
    })
    .await;
    round(2).await;
    let after: Vec<usize> = callers.iter().map(|c| place(&ups, c)).collect();
    for (i, c) in callers.iter().enumerate() {
        if before[i] == out {
            assert_ne!(after[i], out, "{c} still on the endpoint taken out");
        } else {
            assert_eq!(after[i], before[i], "{c} moved though its endpoint stayed");
        }
    }
    assert!(before.contains(&out));
}
