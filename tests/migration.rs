//! Migrating a method safely, over real sockets: a legacy and a JSON-RPC upstream behind the
//! gateway, split by weight with sticky callers, shadowed and compared, rolled back, and the
//! report of who still speaks legacy at `GET /migration`.
#![forbid(unsafe_code)]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use futures::StreamExt;
use serde_json::{json, Value};
use support::migration::{jsonrpc, old_and_new, report, route, shadowed, shadows_done, split};
use support::{dead_url, gateway, jsonrpc_echo, legacy_echo, upstream};
use wiregate::config::{Config, Dialect, Rollback, Route};

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn a_90_10_split_holds_over_1000_callers_and_each_keeps_its_side() {
    let old = legacy_echo().run().await;
    let new = jsonrpc_echo().run().await;
    let gw = old_and_new(&old, &new)
        .with(|c| {
            c.routes.push(split(
                "plans-9010",
                &["plan.*"],
                &[("old", 90), ("new", 10)],
            ))
        })
        .start()
        .await;
    // Each caller calls twice: once as a JSON-RPC client with `Authorization`, once as a legacy
    // client with the same token in `auth`; both must land on the same side.
    let sides: Vec<(String, String)> =
        futures::stream::iter(0..1000)
            .map(|i| {
                let gw = &gw;
                async move {
                    let token = format!("caller-{i}");
                    let a = gw
                        .rpc_with(
                            &jsonrpc("plan.get", json!({})),
                            &[("authorization", &format!("Bearer {token}"))],
                        )
                        .await
                        .json();
                    let b = gw
                    .rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "plan.get",
                        "params": {}, "auth": {"scheme": "bearer", "token": token}}))
                    .await
                    .json();
                    (
                        a["result"]["via"].as_str().unwrap().to_owned(),
                        b["data"]["via"].as_str().unwrap().to_owned(),
                    )
                }
            })
            .buffer_unordered(8)
            .collect()
            .await;
    for (a, b) in &sides {
        assert_eq!(a, b, "a caller changed sides");
    }
    let on_new = sides.iter().filter(|(a, _)| a == "jsonrpc").count();
    assert!(
        (70..=130).contains(&on_new),
        "{on_new} of 1000 callers on the 10 % side (±3 % is 70..=130)"
    );
    let r = report(&gw).await;
    let p = route(&r, "plans-9010");
    assert_eq!(p["sticky"], "auth");
    assert_eq!(p["sides"][1]["calls"], json!(2 * on_new));
    assert_eq!(p["sides"][0]["calls"], json!(2000 - 2 * on_new));
    let m = gw.get("/metrics").await.text;
    assert_eq!(
        metric(
            &m,
            r#"wiregate_split_calls_total{route="plans-9010",upstream="new"}"#
        ),
        Some((2 * on_new) as f64)
    );
}

#[tokio::test]
async fn sticky_by_header_and_by_ip() {
    let old = legacy_echo().run().await;
    let new = jsonrpc_echo().run().await;
    let gw = old_and_new(&old, &new)
        .with(|c| {
            let mut by_header = split("by-header", &["h.*"], &[("old", 50), ("new", 50)]);
            by_header.sticky = "header:X-Client".into();
            let mut by_ip = split("by-ip", &["ip.*"], &[("old", 50), ("new", 50)]);
            by_ip.sticky = "ip".into();
            c.routes.extend([by_header, by_ip]);
        })
        .start()
        .await;
    let via = |a: support::Answer| a.json()["result"]["via"].as_str().unwrap().to_owned();
    let mut seen_sides = std::collections::HashSet::new();
    for client in 0..20 {
        let mut sides = std::collections::HashSet::new();
        for token in 0..5 {
            let a = gw
                .rpc_with(
                    &jsonrpc("h.get", json!({})),
                    &[
                        ("x-client", &format!("client-{client}")),
                        ("authorization", &format!("Bearer t{token}")),
                    ],
                )
                .await;
            sides.insert(via(a));
        }
        assert_eq!(sides.len(), 1, "one X-Client, one side, whatever the token");
        seen_sides.extend(sides);
    }
    assert_eq!(seen_sides.len(), 2, "20 clients at 50/50 reach both sides");
    // Every test caller is 127.0.0.1: one address, one side, whatever the token.
    let mut sides = std::collections::HashSet::new();
    for token in 0..20 {
        let a = gw
            .rpc_with(
                &jsonrpc("ip.get", json!({})),
                &[("authorization", &format!("Bearer t{token}"))],
            )
            .await;
        sides.insert(via(a));
    }
    assert_eq!(sides.len(), 1);
}

