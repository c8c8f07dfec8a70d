//! The gateway's main job over real sockets: both client dialects, both upstream dialects,
//! every row of the translation tables.

use crate::support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{fronting, gateway, jsonrpc_echo, legacy_echo, upstream};
use wiregate::config::{Dialect, Legacy};

/// The contract's error-code table (legacy code → JSON-RPC code), then the gateway's own failures
/// (README's Failures, CHANGELOG.md). Written out here, not taken from the code's table, so a wrong
/// row there fails.
const DESIGN_CODES: [(&str, i64); 15] = [
    ("NOT_FOUND", -32001),
    ("AUTH_ERROR", -32002),
    ("FORBIDDEN", -32003),
    ("INVALID_STATE", -32004),
    ("DUPLICATE", -32005),
    ("BUDGET_EXCEEDED", -32006),
    ("VERSION_MISMATCH", -32007),
    ("PLAN_ERROR", -32008),
    ("CONFIGURATION_ERROR", -32009),
    ("VALIDATION_ERROR", -32602),
    ("OPERATION_NOT_FOUND", -32601),
    ("INTERNAL_ERROR", -32603),
    ("UPSTREAM_UNAVAILABLE", -32050),
    ("UPSTREAM_TIMEOUT", -32051),
    ("UPSTREAM_BAD_RESPONSE", -32052),
];

#[tokio::test]
async fn jsonrpc_client_to_legacy_upstream_translates_both_ways() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &up.url(), Dialect::Legacy, 2000)
        .route(&["plan.*"], "old")
        .start()
        .await;
    let a = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "plan.get", "params": {"plan_id": "P1"}}),
            &[("authorization", "Bearer tok-123")],
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"jsonrpc": "2.0", "id": 7,
               "result": {"op": "plan.get", "params": {"plan_id": "P1"}, "via": "legacy"}})
    );
    assert_eq!(a.header("server-timing").as_deref(), Some("upstream;dur=7"));
    let sent = &up.seen()[0].body;
    assert_eq!(
        sent,
        &json!({"a2a_version": "1.0", "request_id": "7", "operation": "plan.get",
                "params": {"plan_id": "P1"}, "auth": {"scheme": "bearer", "token": "tok-123"}})
    );
}

#[tokio::test]
async fn every_legacy_error_code_becomes_its_jsonrpc_code() {
    let up = upstream(|req| {
        let code = req["params"]["code"].clone();
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"], "status": "error",
            "error": {"code": code, "message": "m", "details": {"k": 1}}});
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let mut rows: Vec<(String, i64)> = DESIGN_CODES
        .iter()
        .map(|(c, n)| (c.to_string(), *n))
        .collect();
    rows.push(("SOMETHING_ELSE".into(), -32603));
    for (legacy, code) in rows {
        let a = gw
            .rpc(
                &json!({"jsonrpc": "2.0", "id": "e", "method": "fail", "params": {"code": legacy}}),
            )
            .await;
        assert_eq!(a.status, 200, "{legacy}");
        assert_eq!(
            a.json(),
            json!({"jsonrpc": "2.0", "id": "e", "error": {"code": code, "message": "m",
                   "data": {"legacyCode": legacy, "details": {"k": 1}}}}),
            "{legacy}"
        );
    }
}

#[tokio::test]
async fn legacy_error_with_an_http_error_status_is_translated_not_swallowed() {
    let up = upstream(|req| {
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"], "status": "error",
            "error": {"code": "NOT_FOUND", "message": "gone"}});
        (StatusCode::NOT_FOUND, body.to_string())
    })
    .run()
    .await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "x"}))
        .await;
    assert_eq!(a.json()["error"]["code"], -32001);
    assert_eq!(a.json()["error"]["message"], "gone");
}

#[tokio::test]
async fn legacy_client_to_legacy_upstream_keeps_the_envelope() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let a = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": "r-1", "operation": "plan.get",
                     "params": {"x": 1}, "auth": {"api_key": "k"}}),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"a2a_version": "1.0", "request_id": "r-1", "status": "success",
               "data": {"op": "plan.get", "params": {"x": 1}, "via": "legacy"}, "timing_ms": 7.0})
    );
    assert_eq!(up.seen()[0].body["auth"], json!({"api_key": "k"}));
    let e = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "r-2", "operation": "missing"}))
        .await;
    assert_eq!(
        e.json(),
        json!({"a2a_version": "1.0", "request_id": "r-2", "status": "error",
               "error": {"code": "NOT_FOUND", "message": "no such thing", "details": {"what": "x"}},
               "timing_ms": 7.0})
    );
}

