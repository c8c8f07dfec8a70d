//! A small JSON-RPC 2.0 agent server: the migrated counterpart of the demo legacy server, for
//! `--demo` (a split and a shadow) and `examples/jsonrpc_upstream.rs`.
//!
//! It knows the legacy server's operations as methods and answers them as a rewrite would:
//! `session.create` and `echo` alike, `_cleveragents/plan/status` with the phase spelled
//! `"applying"` (the legacy server says `"apply"`) and an `updated_at` of its own, so a shadow
//! comparison has something to find; `slow` sleeps `params.ms`. With `fail_rate` above 0 that
//! fraction of calls fails with -32603, to watch a rollback.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::wire::jsonrpc::code;

/// How the server misbehaves, to watch a rollback.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Fraction of calls (0.0–1.0) answered with -32603.
    pub fail_rate: f64,
}

struct Server {
    faults: Faults,
    calls: AtomicU64,
}

/// Starts the server on `addr` (`POST /rpc`); returns the bound address.
pub async fn jsonrpc_upstream(
    addr: SocketAddr,
    faults: Faults,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let state = Arc::new(Server {
        faults,
        calls: AtomicU64::new(0),
    });
    let app = axum::Router::new()
        .route("/rpc", post(handle))
        .with_state(state);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((bound, task))
}

async fn handle(State(s): State<Arc<Server>>, body: Bytes) -> axum::response::Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        let e = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": code::PARSE_ERROR, "message": "Parse error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
    };
    let Some(id) = req.get("id").cloned() else {
        // A notification: nothing to answer.
        return StatusCode::NO_CONTENT.into_response();
    };
    let n = s.calls.fetch_add(1, Ordering::Relaxed);
    let method = req["method"].as_str().unwrap_or_default();
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    // Every 1/fail_rate-th call fails, evenly spread.
    let failing = s.faults.fail_rate > 0.0
        && ((n + 1) as f64 * s.faults.fail_rate).floor() > (n as f64 * s.faults.fail_rate).floor();
    let outcome = match failing {
        true => Err(json!({"code": code::INTERNAL_ERROR, "message": "injected failure"})),
        false => operate(method, &params).await,
    };
    let body = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    axum::Json(body).into_response()
}

async fn operate(method: &str, params: &Value) -> Result<Value, Value> {
    match method {
        "session.create" => Ok(json!({"session_id": uuid::Uuid::new_v4().to_string()})),
        "_cleveragents/plan/status" => match params.get("plan_id").and_then(Value::as_str) {
            Some("P1") => Ok(
                json!({"plan_id": "P1", "state": "running", "phase": "applying",
                "updated_at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()}),
            ),
            Some(other) => Err(
                json!({"code": -32001, "message": format!("plan {other} not found"),
                "data": {"plan_id": other}}),
            ),
            None => {
                Err(json!({"code": code::INVALID_PARAMS, "message": "params.plan_id is required"}))
            }
        },
        "echo" => Ok(params.clone()),
        "slow" => Ok(super::slow(params).await),
        other => Err(
            json!({"code": code::METHOD_NOT_FOUND, "message": format!("Method not found: {other}")}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_like_the_legacy_server_with_its_own_differences() {
        assert_eq!(operate("echo", &json!({"a": 1})).await, Ok(json!({"a": 1})));
        let p = operate("_cleveragents/plan/status", &json!({"plan_id": "P1"}))
            .await
            .unwrap();
        assert_eq!(
            (p["state"].as_str(), p["phase"].as_str()),
            (Some("running"), Some("applying"))
        );
        let e = operate("_cleveragents/plan/status", &json!({"plan_id": "x"}))
            .await
            .unwrap_err();
        assert_eq!(e["code"], -32001);
        assert_eq!(
            operate("nope", &json!({})).await.unwrap_err()["code"],
            -32601
        );
    }
}