/// A legacy primary whose answers carry an `updated_at` of its own, and `nonce` when asked.
fn legacy_primary() -> support::UpstreamBuilder {
    upstream(|req| {
        let rid = req["request_id"].clone();
        let op = req["operation"].as_str().unwrap_or_default();
        let body = if op.ends_with("missing") {
            json!({"a2a_version": "1.0", "request_id": rid, "status": "error",
                "error": {"code": "NOT_FOUND", "message": "plan does not exist"}})
        } else {
            json!({"a2a_version": "1.0", "request_id": rid, "status": "success",
                "data": {"plan": "P1", "state": "running", "updated_at": "2026-01-01T00:00:00Z",
                         "nonce": uuid::Uuid::new_v4().to_string()}})
        };
        (StatusCode::OK, body.to_string())
    })
}

/// A JSON-RPC shadow answering as the primary does, but with its own `updated_at` and `nonce`,
/// and `state` taken from `params.shadow_state` when given.
fn jsonrpc_shadow() -> support::UpstreamBuilder {
    upstream(|req| {
        let id = req["id"].clone();
        let method = req["method"].as_str().unwrap_or_default();
        let body = if method.ends_with("missing") {
            json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32001, "message": "no such plan"}})
        } else {
            let state = req["params"]["shadow_state"].as_str().unwrap_or("running");
            json!({"jsonrpc": "2.0", "id": id,
                "result": {"plan": "P1", "state": state, "updated_at": "2026-06-30T12:00:00Z",
                           "nonce": uuid::Uuid::new_v4().to_string()}})
        };
        (StatusCode::OK, body.to_string())
    })
}

#[tokio::test]
async fn shadow_answers_are_compared_match_diff_ignore_and_errors_by_code() {
    let old = legacy_primary().run().await;
    let new = jsonrpc_shadow().run().await;
    let gw = old_and_new(&old, &new)
        .with(|c| {
            let mut ignoring = shadowed("shadow-plans", &["plan.*"], "old", "new");
            ignoring.shadow_ignore = vec!["/result/updated_at".into(), "/result/nonce".into()];
            let mut strict = shadowed("shadow-strict", &["strict.*"], "old", "new");
            strict.shadow_ignore = vec!["/result/nonce".into()];
            c.routes.extend([ignoring, strict]);
        })
        .start()
        .await;
    let secret = "Bearer shadow-secret-token";
    // Equal but for the ignored fields: a match; the caller gets the primary's answer.
    let a = gw
        .rpc_with(
            &jsonrpc("plan.get", json!({})),
            &[("authorization", secret)],
        )
        .await
        .json();
    assert_eq!(a["result"]["updated_at"], "2026-01-01T00:00:00Z");
    // Errors with the same code (messages differ): a match.
    let a = gw.rpc(&jsonrpc("plan.missing", json!({}))).await.json();
    assert_eq!(a["error"]["code"], -32001);
    // A real difference, named by its pointer and the caller's request id.
    let a = gw
        .rpc_with(
            &jsonrpc("plan.get", json!({"shadow_state": "done"})),
            &[("x-request-id", "req-diff-1"), ("authorization", secret)],
        )
        .await
        .json();
    assert_eq!(
        a["result"]["state"], "running",
        "the caller never sees the shadow"
    );
    let r = shadows_done(&gw, "shadow-plans", 3).await;
    let p = route(&r, "shadow-plans");
    let s = &p["shadow"];
    assert_eq!(
        (s["match"].as_u64(), s["diff"].as_u64()),
        (Some(2), Some(1)),
        "{s}"
    );
    assert_eq!(
        s["last_diffs"],
        json!([{"method": "plan.get", "request_id": "req-diff-1", "at": s["last_diffs"][0]["at"],
            "pointers": [{"pointer": "/result/state", "primary": "\"running\"", "shadow": "\"done\""}]}])
    );
    // Without ignoring `updated_at`, the same answers differ there.
    gw.rpc(&jsonrpc("strict.get", json!({}))).await;
    let r = shadows_done(&gw, "shadow-strict", 1).await;
    let p = route(&r, "shadow-strict");
    assert_eq!(
        p["shadow"]["last_diffs"][0]["pointers"],
        json!([{"pointer": "/result/updated_at", "primary": "\"2026-01-01T00:00:00Z\"",
            "shadow": "\"2026-06-30T12:00:00Z\""}])
    );
    let text = gw.get("/migration").await.text;
    assert!(
        !text.contains("shadow-secret-token"),
        "a credential in {text}"
    );
    let m = gw.get("/metrics").await.text;
    assert_eq!(
        metric(
            &m,
            r#"wiregate_shadow_total{route="shadow-plans",method="plan.get",outcome="diff"}"#
        ),
        Some(1.0)
    );
    // The shadow got each call in its own dialect, with the caller's credential.
    let seen = new.seen();
    assert_eq!(seen[0].body["jsonrpc"], "2.0");
    assert_eq!(seen[0].body["method"], "plan.get");
    assert_eq!(seen[0].headers["authorization"], secret);
}