#[tokio::test]
async fn legacy_client_to_jsonrpc_upstream() {
    let up = jsonrpc_echo().run().await;
    let gw = support::fronting(&up, Dialect::Jsonrpc).await;
    let a = gw
        .rpc(
            &json!({"a2a_version": "1.0", "request_id": "r-9", "operation": "plan.get",
                     "params": {"plan_id": "P1"}, "auth": {"scheme": "bearer", "token": "T"}}),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"a2a_version": "1.0", "request_id": "r-9", "status": "success",
               "data": {"method": "plan.get", "params": {"plan_id": "P1"}, "via": "jsonrpc"}})
    );
    let seen = &up.seen()[0];
    assert_eq!(
        seen.body,
        json!({"jsonrpc": "2.0", "method": "plan.get", "params": {"plan_id": "P1"}, "id": "r-9"})
    );
    assert_eq!(seen.headers["authorization"], "Bearer T");
}

#[tokio::test]
async fn every_jsonrpc_error_code_becomes_its_legacy_code() {
    let up = upstream(|req| {
        let code = req["params"]["code"].clone();
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": code, "message": "m", "data": {"k": 1}}});
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    let gw = support::fronting(&up, Dialect::Jsonrpc).await;
    let mut rows: Vec<(String, i64)> = DESIGN_CODES
        .iter()
        .map(|(c, n)| (c.to_string(), *n))
        .collect();
    rows.push(("INTERNAL_ERROR".into(), -32099));
    for (legacy, code) in rows {
        let a = gw
            .rpc(
                &json!({"a2a_version": "1.0", "request_id": "q", "operation": "fail",
                         "params": {"code": code}}),
            )
            .await;
        assert_eq!(
            a.json(),
            json!({"a2a_version": "1.0", "request_id": "q", "status": "error",
                   "error": {"code": legacy, "message": "m", "details": {"k": 1}}}),
            "{code}"
        );
    }
}

#[tokio::test]
async fn jsonrpc_client_to_jsonrpc_upstream_passes_through_with_the_callers_id() {
    // An upstream that echoes a wrong id: the caller's own id must come back.
    let up = upstream(|_| {
        (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": "WRONG", "result": {"ok": true}}).to_string(),
        )
    })
    .run()
    .await;
    let gw = support::fronting(&up, Dialect::Jsonrpc).await;
    let a = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 42, "method": "m", "params": [1, 2]}),
            &[("authorization", "Bearer zz")],
        )
        .await;
    assert_eq!(
        a.json(),
        json!({"jsonrpc": "2.0", "id": 42, "result": {"ok": true}})
    );
    assert_eq!(up.seen()[0].body["params"], json!([1, 2]));
    assert_eq!(up.seen()[0].headers["authorization"], "Bearer zz");
}

#[tokio::test]
async fn ids_of_every_type_come_back_exactly() {
    let up = upstream(|req| {
        // The legacy echo lies about the request id.
        let _ = req;
        (
            StatusCode::OK,
            json!({"a2a_version": "1.0", "request_id": "lie", "status": "success", "data": 1})
                .to_string(),
        )
    })
    .run()
    .await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    for id in [
        json!("abc"),
        json!(""),
        json!(0),
        json!(-5),
        json!(1.5),
        json!(9007199254740993u64),
        json!(null),
    ] {
        let a = gw
            .rpc(&json!({"jsonrpc": "2.0", "id": id, "method": "m"}))
            .await;
        assert_eq!(
            a.json(),
            json!({"jsonrpc": "2.0", "id": id, "result": 1}),
            "{id}"
        );
    }
    // A raw body keeps a big integer's exact digits, too.
    let a = gw
        .post(
            "application/json",
            br#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"m"}"#.to_vec(),
            &[],
        )
        .await;
    assert!(
        a.text.contains(r#""id":12345678901234567890"#),
        "{}",
        a.text
    );
}

#[tokio::test]
async fn builtin_health_check_answers_both_dialects_locally() {
    let gw = gateway().start().await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": "h", "method": "_cleveragents/health/check"}))
        .await;
    assert_eq!(a.json()["id"], "h");
    assert_eq!(a.json()["result"]["status"], "ok");
    let l = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "h2", "operation": "_cleveragents/health/check"}))
        .await;
    assert_eq!(l.json()["status"], "success");
    assert_eq!(l.json()["data"]["status"], "ok");
}

#[tokio::test]
async fn unrouted_method_is_method_not_found_in_both_dialects() {
    let gw = gateway().start().await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "nowhere"}))
        .await;
    assert_eq!(a.json()["error"]["code"], -32601);
    let l = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "x", "operation": "nowhere"}))
        .await;
    assert_eq!(l.json()["error"]["code"], "OPERATION_NOT_FOUND");
    assert_eq!(l.json()["request_id"], "x");
}

