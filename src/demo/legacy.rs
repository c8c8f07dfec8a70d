//! A small legacy agent server, for `--demo` and `examples/legacy_upstream.rs`.
//!
//! It speaks the legacy envelope only and knows a few operations: `session.create`,
//! `_cleveragents/plan/status` (plan `P1` exists; any other is `NOT_FOUND`), `echo`, and `slow`
//! (sleeps `params.ms`, 1500 by default, at most 30 000). `GET /events` is its domain-event feed
//! (NDJSON, `?after=ID` resumes): a new plan's life cycle every few seconds. `GET /health`
//! answers 200, for a gateway's active health checks (`[upstreams.health] path = "/health"`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::wire::jsonrpc::to_raw;
use crate::wire::legacy::{code, LegacyError, LegacyRequest, LegacyResponse, VERSION};

/// Starts the demo server on `addr`; returns the bound address.
pub async fn legacy_upstream(addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let feed = Arc::new(EventFeed::start());
    tokio::spawn(generate(feed.clone()));
    let app = axum::Router::new()
        .route("/a2a", post(handle))
        .route("/health", get(|| async { "ok" }))
        .route("/events", get(events).with_state(feed));
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
        "slow" => Ok(super::slow(params).await),
        other => Err(LegacyError::new(
            code::OPERATION_NOT_FOUND,
            format!("operation {other} is not known"),
        )),
    }
}

/// The life cycle each demo plan goes through: (event type, data).
const LIFE_CYCLE: [(&str, &str); 6] = [
    ("PLAN_CREATED", r#"{"state": "submitted"}"#),
    (
        "plan.phase_changed",
        r#"{"state": "working", "phase": "planning"}"#,
    ),
    (
        "plan.state_changed",
        r#"{"state": "working", "phase": "applying"}"#,
    ),
    (
        "checkpoint.created",
        r#"{"checkpoint": "cp-1", "files": 3}"#,
    ),
    ("resource.modified", r#"{"resource": "src/main.rs"}"#),
    ("plan.applied", r#"{"state": "completed", "final": true}"#),
];

/// Events kept for `?after=` resumption.
const FEED_HISTORY: usize = 1000;

struct EventFeed {
    history: Mutex<std::collections::VecDeque<(u64, String)>>,
    live: tokio::sync::broadcast::Sender<(u64, String)>,
}

impl EventFeed {
    fn start() -> Self {
        EventFeed {
            history: Mutex::new(std::collections::VecDeque::new()),
            live: tokio::sync::broadcast::channel(256).0,
        }
    }

    fn publish(&self, id: u64, line: String) {
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if h.len() == FEED_HISTORY {
            h.pop_front();
        }
        h.push_back((id, line.clone()));
        let _ = self.live.send((id, line));
    }
}

async fn generate(feed: Arc<EventFeed>) {
    let mut id = 0u64;
    for plan in 1u64.. {
        for (event_type, data) in LIFE_CYCLE {
            id += 1;
            let data: Value = serde_json::from_str(data).expect("static JSON");
            let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            let line =
                json!({"event_id": id, "event_type": event_type, "plan_id": format!("plan-{plan}"),
                              "data": data, "timestamp": ts})
                .to_string();
            feed.publish(id, line);
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        if Arc::strong_count(&feed) == 1 {
            return;
        }
    }
}

#[derive(serde::Deserialize)]
struct After {
    after: Option<u64>,
}

async fn events(
    State(feed): State<Arc<EventFeed>>,
    Query(q): Query<After>,
) -> axum::response::Response {
    let after = q.after.unwrap_or(0);
    let (backlog, mut live) = {
        let h = feed.history.lock().unwrap_or_else(|e| e.into_inner());
        let backlog: Vec<(u64, String)> = h.iter().filter(|(id, _)| *id > after).cloned().collect();
        (backlog, feed.live.subscribe())
    };
    let body = async_stream::stream! {
        for (_, line) in backlog {
            yield Ok::<_, std::convert::Infallible>(format!("{line}\n"));
        }
        while let Ok((_, line)) = live.recv().await {
            yield Ok(format!("{line}\n"));
        }
    };
    (
        [("content-type", "application/x-ndjson")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}