#[tokio::test]
async fn fields_that_differ_between_two_primaries_are_noise() {
    let old = legacy_primary().run().await;
    let old2 = legacy_primary().run().await;
    let new = jsonrpc_shadow().run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("old-2", &old2.url(), Dialect::Legacy, 5000)
        .upstream("new", &new.url(), Dialect::Jsonrpc, 5000)
        .with(|c| {
            let mut r = shadowed("noisy", &["plan.*"], "old", "new");
            r.shadow_noise = "old-2".into();
            r.shadow_ignore = vec!["/result/updated_at".into()];
            c.routes.push(r);
        })
        .start()
        .await;
    // `nonce` differs on every answer, the two primaries' included: noise.
    gw.rpc(&jsonrpc("plan.get", json!({}))).await;
    let r = shadows_done(&gw, "noisy", 1).await;
    let p = route(&r, "noisy");
    assert_eq!(p["shadow"]["noise"], 1, "{p}");
    assert_eq!(p["shadow"]["diff"], 0);
    // `state` differs only on the shadow: a difference, reported without the noisy `nonce`.
    gw.rpc(&jsonrpc("plan.get", json!({"shadow_state": "done"})))
        .await;
    let r = shadows_done(&gw, "noisy", 2).await;
    let p = route(&r, "noisy");
    assert_eq!(p["shadow"]["diff"], 1, "{p}");
    let pointers: Vec<&str> = p["shadow"]["last_diffs"][0]["pointers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/result/state"]);
    assert_eq!(
        old2.seen().len(),
        2,
        "the second primary got every shadowed call"
    );
}

