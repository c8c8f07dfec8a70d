//! A small legacy agent server, for `--demo` and `examples/legacy_upstream.rs`.
//!
//! It speaks the legacy envelope only and knows a few operations: `session.create`,
//! `_cleveragents/plan/status` (plan `P1` exists; any other is `NOT_FOUND`), `echo`, and `slow`
//! (sleeps `params.ms`, 1500 by default, at most 30 000).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::wire::jsonrpc::to_raw;
use crate::wire::legacy::{code, LegacyError, LegacyRequest, LegacyResponse, VERSION};

/// Starts the demo server on `addr`; returns the bound address.
pub async fn legacy_upstream(addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route("/a2a", post(handle));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((bound, task))
}

async fn handle(body: Bytes) -> axum::Json<LegacyResponse> {
    let started = Instant::now();
    let mut resp = match serde_json::from_slice::<LegacyRequest>(&body) {
        Err(e) => LegacyResponse::error(
            String::new(),
            LegacyError::new(code::VALIDATION_ERROR, e.to_string()),
        ),
        Ok(req) if req.a2a_version != VERSION => LegacyResponse::error(
            req.request_id,
            LegacyError::new(code::VERSION_MISMATCH, "this server speaks a2a_version 1.0"),
        ),
        Ok(req) => {
            let params: Value = serde_json::from_str(req.params.get()).unwrap_or(Value::Null);
            match operate(&req.operation, &params).await {
                Ok(data) => LegacyResponse::success(req.request_id, Some(to_raw(&data))),
                Err(e) => LegacyResponse::error(req.request_id, e),
            }
        }
    };
    resp.timing_ms = Some((started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0);
    axum::Json(resp)
}

async fn operate(op: &str, params: &Value) -> Result<Value, LegacyError> {
    match op {
        "session.create" => Ok(json!({"session_id": uuid::Uuid::new_v4().to_string()})),
        "_cleveragents/plan/status" => match params.get("plan_id").and_then(Value::as_str) {
            Some("P1") => Ok(json!({"plan_id": "P1", "state": "running", "phase": "apply"})),
            Some(other) => Err(LegacyError {
                code: code::NOT_FOUND.into(),
                message: format!("plan {other} does not exist"),
                details: Some(json!({"plan_id": other})),
            }),
            None => Err(LegacyError::new(
                code::VALIDATION_ERROR,
                "params.plan_id is required",
            )),
        },
        "echo" => Ok(params.clone()),
        "slow" => {
            let ms = params
                .get("ms")
                .and_then(Value::as_u64)
                .unwrap_or(1500)
                .min(30_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!({"slept_ms": ms}))
        }
        other => Err(LegacyError::new(
            code::OPERATION_NOT_FOUND,
            format!("operation {other} is not known"),
        )),
    }
}