#[tokio::test]
async fn legacy_version_mismatch_and_generated_request_ids() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let v = gw
        .rpc(&json!({"a2a_version": "2.0", "request_id": "v", "operation": "x"}))
        .await;
    assert_eq!(v.status, 400);
    assert_eq!(v.json()["status"], "error");
    assert_eq!(v.json()["error"]["code"], "VERSION_MISMATCH");
    assert_eq!(v.json()["request_id"], "v");
    assert!(
        up.seen().is_empty(),
        "a mismatched envelope never reaches the upstream"
    );

    let g = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "", "operation": "x"}))
        .await;
    let rid = g.json()["request_id"].as_str().unwrap().to_owned();
    assert!(!rid.is_empty());
    assert_eq!(up.seen()[0].body["request_id"], rid.as_str());
}

#[tokio::test]
async fn notifications_are_silent_yet_reach_the_upstream() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "method": "ping", "params": {"n": 1}}))
        .await;
    assert_eq!(a.status, 204);
    assert!(a.text.is_empty());
    let b = gw
        .rpc(&json!([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]))
        .await;
    assert_eq!(b.status, 204);
    let seen = up.seen();
    assert_eq!(seen.len(), 3);
    for s in seen {
        assert!(
            !s.body["request_id"].as_str().unwrap().is_empty(),
            "a generated request_id"
        );
    }
}

#[tokio::test]
async fn batches_run_concurrently_against_a_legacy_upstream_and_answer_in_order() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &up.url(), Dialect::Legacy, 5000)
        .route(&["*"], "old")
        .start()
        .await;
    // The first call is the slowest: answers must still come back in request order.
    let batch: Vec<Value> = (0..5)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "m", "params": {"delay_ms": 600 - i * 100}}))
        .collect();
    let a = gw.rpc(&Value::from(batch)).await;
    let ids: Vec<Value> = a
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, [json!(0), json!(1), json!(2), json!(3), json!(4)]);
    assert_eq!(
        up.max_in_flight(),
        5,
        "all five calls were in flight at once"
    );
}

#[tokio::test]
async fn mixed_batch_answers_calls_and_errors_but_not_notifications() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let a = gw
        .rpc(&json!([
            {"jsonrpc": "2.0", "id": "a", "method": "m"},
            {"jsonrpc": "2.0", "method": "n"},
            {"jsonrpc": "1.0", "id": "b", "method": "m"},
            {"jsonrpc": "2.0", "id": "c", "method": "missing"}
        ]))
        .await;
    assert_eq!(a.status, 200);
    let answers = a.json();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0]["id"], "a");
    assert_eq!(answers[1]["id"], "b");
    assert_eq!(answers[1]["error"]["code"], -32600);
    assert_eq!(answers[2]["error"]["code"], -32001);
}

#[tokio::test]
async fn deprecation_and_sunset_only_on_legacy_answers() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("old", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "old")
        .legacy(Legacy {
            deprecation: true,
            sunset: "2027-06-30".into(),
            ..Legacy::default()
        })
        .start()
        .await;
    let l = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "x"}))
        .await;
    assert_eq!(l.header("deprecation").as_deref(), Some("true"));
    assert_eq!(
        l.header("sunset").as_deref(),
        Some("Wed, 30 Jun 2027 00:00:00 GMT")
    );
    let j = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "x"}))
        .await;
    assert_eq!(j.header("deprecation"), None);
    assert_eq!(j.header("sunset"), None);
}

#[tokio::test]
async fn metrics_show_who_still_speaks_legacy() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("metrics-up", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "metrics-up")
        .start()
        .await;
    gw.rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "metered.op"}))
        .await;
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "metered.op"}))
        .await;
    let m = gw.get("/metrics").await;
    assert_eq!(m.status, 200);
    for dialect in ["legacy", "jsonrpc"] {
        let needle = "wiregate_requests_total{client_dialect=\"".to_owned()
            + dialect
            + "\",upstream=\"metrics-up\",method=\"metered.op\",outcome=\"ok\"} 1";
        assert!(m.text.contains(&needle), "{needle} not in\n{}", m.text);
    }
    assert!(m.text.contains("wiregate_request_duration_seconds_bucket"));
}