#[tokio::test]
async fn a_slow_shadow_does_not_hold_the_caller_and_a_full_queue_drops() {
    let old = legacy_echo().run().await;
    // The shadow answers after 30 s; its timeout is longer still.
    let slow = jsonrpc_echo().delay(Duration::from_secs(30)).run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("slow", &slow.url(), Dialect::Jsonrpc, 60_000)
        .with(|c| {
            c.routes
                .push(shadowed("slow-shadow", &["plan.*"], "old", "slow"));
            c.migration.shadow_queue = 1;
            c.migration.shadow_concurrency = 1;
        })
        .start()
        .await;
    let a = gw.rpc(&jsonrpc("plan.get", json!({}))).await.json();
    assert_eq!(a["result"]["via"], "legacy");
    // The shadow has the call and will not answer for 30 s, yet the caller has its answer.
    for _ in 0..200 {
        if !slow.seen().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(slow.seen().len(), 1, "the shadow got the call");
    // More calls while that one is in flight: each is answered; one waits in the queue
    // (shadow_queue = 1), the others are dropped and counted.
    for _ in 0..5 {
        let a = gw.rpc(&jsonrpc("plan.get", json!({}))).await.json();
        assert_eq!(a["result"]["via"], "legacy");
    }
    let r = report(&gw).await;
    let s = &route(&r, "slow-shadow")["shadow"];
    assert_eq!(
        (
            s["match"].as_u64(),
            s["diff"].as_u64(),
            s["shadow_error"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "no shadow finished: {s}"
    );
    assert_eq!(s["dropped"], 4, "{s}");
    let m = gw.get("/metrics").await.text;
    assert_eq!(
        metric(
            &m,
            r#"wiregate_shadow_total{route="slow-shadow",method="plan.get",outcome="dropped"}"#
        ),
        Some(4.0)
    );
}

/// The names of this process's threads (the gateway under test runs in it).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[tokio::test]
async fn shadows_are_sent_from_a_thread_of_their_own() {
    let old = legacy_echo().run().await;
    let new = jsonrpc_echo().run().await;
    let gw = old_and_new(&old, &new)
        .with(|c| {
            c.routes
                .push(shadowed("threaded", &["plan.*"], "old", "new"))
        })
        .start()
        .await;
    // This test's runtime has one thread, the gateway's: the shadow is exchanged and compared
    // on the shadow thread while this one only waits for the report.
    let a = gw.rpc(&jsonrpc("plan.get", json!({}))).await.json();
    assert_eq!(a["result"]["via"], "legacy");
    let r = shadows_done(&gw, "threaded", 1).await;
    assert_eq!(
        route(&r, "threaded")["shadow"]["diff"],
        1,
        "echoes differ by `via`"
    );
    assert_eq!(new.seen().len(), 1, "the shadow got the call");
    assert!(
        thread_names().iter().any(|n| n == "wiregate-shadow"),
        "{:?}",
        thread_names()
    );
}

#[tokio::test]
async fn a_dead_shadow_is_counted_and_the_caller_served() {
    let old = legacy_echo().run().await;
    let dead = dead_url().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("dead", &dead, Dialect::Jsonrpc, 1000)
        .with(|c| {
            c.routes
                .push(shadowed("dead-shadow", &["plan.*"], "old", "dead"))
        })
        .start()
        .await;
    for _ in 0..3 {
        let a = gw.rpc(&jsonrpc("plan.get", json!({}))).await.json();
        assert_eq!(a["result"]["via"], "legacy");
    }
    // A notification is not shadowed.
    let n = gw
        .rpc(&json!({"jsonrpc": "2.0", "method": "plan.ping"}))
        .await;
    assert_eq!(n.status, 204);
    let r = shadows_done(&gw, "dead-shadow", 3).await;
    let p = route(&r, "dead-shadow");
    assert_eq!(p["shadow"]["shadow_error"], 3, "{p}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        route(&report(&gw).await, "dead-shadow")["shadow"]["shadow_error"],
        3
    );
}

/// A JSON-RPC upstream that fails every call with an internal error.
fn erroring() -> support::UpstreamBuilder {
    upstream(|req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32603, "message": "internal error"}});
        (StatusCode::OK, body.to_string())
    })
}

