//! Steps for `features/migration.feature`: real upstreams and a real gateway on loopback.

use cucumber::{given, then, when};
use serde_json::json;
use wiregate::config::Dialect;

use crate::support::{gateway, jsonrpc_echo, legacy_echo};
use crate::World;

#[given(expr = "a legacy upstream named {string}")]
async fn legacy_upstream(w: &mut World, name: String) {
    w.upstreams
        .push((name, legacy_echo().run().await, Dialect::Legacy));
}

#[given(expr = "a JSON-RPC upstream named {string}")]
async fn jsonrpc_upstream(w: &mut World, name: String) {
    w.upstreams
        .push((name, jsonrpc_echo().run().await, Dialect::Jsonrpc));
}

async fn start(w: &mut World, routes: &[(&str, &str)]) {
    let mut b = gateway();
    for (name, up, dialect) in &w.upstreams {
        b = b.upstream(name, &up.url(), *dialect, 2000);
    }
    for (glob, up) in routes {
        b = b.route(&[glob], up);
    }
    w.gateway = Some(b.start().await);
}

#[given(regex = r#"^a gateway routing "([^"]*)" to "([^"]*)"$"#)]
async fn routing(w: &mut World, glob: String, up: String) {
    start(w, &[(&glob, &up)]).await;
}

#[given(regex = r#"^a gateway routing "([^"]*)" to "([^"]*)" and "([^"]*)" to "([^"]*)"$"#)]
async fn routing_two(w: &mut World, g1: String, u1: String, g2: String, u2: String) {
    start(w, &[(&g1, &u1), (&g2, &u2)]).await;
}

#[when(regex = r#"^a JSON-RPC client calls "([^"]*)" with id (\d+)$"#)]
async fn jsonrpc_call(w: &mut World, method: String, id: u64) {
    let gw = w.gateway.as_ref().unwrap();
    w.answer = Some(
        gw.rpc(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}))
            .await,
    );
}

#[when(regex = r#"^a legacy client calls "([^"]*)" with request_id "([^"]*)"$"#)]
async fn legacy_call(w: &mut World, op: String, rid: String) {
    let gw = w.gateway.as_ref().unwrap();
    w.answer = Some(
        gw.rpc(&json!({"a2a_version": "1.0", "request_id": rid, "operation": op, "params": {}, "auth": null}))
            .await,
    );
}

#[then(regex = r#"^the JSON-RPC client gets a result for id (\d+) served by "([^"]*)"$"#)]
fn jsonrpc_result(w: &mut World, id: u64, via: String) {
    let a = w.answer.as_ref().unwrap().json();
    assert_eq!(a["jsonrpc"], "2.0");
    assert_eq!(a["id"], id);
    assert_eq!(a["result"]["via"], via.as_str(), "{a}");
}

#[then(regex = r#"^the legacy client gets a success for "([^"]*)" served by "([^"]*)"$"#)]
fn legacy_success(w: &mut World, rid: String, via: String) {
    let a = w.answer.as_ref().unwrap().json();
    assert_eq!(a["a2a_version"], "1.0");
    assert_eq!(a["request_id"], rid.as_str());
    assert_eq!(a["status"], "success");
    assert_eq!(a["data"]["via"], via.as_str(), "{a}");
}

#[then(regex = r#"^the JSON-RPC client gets error code (-?\d+) for id (\d+)$"#)]
fn jsonrpc_error(w: &mut World, code: i64, id: u64) {
    let a = w.answer.as_ref().unwrap().json();
    assert_eq!(a["id"], id);
    assert_eq!(a["error"]["code"], code, "{a}");
    assert!(a.get("result").is_none());
}

#[then(regex = r#"^the legacy client gets error code "([^"]*)" for "([^"]*)"$"#)]
fn legacy_error(w: &mut World, code: String, rid: String) {
    let a = w.answer.as_ref().unwrap().json();
    assert_eq!(a["request_id"], rid.as_str());
    assert_eq!(a["status"], "error");
    assert_eq!(a["error"]["code"], code.as_str(), "{a}");
}

#[then(
    regex = r#"^the metrics count 1 legacy call and 1 JSON-RPC call of "([^"]*)" to "([^"]*)"$"#
)]
async fn metrics(w: &mut World, method: String, up: String) {
    let text = w.gateway.as_ref().unwrap().get("/metrics").await.text;
    for dialect in ["legacy", "jsonrpc"] {
        let needle = format!(
            "wiregate_requests_total{{client_dialect=\"{dialect}\",upstream=\"{up}\",method=\"{method}\",outcome=\"ok\"}} 1"
        );
        assert!(text.contains(&needle), "{needle} not in:\n{text}");
    }
}