#[tokio::test]
async fn health_and_readiness() {
    let up = legacy_echo().run().await;
    let ok = gateway()
        .upstream("old", &up.url(), Dialect::Legacy, 2000)
        .start()
        .await;
    assert_eq!(ok.get("/healthz").await.status, 200);
    let r = ok.get("/readyz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["ready"], true);
    assert_eq!(r.json()["upstreams"], json!({"old": "reachable"}));
    let endpoint = format!("127.0.0.1:{}", up.addr.port());
    assert_eq!(
        r.json()["endpoints"]["old"],
        json!([{"endpoint": endpoint, "state": "healthy", "in_flight": 0, "errors": 0}])
    );
    let dead = support::dead_url().await;
    let down = gateway()
        .upstream("gone", &dead, Dialect::Legacy, 2000)
        .start()
        .await;
    let r = down.get("/readyz").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["upstreams"]["gone"], "unreachable");
    assert_eq!(r.json()["endpoints"]["gone"][0]["state"], "unreachable");
}

#[tokio::test]
async fn h2c_clients_are_served() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let resp = h2
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["result"]["op"], "m");
}

#[tokio::test]
async fn request_ids_are_echoed_or_made_and_content_types_matched_exactly() {
    let gw = gateway().start().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "_cleveragents/health/check"});
    let a = gw.rpc_with(&call, &[("x-request-id", "trace-42")]).await;
    assert_eq!(a.header("x-request-id").as_deref(), Some("trace-42"));
    let made = gw.rpc(&call).await.header("x-request-id").unwrap();
    assert!(uuid::Uuid::parse_str(&made).is_ok(), "{made}");
    // Made ids are random (version 4) UUIDs, a new one for every call.
    let more: std::collections::HashSet<String> = futures_util::future::join_all(
        (0..50).map(|_| async { gw.rpc(&call).await.header("x-request-id").unwrap() }),
    )
    .await
    .into_iter()
    .chain([made])
    .collect();
    assert_eq!(more.len(), 51, "every call has its own id");
    for id in &more {
        assert_eq!(
            uuid::Uuid::parse_str(id).unwrap().get_version_num(),
            4,
            "{id}"
        );
    }
    let long = "x".repeat(129);
    let replaced = gw
        .rpc_with(&call, &[("x-request-id", long.as_str())])
        .await
        .header("x-request-id")
        .unwrap();
    assert!(uuid::Uuid::parse_str(&replaced).is_ok(), "{replaced}");
    // POST /rpc is answered before routing; other methods on it still get the router's 405.
    let get = gw.get("/rpc").await;
    assert_eq!(get.status, 405);
    assert_eq!(gw.get("/rpc/x").await.status, 404);
    for (ct, ok) in [
        ("application/json", true),
        ("Application/JSON; charset=utf-8", true),
        ("application/vnd.api+json", true),
        ("application/+json", false),
        ("text/json", false),
        ("application/jsonp", false),
        ("application", false),
    ] {
        let a = gw.post(ct, call.to_string().into_bytes(), &[]).await;
        assert_eq!(a.status == 200, ok, "{ct}: {}", a.status);
    }
}

/// Ids that no `f64` or `i64` can hold, sent as text and compared as text.
const IDS: [&str; 6] = [
    "123456789012345678901234567890",
    "18446744073709551616",
    "1e2",
    "1.50",
    "-0",
    "-1.0E+400",
];

#[tokio::test]
async fn ids_come_back_with_every_digit_through_both_dialects_and_batches() {
    for (up, dialect) in [
        (legacy_echo().run().await, Dialect::Legacy),
        (jsonrpc_echo().run().await, Dialect::Jsonrpc),
    ] {
        let gw = fronting(&up, dialect).await;
        for id in IDS {
            let single = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo","params":{{}}}}"#);
            let a = gw.post("application/json", single.into_bytes(), &[]).await;
            assert!(
                a.text.ends_with(&format!(r#""id":{id}}}"#)),
                "{dialect:?} {id}: {}",
                a.text
            );
            let batch = format!(
                r#"[{{"jsonrpc":"2.0","id":{id},"method":"echo"}},{{"jsonrpc":"2.0","id":{id},"method":"missing"}}]"#
            );
            let a = gw.post("application/json", batch.into_bytes(), &[]).await;
            assert_eq!(
                a.text.matches(&format!(r#""id":{id}}}"#)).count(),
                2,
                "{dialect:?} {id}: {}",
                a.text
            );
        }
    }
    // A call the gateway refuses answers under the same id text.
    let gw = gateway().start().await;
    let a = gw
        .post(
            "application/json",
            br#"{"jsonrpc":"2.0","id":1e2,"method":""}"#.to_vec(),
            &[],
        )
        .await;
    assert!(a.text.ends_with(r#""id":1e2}"#), "{}", a.text);
}