#[tokio::test]
async fn an_erroring_new_upstream_is_rolled_back() {
    let old = legacy_echo().run().await;
    let bad = erroring().run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("bad", &bad.url(), Dialect::Jsonrpc, 5000)
        .with(|c| {
            let mut r = split("rollback-plans", &["plan.*"], &[("old", 50), ("bad", 50)]);
            r.rollback = Some(Rollback {
                max_error_rate: 0.05,
                min_calls: 10,
                window_ms: 60_000,
                max_p99_ms: None,
            });
            c.routes.push(r);
        })
        .start()
        .await;
    let call = |i: usize| {
        let gw = &gw;
        async move {
            gw.rpc_with(
                &jsonrpc("plan.get", json!({})),
                &[("authorization", &format!("Bearer roll-{i}"))],
            )
            .await
            .json()
        }
    };
    let mut errors = 0;
    for i in 0..200 {
        if call(i).await.get("error").is_some() {
            errors += 1;
        }
    }
    assert_eq!(errors, 10, "the 10th error rolls the side back");
    // Afterwards every caller, the bad side's included, is on the primary.
    for i in 0..200 {
        assert_eq!(call(i).await["result"]["via"], "legacy");
    }
    let r = report(&gw).await;
    let p = route(&r, "rollback-plans");
    assert_eq!(p["rollback"]["state"], "rolled_back");
    let reason = p["rollback"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "bad: error rate 1.000 (10 of 10 calls in 60000 ms) exceeds max_error_rate 0.05"
        ),
        "{reason}"
    );
    assert_eq!(p["sides"][1]["rolled_back"], true);
    assert_eq!(p["sides"][1]["effective_weight"], 0);
    assert_eq!(p["sides"][1]["rollback"]["limit"], "max_error_rate");
    let m = gw.get("/metrics").await.text;
    assert_eq!(
        metric(&m, r#"wiregate_rollbacks_total{route="rollback-plans"}"#),
        Some(1.0)
    );
}

#[tokio::test]
async fn a_slow_new_upstream_is_rolled_back_on_p99() {
    let old = legacy_echo().run().await;
    let slow = jsonrpc_echo().delay(Duration::from_millis(60)).run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .upstream("slow", &slow.url(), Dialect::Jsonrpc, 5000)
        .with(|c| {
            let mut r = split("p99-plans", &["plan.*"], &[("old", 0), ("slow", 1)]);
            r.rollback = Some(Rollback {
                max_error_rate: 1.0,
                min_calls: 5,
                window_ms: 60_000,
                max_p99_ms: Some(20),
            });
            c.routes.push(r);
        })
        .start()
        .await;
    let mut via = Vec::new();
    for _ in 0..7 {
        let a = gw.rpc(&jsonrpc("plan.get", json!({}))).await.json();
        via.push(a["result"]["via"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        via,
        ["jsonrpc", "jsonrpc", "jsonrpc", "jsonrpc", "jsonrpc", "legacy", "legacy"]
    );
    let r = report(&gw).await;
    let side = &route(&r, "p99-plans")["sides"][1];
    assert_eq!(side["rollback"]["limit"], "max_p99_ms", "{side}");
    assert!(side["rollback"]["p99_ms"].as_u64().unwrap() >= 60);
}

#[tokio::test]
async fn the_caller_report_says_who_still_speaks_legacy() {
    let old = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .with(|c| c.migration.max_callers = 2)
        .start()
        .await;
    for _ in 0..3 {
        gw.rpc(
            &json!({"a2a_version": "1.0", "request_id": "r", "operation": "plan.get",
            "params": {}, "auth": {"scheme": "bearer", "token": "legacy-team-token"}}),
        )
        .await;
    }
    gw.rpc(
        &json!({"a2a_version": "1.0", "request_id": "r", "operation": "plan.list",
        "params": {}, "auth": {"scheme": "bearer", "token": "legacy-team-token"}}),
    )
    .await;
    gw.rpc_with(
        &jsonrpc("plan.get", json!({})),
        &[("authorization", "Bearer modern-team-token")],
    )
    .await;
    gw.rpc_with(
        &jsonrpc("plan.get", json!({})),
        &[("authorization", "Bearer modern-team-token")],
    )
    .await;
    // A third caller pushes the least active out of the table (max_callers = 2).
    gw.rpc_with(
        &jsonrpc("plan.get", json!({})),
        &[("authorization", "Bearer one-off-token")],
    )
    .await;
    let a = gw.get("/migration").await;
    for token in ["legacy-team-token", "modern-team-token", "one-off-token"] {
        assert!(!a.text.contains(token), "a token in {}", a.text);
    }
    let c = &a.json()["callers"];
    assert_eq!(c["rule"], "auth");
    let tracked = c["tracked"].as_array().unwrap();
    assert_eq!(tracked.len(), 2);
    assert_eq!(tracked[0]["calls"], 4);
    assert_eq!(tracked[0]["dialects"], json!({"legacy": 4}));
    assert_eq!(
        tracked[0]["methods"],
        json!({"plan.get": 3, "plan.list": 1})
    );
    assert!(tracked[0]["caller"].as_str().unwrap().starts_with("auth:"));
    assert!(tracked[0]["last_seen_ms"].as_u64().unwrap() > 1_700_000_000_000);
    // The modern caller (2 calls) stays; the one-off caller took the last row.
    assert_eq!(tracked[1]["calls"], 1);
    assert_eq!(c["others"], json!({"callers": 1, "calls": 2}));
}

#[tokio::test]
async fn callers_can_be_told_apart_by_a_header() {
    let old = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .with(|c| c.migration.caller = "header:X-Client".into())
        .start()
        .await;
    gw.rpc_with(&jsonrpc("a", json!({})), &[("x-client", "billing")])
        .await;
    gw.rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "b", "params": {}}))
        .await;
    let r = report(&gw).await;
    let ids: Vec<&str> = r["callers"]["tracked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["caller"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"billing") && ids.contains(&"(no x-client)"),
        "{ids:?}"
    );
}

