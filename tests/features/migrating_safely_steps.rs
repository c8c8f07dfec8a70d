//! Steps for `features/migrating_safely.feature`: real upstreams of both dialects, a real
//! gateway on loopback, and its `/migration` report. (`a gateway routing "G" to "U"` is
//! `migration_steps.rs`'s.)

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use cucumber::{given, then, when};
use serde_json::{json, Value};
use wiregate::config::{Dialect, Rollback, Route, SplitSide};

use crate::support::{gateway, upstream};
use crate::World;

/// What the story keeps between steps.
#[derive(Debug, Default)]
pub struct Story {
    /// The answers callers got.
    answers: Vec<Value>,
    /// Per caller token, the servers (`via`) that answered it.
    served: HashMap<String, Vec<String>>,
}

#[given(expr = "a legacy plan server named {string}")]
async fn legacy_plans(w: &mut World, name: String) {
    let up = upstream(|req| {
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"], "status": "success",
            "data": {"plan": "P1", "state": "running", "updated_at": "2026-01-01T00:00:00Z", "via": "legacy"}});
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    w.upstreams.push((name, up, Dialect::Legacy));
}

/// Answers as the legacy one does (but for its own `updated_at`, and `via`, which the
/// comparisons ignore), with `state` from `params.shadow_state` when given.
#[given(expr = "a JSON-RPC plan server named {string}")]
async fn jsonrpc_plans(w: &mut World, name: String) {
    let up = upstream(|req| {
        let state = req["params"]["shadow_state"].as_str().unwrap_or("running");
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
            "result": {"plan": "P1", "state": state, "updated_at": "2026-06-01T00:00:00Z", "via": "jsonrpc"}});
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    w.upstreams.push((name, up, Dialect::Jsonrpc));
}

#[given(expr = "a broken JSON-RPC server named {string}")]
async fn broken(w: &mut World, name: String) {
    let up = upstream(|req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32603, "message": "internal error"}});
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    w.upstreams.push((name, up, Dialect::Jsonrpc));
}

async fn start(w: &mut World, route: Route) {
    let mut b = gateway();
    for (name, up, dialect) in &w.upstreams {
        b = b.upstream(name, &up.url(), *dialect, 5000);
    }
    w.gateway = Some(b.with(|c| c.routes.push(route)).start().await);
}

#[given(
    regex = r#"^a gateway routing "([^"]*)" to "([^"]*)", shadowed to "([^"]*)" ignoring "([^"]*)"$"#
)]
async fn shadowing(w: &mut World, glob: String, primary: String, shadow: String, ignore: String) {
    let route = Route {
        name: "plans".into(),
        shadow,
        // `via` names the server in these stand-ins; a real pair would not carry it.
        shadow_ignore: vec![ignore, "/result/via".into()],
        ..Route::to(&[&glob], &primary)
    };
    start(w, route).await;
}

#[given(
    regex = r#"^a gateway splitting "([^"]*)" between "([^"]*)" weight (\d+) and "([^"]*)" weight (\d+)$"#
)]
async fn splitting(w: &mut World, glob: String, a: String, wa: u32, b: String, wb: u32) {
    start(w, split_route(&glob, (a, wa), (b, wb))).await;
}

fn split_route(glob: &str, a: (String, u32), b: (String, u32)) -> Route {
    Route {
        name: "plans".into(),
        methods: vec![glob.to_owned()],
        split: [a, b]
            .into_iter()
            .map(|(upstream, weight)| SplitSide { upstream, weight })
            .collect(),
        ..Route::default()
    }
}

#[given(
    regex = r#"^a gateway splitting "([^"]*)" between "([^"]*)" weight (\d+) and "([^"]*)" weight (\d+), rolled back past (\d+) percent errors over (\d+) calls$"#
)]
// cucumber hands each capture over as an argument.
#[allow(clippy::too_many_arguments)]
async fn splitting_with_rollback(
    w: &mut World,
    glob: String,
    a: String,
    wa: u32,
    b: String,
    wb: u32,
    percent: u32,
    calls: u64,
) {
    let mut route = split_route(&glob, (a, wa), (b, wb));
    route.rollback = Some(Rollback {
        max_error_rate: f64::from(percent) / 100.0,
        min_calls: calls,
        ..Rollback::default()
    });
    start(w, route).await;
}

async fn call(w: &mut World, token: &str, method: &str, params: Value) -> Value {
    let gw = w.gateway.as_ref().unwrap();
    let a = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await
        .json();
    if let Some(via) = a["result"]["via"].as_str() {
        w.safely
            .served
            .entry(token.to_owned())
            .or_default()
            .push(via.to_owned());
    }
    w.safely.answers.push(a.clone());
    a
}

#[when(regex = r#"^a caller calls "([^"]*)"$"#)]
async fn one_call(w: &mut World, method: String) {
    call(w, "someone", &method, json!({})).await;
}

#[when(regex = r#"^a caller calls "([^"]*)" for which the new server answers state "([^"]*)"$"#)]
async fn differing_call(w: &mut World, method: String, state: String) {
    call(w, "someone", &method, json!({"shadow_state": state})).await;
}

