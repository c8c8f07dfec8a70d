//! The translated calls the soak and the chaos soak send (JSON-RPC calls, a batch, a legacy
//! envelope) to `examples/legacy_upstream` through the gateway, and how each answer is checked.

use serde_json::{json, Value};

/// What a call's answer was.
pub enum Answer {
    Ok,
    /// A JSON-RPC or legacy error object, as JSON text.
    RpcError(String),
    /// An answer that is not the one the call must get.
    Wrong(String),
}

/// Checks the answer `got` to call `n` of `kind` (sent as `body`).
pub fn check_call(kind: u64, n: u64, body: &Value, got: &Value) -> Answer {
    let rpc_err = |v: &Value| v.get("error").map(|e| Answer::RpcError(e.to_string()));
    match kind {
        0 => {
            if let Some(e) = rpc_err(got) {
                return e;
            }
            if got["id"] == json!(n) && got["result"]["plan_id"] == "P1" {
                Answer::Ok
            } else {
                Answer::Wrong(format!("plan/status answer {got}"))
            }
        }
        1 => {
            if let Some(e) = rpc_err(got) {
                return e;
            }
            if got["id"] == body["id"] && got["result"] == body["params"] {
                Answer::Ok
            } else {
                Answer::Wrong(format!("echo answer {got}"))
            }
        }
        2 => {
            let Some(items) = got.as_array() else {
                return rpc_err(got)
                    .unwrap_or_else(|| Answer::Wrong(format!("batch answer {got}")));
            };
            if items.len() != 2 {
                return Answer::Wrong(format!("batch of 2 calls + 1 notification answered {got}"));
            }
            for it in items {
                if let Some(e) = rpc_err(it) {
                    return e;
                }
            }
            if items[0]["id"] == body[0]["id"]
                && items[0]["result"] == body[0]["params"]
                && items[1]["id"] == body[1]["id"]
                && items[1]["result"]["session_id"].is_string()
            {
                Answer::Ok
            } else {
                Answer::Wrong(format!("batch answer {got}"))
            }
        }
        _ => {
            if got["status"] == "error" {
                return Answer::RpcError(got["error"].to_string());
            }
            if got["status"] == "success"
                && got["request_id"] == body["request_id"]
                && got["data"] == body["params"]
            {
                Answer::Ok
            } else {
                Answer::Wrong(format!("legacy answer {got}"))
            }
        }
    }
}

/// Call `n` of `kind` (0..3) from worker `w`.
pub fn call_body(kind: u64, w: usize, n: u64) -> Value {
    match kind {
        0 => json!({"jsonrpc": "2.0", "id": n, "method": "_cleveragents/plan/status",
                    "params": {"plan_id": "P1"}}),
        1 => json!({"jsonrpc": "2.0", "id": format!("w{w}-{n}"), "method": "echo",
                    "params": {"n": n, "text": "soak ü € \u{1F600}", "list": [1, 2.5, null, true]}}),
        2 => json!([
            {"jsonrpc": "2.0", "id": format!("b{w}-{n}"), "method": "echo", "params": {"n": n}},
            {"jsonrpc": "2.0", "id": n, "method": "session.create"},
            {"jsonrpc": "2.0", "method": "echo", "params": {"note": "a notification"}}
        ]),
        _ => json!({"a2a_version": "1.0", "request_id": format!("r{w}-{n}"), "operation": "echo",
                    "params": {"n": n, "legacy": true}, "auth": null}),
    }
}