#[tokio::test]
async fn callers_can_be_told_apart_by_address() {
    let old = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .with(|c| c.migration.caller = "ip".into())
        .start()
        .await;
    gw.rpc(&jsonrpc("a", json!({}))).await;
    let r = report(&gw).await;
    assert_eq!(r["callers"]["tracked"][0]["caller"], "127.0.0.1", "{r}");
}

#[tokio::test]
async fn migration_needs_an_admin_token_once_tokens_are_set() {
    let old = legacy_echo().run().await;
    let open = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .start()
        .await;
    // No tokens configured: loopback callers (this test) are served.
    assert_eq!(open.get("/migration").await.status, 200);
    let token = "admin-token-0123456789";
    let gw = gateway()
        .upstream("old", &old.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .with(|c| c.server.admin_tokens = vec![token.into()])
        .start()
        .await;
    let get = |auth: Option<&str>| {
        let mut req = gw.http.get(format!("{}/migration", gw.base()));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        async move { req.send().await.unwrap() }
    };
    let refused = get(None).await;
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["message"], "a valid bearer token is required");
    assert_eq!(
        get(Some("Bearer wrong-token-0123456789")).await.status(),
        401
    );
    let ok = get(Some(&format!("Bearer {token}"))).await;
    assert_eq!(ok.status(), 200);
    let body: Value = ok.json().await.unwrap();
    assert!(body["routes"].is_array());
}

#[test]
fn migration_keys_are_validated_with_their_paths() {
    let mut c = Config {
        upstreams: vec![wiregate::config::Upstream::new(
            "old",
            "http://127.0.0.1:1/rpc",
            Dialect::Legacy,
            1000,
        )],
        ..Config::default()
    };
    let mut r = split("r", &["*"], &[("old", 0), ("nope", 5)]);
    r.upstream = "old".into();
    r.sticky = "cookie".into();
    r.shadow_ignore = vec!["result/x".into()];
    r.shadow_noise = "old".into();
    r.shadow_sample = 1.5;
    let mut no_split = Route::to(&["x"], "old");
    no_split.rollback = Some(Rollback {
        min_calls: 0,
        ..Rollback::default()
    });
    no_split.name = "r".into();
    c.routes = vec![r, no_split];
    c.migration.caller = "everyone".into();
    c.migration.shadow_queue = 0;
    let keys: Vec<String> = c
        .validate()
        .unwrap_err()
        .0
        .into_iter()
        .map(|i| i.key)
        .collect();
    for key in [
        "routes[0].split",
        "routes[0].split[1].upstream",
        "routes[0].sticky",
        "routes[0].shadow_sample",
        "routes[0].shadow_ignore[0]",
        "routes[0].shadow_noise",
        "routes[1].name",
        "routes[1].rollback",
        "routes[1].rollback.min_calls",
        "migration.caller",
        "migration.shadow_queue",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
    }
}

