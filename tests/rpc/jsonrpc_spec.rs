//! Every example of the JSON-RPC 2.0 specification's section 7, sent through the gateway to a
//! JSON-RPC upstream that implements the example methods.

use crate::support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{upstream, TestGateway};
use wiregate::config::Dialect;

/// `subtract`, `sum`, `get_data`; notifications `update`, `notify_hello`, `notify_sum`,
/// `foobar`; anything else is -32601.
async fn spec_gateway() -> TestGateway {
    let up = upstream(|req| {
        if req.get("id").is_none() {
            return (StatusCode::NO_CONTENT, String::new());
        }
        let p = &req["params"];
        let result = match req["method"].as_str().unwrap_or_default() {
            "subtract" => Some(match p {
                Value::Array(a) => json!(a[0].as_i64().unwrap() - a[1].as_i64().unwrap()),
                _ => json!(p["minuend"].as_i64().unwrap() - p["subtrahend"].as_i64().unwrap()),
            }),
            "sum" => Some(json!(p.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).sum::<i64>())),
            "get_data" => Some(json!(["hello", 5])),
            _ => None,
        };
        let body = match result {
            Some(r) => json!({"jsonrpc": "2.0", "result": r, "id": req["id"]}),
            None => json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": req["id"]}),
        };
        (StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    support::fronting(&up, Dialect::Jsonrpc).await
}

async fn exchange(gw: &TestGateway, request: &str) -> (u16, Option<Value>) {
    let a = gw
        .post("application/json", request.as_bytes().to_vec(), &[])
        .await;
    (a.status, (!a.text.is_empty()).then(|| a.json()))
}

fn without_messages(mut v: Value) -> Value {
    // The specification's examples elide the message text; compare everything else.
    let strip = |r: &mut Value| {
        if let Some(e) = r.get_mut("error").and_then(Value::as_object_mut) {
            e.remove("message");
            e.remove("data");
        }
    };
    match &mut v {
        Value::Array(a) => a.iter_mut().for_each(strip),
        other => strip(other),
    }
    v
}

#[tokio::test]
async fn positional_parameters() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(
        &gw,
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#,
    )
    .await;
    assert_eq!(r.unwrap(), json!({"jsonrpc": "2.0", "result": 19, "id": 1}));
    let (_, r) = exchange(
        &gw,
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#,
    )
    .await;
    assert_eq!(
        r.unwrap(),
        json!({"jsonrpc": "2.0", "result": -19, "id": 2})
    );
}

#[tokio::test]
async fn named_parameters() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(&gw, r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#).await;
    assert_eq!(r.unwrap(), json!({"jsonrpc": "2.0", "result": 19, "id": 3}));
    let (_, r) = exchange(&gw, r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#).await;
    assert_eq!(r.unwrap(), json!({"jsonrpc": "2.0", "result": 19, "id": 4}));
}

#[tokio::test]
async fn notifications() {
    let gw = spec_gateway().await;
    assert_eq!(
        exchange(
            &gw,
            r#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#
        )
        .await,
        (204, None)
    );
    assert_eq!(
        exchange(&gw, r#"{"jsonrpc": "2.0", "method": "foobar"}"#).await,
        (204, None)
    );
}

#[tokio::test]
async fn non_existent_method() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(&gw, r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#).await;
    assert_eq!(
        without_messages(r.unwrap()),
        json!({"jsonrpc": "2.0", "error": {"code": -32601}, "id": "1"})
    );
}

#[tokio::test]
async fn invalid_json() {
    let gw = spec_gateway().await;
    let (s, r) = exchange(
        &gw,
        r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#,
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        without_messages(r.unwrap()),
        json!({"jsonrpc": "2.0", "error": {"code": -32700}, "id": null})
    );
}

#[tokio::test]
async fn invalid_request_object() {
    let gw = spec_gateway().await;
    let (s, r) = exchange(&gw, r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#).await;
    assert_eq!(s, 400);
    assert_eq!(
        without_messages(r.unwrap()),
        json!({"jsonrpc": "2.0", "error": {"code": -32600}, "id": null})
    );
}

#[tokio::test]
async fn batch_invalid_json() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(
        &gw,
        r#"[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]"#,
    )
    .await;
    assert_eq!(
        without_messages(r.unwrap()),
        json!({"jsonrpc": "2.0", "error": {"code": -32700}, "id": null})
    );
}

#[tokio::test]
async fn empty_array() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(&gw, "[]").await;
    assert_eq!(
        without_messages(r.unwrap()),
        json!({"jsonrpc": "2.0", "error": {"code": -32600}, "id": null})
    );
}

#[tokio::test]
async fn invalid_batch_but_not_empty() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(&gw, "[1]").await;
    assert_eq!(
        without_messages(r.unwrap()),
        json!([{"jsonrpc": "2.0", "error": {"code": -32600}, "id": null}])
    );
}

#[tokio::test]
async fn invalid_batch() {
    let gw = spec_gateway().await;
    let (_, r) = exchange(&gw, "[1,2,3]").await;
    let one = json!({"jsonrpc": "2.0", "error": {"code": -32600}, "id": null});
    assert_eq!(without_messages(r.unwrap()), json!([one, one, one]));
}

#[tokio::test]
async fn rpc_call_batch() {
    let gw = spec_gateway().await;
    let (s, r) = exchange(
        &gw,
        r#"[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]"#,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        without_messages(r.unwrap()),
        json!([
            {"jsonrpc": "2.0", "result": 7, "id": "1"},
            {"jsonrpc": "2.0", "result": 19, "id": "2"},
            {"jsonrpc": "2.0", "error": {"code": -32600}, "id": null},
            {"jsonrpc": "2.0", "error": {"code": -32601}, "id": "5"},
            {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
        ])
    );
}

#[tokio::test]
async fn rpc_call_batch_all_notifications() {
    let gw = spec_gateway().await;
    let r = exchange(
        &gw,
        r#"[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]"#,
    )
    .await;
    assert_eq!(r, (204, None));
}