#[when(regex = r#"^(\d+) callers each call "([^"]*)" (once|twice)$"#)]
async fn many_calls(w: &mut World, callers: usize, method: String, times: String) {
    let times = if times == "twice" { 2 } else { 1 };
    for i in 0..callers {
        for _ in 0..times {
            call(w, &format!("caller-{i}"), &method, json!({})).await;
        }
    }
}

#[when(regex = r#"^a legacy client with token "([^"]*)" calls "([^"]*)" (\d+) times$"#)]
async fn legacy_calls(w: &mut World, token: String, op: String, n: usize) {
    let gw = w.gateway.as_ref().unwrap();
    for _ in 0..n {
        let a = gw
            .rpc(
                &json!({"a2a_version": "1.0", "request_id": "r", "operation": op, "params": {},
                "auth": {"scheme": "bearer", "token": token}}),
            )
            .await
            .json();
        assert_eq!(a["status"], "success", "{a}");
    }
}

#[when(regex = r#"^a JSON-RPC client with token "([^"]*)" calls "([^"]*)" once$"#)]
async fn jsonrpc_call(w: &mut World, token: String, method: String) {
    call(w, &token, &method, json!({})).await;
}

#[then(regex = r#"^every caller got state "([^"]*)" from the "([^"]*)" server$"#)]
fn every_caller_got(w: &mut World, state: String, via: String) {
    assert!(!w.safely.answers.is_empty());
    for a in &w.safely.answers {
        assert_eq!(a["result"]["state"], state.as_str(), "{a}");
        assert_eq!(a["result"]["via"], via.as_str(), "{a}");
    }
}

async fn report(w: &World) -> Value {
    let a = w.gateway.as_ref().unwrap().get("/migration").await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json()
}

#[then(regex = r#"^the migration report counts (\d+) match and (\d+) difference at "([^"]*)"$"#)]
async fn counts_shadows(w: &mut World, matches: u64, diffs: u64, pointer: String) {
    // The shadows run after the callers' answers: wait for them to be compared.
    let mut shadow = Value::Null;
    for _ in 0..200 {
        shadow = report(w).await["routes"][0]["shadow"].clone();
        if shadow["match"].as_u64().unwrap() + shadow["diff"].as_u64().unwrap() >= matches + diffs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shadow["match"], matches, "{shadow}");
    assert_eq!(shadow["diff"], diffs, "{shadow}");
    assert_eq!(
        shadow["last_diffs"][0]["pointers"][0]["pointer"],
        pointer.as_str()
    );
}

#[then(
    regex = r#"^between (\d+) and (\d+) percent of the callers were served by the "([^"]*)" server$"#
)]
fn share(w: &mut World, low: usize, high: usize, via: String) {
    let callers = w.safely.served.len();
    let on = w.safely.served.values().filter(|v| v[0] == via).count();
    assert!(
        on * 100 >= low * callers && on * 100 <= high * callers,
        "{on} of {callers} callers served by {via}"
    );
}

#[then("every caller was served by one server only")]
fn sticky(w: &mut World) {
    for (token, vias) in &w.safely.served {
        assert!(vias.iter().all(|v| *v == vias[0]), "{token}: {vias:?}");
    }
}

#[then(regex = r#"^the migration report counts (\d+) calls over the two sides$"#)]
async fn side_calls(w: &mut World, total: u64) {
    let r = report(w).await;
    let sides = r["routes"][0]["sides"].as_array().unwrap().clone();
    let on_new = w
        .safely
        .served
        .values()
        .flatten()
        .filter(|v| *v == "jsonrpc")
        .count() as u64;
    assert_eq!(sides[1]["calls"], on_new);
    assert_eq!(
        sides[0]["calls"].as_u64().unwrap() + sides[1]["calls"].as_u64().unwrap(),
        total
    );
}

#[then(regex = r#"^the migration report shows "([^"]*)" rolled back because it "([^"]*)"$"#)]
async fn rolled_back(w: &mut World, upstream: String, why: String) {
    let r = report(w).await;
    let route = &r["routes"][0];
    assert_eq!(route["rollback"]["state"], "rolled_back", "{route}");
    let reason = route["rollback"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("{upstream}: ")) && reason.contains(&why),
        "{reason}"
    );
    assert_eq!(route["sides"][1]["effective_weight"], 0);
}

#[then(regex = r#"^now every caller is served by the "([^"]*)" server$"#)]
async fn all_on(w: &mut World, via: String) {
    let tokens: Vec<String> = w.safely.served.keys().cloned().collect();
    assert!(!tokens.is_empty());
    for token in tokens {
        let a = call(w, &token, "plan.get", json!({})).await;
        assert_eq!(a["result"]["via"], via.as_str(), "{a}");
    }
}

#[then(regex = r#"^the migration report shows a caller with (\d+) "([^"]*)" calls? of "([^"]*)"$"#)]
async fn caller_row(w: &mut World, calls: u64, dialect: String, method: String) {
    let r = report(w).await;
    let rows = r["callers"]["tracked"].as_array().unwrap();
    assert!(
        rows.iter().any(|c| c["calls"] == calls
            && c["dialects"] == json!({dialect.as_str(): calls})
            && c["methods"] == json!({method.as_str(): calls})),
        "no such caller in {rows:?}"
    );
}

#[then("no token appears in the migration report")]
async fn no_token(w: &mut World) {
    let text = w.gateway.as_ref().unwrap().get("/migration").await.text;
    assert!(!text.contains("-token"), "{text}");
}