/// The commented migration example in the shipped `gateway.toml`, uncommented, loads and
/// validates, and `check-config` can print it.
#[test]
fn the_shipped_migration_example_is_valid() {
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml")).unwrap();
    let start = shipped.find("# [[routes]]\n# name = \"plans\"").unwrap();
    let end = shipped[start..].find("\n\n").unwrap() + start;
    let example: String = shipped[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(example.contains("[routes.rollback]"), "{example}");
    let mut text = String::new();
    for (name, dialect) in [
        ("legacy", "legacy"),
        ("modern", "jsonrpc"),
        ("legacy-2", "legacy"),
    ] {
        text.push_str(&format!(
            "[[upstreams]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:9/rpc\"\ndialect = \"{dialect}\"\n"
        ));
    }
    text.push_str(&example);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    support::schema::check_toml(&text);
    std::fs::write(&path, &text).unwrap();
    let c = Config::load(&path, true).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let r = &c.routes[0];
    assert_eq!(r.name, "plans");
    assert_eq!(r.split[1].weight, 10);
    assert_eq!(r.shadow_noise, "legacy-2");
    assert_eq!(r.rollback.as_ref().unwrap().min_calls, 50);
    let printed = c.to_masked_toml();
    assert!(printed.contains("shadow_ignore"), "{printed}");
}

/// A reload (the same path as SIGHUP) keeps a route's figures and its rollback while the route
/// keeps its name and split; a reload that changes the split brings the side back.
#[tokio::test]
async fn a_reload_keeps_the_figures_and_a_changed_split_brings_a_side_back() {
    let old = legacy_echo().run().await;
    let bad = erroring().run().await;
    let configure = |c: &mut Config, canary_weight: u32| {
        c.upstreams = vec![
            wiregate::config::Upstream::new("old", &old.url(), Dialect::Legacy, 5000),
            wiregate::config::Upstream::new("bad", &bad.url(), Dialect::Jsonrpc, 5000),
        ];
        let mut r = split(
            "reloaded-plans",
            &["plan.*"],
            &[("old", 0), ("bad", canary_weight)],
        );
        r.rollback = Some(Rollback {
            min_calls: 3,
            ..Rollback::default()
        });
        c.routes = vec![r];
    };
    let gw = gateway().with(|c| configure(c, 100)).start().await;
    let body = jsonrpc("plan.get", json!({}));
    let call = || gw.rpc(&body);
    for _ in 0..3 {
        assert_eq!(call().await.json()["error"]["code"], -32603);
    }
    assert_eq!(
        call().await.json()["result"]["via"],
        "legacy",
        "rolled back"
    );
    let state = |r: &Value| {
        let p = route(r, "reloaded-plans");
        (
            p["rollback"]["state"].as_str().unwrap().to_owned(),
            p["sides"][1]["calls"].as_u64().unwrap(),
        )
    };
    assert_eq!(state(&report(&gw).await), ("rolled_back".into(), 3));

    let mut same = Config::default();
    same.server.listen = gw.addr;
    configure(&mut same, 100);
    same.validate().unwrap();
    let running = gw.running.as_ref().unwrap();
    assert!(running.reload(&same).reloaded);
    assert_eq!(state(&report(&gw).await), ("rolled_back".into(), 3));
    assert_eq!(call().await.json()["result"]["via"], "legacy");

    let mut changed = same.clone();
    configure(&mut changed, 50);
    assert!(running.reload(&changed).reloaded);
    assert_eq!(state(&report(&gw).await), ("armed".into(), 3));
    assert_eq!(
        call().await.json()["error"]["code"],
        -32603,
        "the side is back"
    );
}
